"""Candidates, their check on the example inputs, and the rewrite of the graph.

A pass proposes :class:`Candidate` regions; nothing is rewritten until every candidate has been
checked against the result the region itself computes on real example values (one interpreted
run of the unmodified graph, written by hand because ``torch.fx.Interpreter`` keeps no values
once their last user ran). A candidate whose replacement differs beyond the tolerance, or that a
pass recognised but could not rewrite, becomes a refused :class:`Rewrite` with the reason.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from srbench.graph.eager_layout import same_layout


class RewriteOutcome(enum.Enum):
    APPLIED = "applied"
    REFUSED = "refused"  # changes the result beyond the tolerance, or recognised but not rewritable
    SLOWER = "slower"  # within the tolerance, but the rewritten program measured slower: not used


@dataclass(frozen=True)
class Rewrite:
    """What one candidate came to: ``node`` is the graph node whose result the region computed
    (its name in the captured graph), ``replacement`` what runs instead when applied."""

    pass_name: str
    node: str
    replacement: str
    outcome: RewriteOutcome
    reason: str = ""
    max_difference: float | None = None  # on the example inputs, against the region's own result
    taken_by: str = ""  # the pass whose candidate, earlier in order, rewrote part of this region


@dataclass(frozen=True)
class PassContext:
    """What passes read: the graph, the model it came from (for module types and attributes),
    the export's signature (which placeholder is which parameter) and the real placeholder values."""

    graph_module: torch.fx.GraphModule
    model: torch.nn.Module
    exported: torch.export.ExportedProgram
    values: Mapping[str, Any]

    @property
    def graph(self) -> torch.fx.Graph:
        return self.graph_module.graph

    def parameter_nodes(self) -> dict[str, torch.fx.Node]:
        """Placeholder nodes of parameters and buffers by their fully qualified name."""
        signature = self.exported.graph_signature
        names = {**signature.inputs_to_parameters, **signature.inputs_to_buffers}
        return {names[node.name]: node for node in self.graph.nodes if node.op == "placeholder" and node.name in names}


@dataclass(frozen=True)
class Candidate:
    """A region of the graph and what could replace it.

    ``region`` are the nodes the replacement makes dead (``output``, the one whose result leaves
    the region, among them); ``compute`` gives the replacement's result from the real values of
    the nodes in ``reads`` (by node name), ``build`` inserts the replacement's nodes before
    ``output`` and returns the node that stands for it; it reads its argument nodes through the
    function it is given, which maps a node an earlier rewrite replaced to its replacement.
    ``refused`` is set when a pass recognised the region but cannot rewrite it: the reason,
    reported as it is.
    """

    pass_name: str
    output: torch.fx.Node
    replacement: str
    region: tuple[torch.fx.Node, ...] = ()
    reads: tuple[torch.fx.Node, ...] = ()
    compute: Callable[[Mapping[str, Any]], Any] | None = None
    build: Callable[[torch.fx.Graph, Callable[[torch.fx.Node], torch.fx.Node]], torch.fx.Node] | None = None
    refused: str | None = None
    new_constants: Mapping[str, torch.Tensor] = field(default_factory=dict)
    tail_only: bool = False  # applied only with every later candidate of its pass (in graph order)

    def refuse(self, reason: str, difference: float | None = None, taken_by: str = "") -> Rewrite:
        return Rewrite(
            self.pass_name,
            self.output.name,
            self.replacement,
            RewriteOutcome.REFUSED,
            reason,
            max_difference=difference,
            taken_by=taken_by,
        )


Pass = Callable[[PassContext], Iterable[Candidate]]


def _type_name(value: Any) -> str:
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


def sequence_input(
    nodes: Iterable[torch.fx.Node], ignored: Collection[torch.fx.Node], others_mean: str
) -> tuple[torch.fx.Node | None, str]:
    """The one node ``nodes`` read from outside themselves and ``ignored`` (a transformer layer's
    or an attention's input), where they read one and it holds a 3-D tensor; else ``None`` and
    why not (``others_mean``: what reading more than one says about the region)."""
    inside = set(nodes)
    external = {arg for node in inside for arg in node.all_input_nodes if arg not in inside and arg not in ignored}
    if len(external) != 1:
        return None, f"reads {sorted(node.name for node in external)}: {others_mean}"
    (source,) = external
    value = source.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dim() != 3:
        return None, "its input is not a 3-D tensor"
    return source, ""


def module_regions(graph: torch.fx.Graph, module_type: type) -> dict[str, list[torch.fx.Node]]:
    """The ops of each call of a ``module_type`` module (the outermost, where they nest), by the
    module's path, in graph order: found by the ``nn_module_stack`` export keeps on every node."""
    wanted = _type_name(module_type)
    regions: dict[str, list[torch.fx.Node]] = {}
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        for path, stacked_type in (node.meta.get("nn_module_stack") or {}).values():
            if _type_name(stacked_type) == wanted:
                regions.setdefault(path, []).append(node)
                break
    return regions


aten = torch.ops.aten
# Ops whose result depends on how their input is laid out, not only on its values: a view finds
# its shape in the input's strides (and fails where it cannot), ``as_strided`` reads the memory as
# it lies. ``torch.export`` records a ``reshape`` or ``flatten`` of a contiguous tensor as a view.
_LAYOUT_BOUND = frozenset(
    {
        aten.view.default,
        aten._unsafe_view.default,
        aten.as_strided.default,
        aten.view.dtype,
        aten.view_as_complex.default,
    }
)
# For each layout-bound op of the captured graph, the strides its input had when captured.
Layouts = Mapping[str, tuple[int, ...]]


class LayoutChanged(RuntimeError):
    """A rewrite changed the layout of a layout-bound op's input to one that cannot be restored
    by a contiguous copy."""


def _captured_layouts(graph: torch.fx.Graph) -> dict[str, tuple[int, ...]]:
    layouts = {}
    for node in graph.nodes:
        if node.op == "call_function" and node.target in _LAYOUT_BOUND and isinstance(node.args[0], torch.fx.Node):
            meta = node.args[0].meta.get("val")
            if isinstance(meta, torch.Tensor):
                layouts[node.name] = tuple(meta.stride())
    return layouts


def _contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _in_layout(value: Any, wanted: tuple[int, ...]) -> Any:
    """``value`` as a layout-bound op captured with input strides ``wanted`` must see it: as it is,
    or copied contiguous where a rewrite upstream changed its layout (channels-last results of
    oneDNN's convolutions, say); see :func:`_restore_layouts`, which does the same in the graph."""
    if not isinstance(value, torch.Tensor) or same_layout(value.shape, value.stride(), wanted):
        return value
    if not same_layout(value.shape, _contiguous_strides(value.shape), wanted):
        raise LayoutChanged(f"a rewrite changed the layout of a tensor read as laid out (strides {wanted})")
    return value.clone(memory_format=torch.contiguous_format)


def _record(
    graph_module: torch.fx.GraphModule,
    values: Mapping[str, Any],
    wanted: set[str],
    replaced: Sequence[Candidate] = (),
    layouts: Layouts | None = None,
) -> dict[str, Any]:
    """Run the graph on ``values`` once and keep the values of the ``wanted`` nodes. The result
    of each ``replaced`` candidate's region is its replacement's instead, so what follows the
    region computes on what the rewritten graph would give it; the layout-bound ops in
    ``layouts`` read their input in the layout it was captured with, as they do once rewritten."""
    layouts = layouts if layouts is not None else {}
    env: dict[str, Any] = {}
    kept: dict[str, Any] = {}
    nodes = list(graph_module.graph.nodes)
    position = {node: index for index, node in enumerate(nodes)}
    last_use = {node: index for index, user in enumerate(nodes) for node in user.all_input_nodes}
    replacing = {candidate.output: candidate for candidate in replaced}
    for candidate in replaced:  # what a replacement reads lives until it ran
        for node in candidate.reads:
            last_use[node] = max(last_use.get(node, 0), position[candidate.output])
    for index, node in enumerate(nodes):
        if node.op == "placeholder":
            env[node.name] = values[node.name]
        elif node.op == "get_attr":
            env[node.name] = getattr(graph_module, str(node.target))
        elif node in replacing:
            candidate = replacing[node]
            assert candidate.compute is not None
            env[node.name] = candidate.compute({read.name: env[read.name] for read in candidate.reads})
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, lambda arg: env[arg.name])
            kwargs = torch.fx.node.map_arg(node.kwargs, lambda arg: env[arg.name])
            if node.name in layouts:
                args = (_in_layout(args[0], layouts[node.name]), *args[1:])
            env[node.name] = node.target(*args, **kwargs)
        if node.name in wanted:
            kept[node.name] = env[node.name]
        for used in node.all_input_nodes:
            if last_use.get(used) == index:
                env.pop(used.name, None)
        if len(kept) == len(wanted):
            break
    return kept


def _graph_outputs(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    output = next(node for node in graph.nodes if node.op == "output")
    return list(output.all_input_nodes)


def _difference(got: Any, want: Any) -> float:
    if isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor):
        if got.shape != want.shape or got.dtype != want.dtype:
            return float("inf")
        if not got.is_floating_point():
            return 0.0 if torch.equal(got, want) else float("inf")
        return float((got - want).abs().max()) if got.numel() else 0.0
    return float("inf")


def _within(got: Any, want: Any, rtol: float, atol: float) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and isinstance(want, torch.Tensor)
        and got.shape == want.shape
        and got.dtype == want.dtype
        and bool(torch.allclose(got, want, rtol=rtol, atol=atol))
    )


def _inputs_for_probe(context: PassContext) -> dict[str, Any]:
    """Placeholder values safe to run the graph on: buffers and user inputs cloned, so that a
    graph that writes one in place leaves the model and the caller's inputs as they were."""
    parameters = set(context.exported.graph_signature.inputs_to_parameters)
    return {
        name: value.clone() if isinstance(value, torch.Tensor) and name not in parameters else value
        for name, value in context.values.items()
    }


def _refresh_metadata(context: PassContext, layouts: Layouts) -> None:
    """Give every op node the metadata of what it now computes (a rewrite may change layouts
    downstream: oneDNN's convolutions return channels-last tensors), from one run of the
    rewritten graph on the example values, as FakeTensors like ``torch.export``'s own."""
    graph = context.graph
    ops = {node.name for node in graph.nodes if node.op == "call_function"}
    with torch.no_grad():
        values = _record(context.graph_module, _inputs_for_probe(context), ops, layouts=layouts)
    fake = FakeTensorMode()
    for node in graph.nodes:
        if node.name in values:
            node.meta["val"] = pytree.tree_map_only(torch.Tensor, fake.from_tensor, values[node.name])


def _strides(node: torch.fx.Node) -> tuple[int, ...] | None:
    meta = node.meta.get("val")
    return tuple(meta.stride()) if isinstance(meta, torch.Tensor) else None


def _laid_out_as(node: torch.fx.Node, strides: tuple[int, ...] | None) -> bool:
    meta = node.meta.get("val")
    return isinstance(meta, torch.Tensor) and strides is not None and same_layout(meta.shape, meta.stride(), strides)


def _output_strides(graph: torch.fx.Graph) -> list[tuple[tuple[int, ...] | None, tuple[int, ...] | None]]:
    """The strides of the graph's outputs, by position, each with the strides of the tensor its
    chain of views starts from (itself where it is no view)."""
    output = next(node for node in graph.nodes if node.op == "output")
    strides: list[tuple[tuple[int, ...] | None, tuple[int, ...] | None]] = []

    def note(node: torch.fx.Node) -> torch.fx.Node:
        strides.append((_strides(node), _strides(_view_chain(node)[0])))
        return node

    torch.fx.node.map_arg(output.args, note)
    return strides


def _contiguous_copy(graph: torch.fx.Graph, node: torch.fx.Node, before: torch.fx.Node) -> torch.fx.Node:
    meta = node.meta["val"]
    with graph.inserting_before(before):
        copy = graph.call_function(aten.clone.default, (node,), {"memory_format": torch.contiguous_format})
    copy.meta["val"] = meta.clone(memory_format=torch.contiguous_format)
    return copy


def _restore_layouts(
    graph: torch.fx.Graph,
    layouts: Layouts,
    output_strides: Sequence[tuple[tuple[int, ...] | None, tuple[int, ...] | None]],
) -> None:
    """Layout-bound ops whose input a rewrite laid out otherwise read a contiguous copy of it, as
    captured (a ``view`` of a channels-last convolution result would fail, an ``as_strided``
    would read other elements); :func:`_in_layout` does the same when the graph is checked. And
    graph outputs whose strides a rewrite changed are that copy too, in their original layout, and
    so are outputs viewing a tensor whose layout it changed (a ``flatten`` or ``reshape`` of a
    channels-last result is a copy with the strides captured, no longer a view of its base).
    One copy per tensor, made before its first such reader: the outputs then share memory as
    eager's do (a tensor returned twice is one tensor, a returned view sees its returned base)."""
    copies: dict[torch.fx.Node, torch.fx.Node] = {}

    def copy_of(source: torch.fx.Node, before: torch.fx.Node) -> torch.fx.Node:
        if source not in copies:
            copies[source] = _contiguous_copy(graph, source, before)
        return copies[source]

    for node in list(graph.nodes):
        wanted = layouts.get(node.name) if node.op == "call_function" else None
        source = node.args[0] if wanted is not None else None
        meta = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if not isinstance(meta, torch.Tensor) or same_layout(meta.shape, meta.stride(), wanted or ()):
            continue
        assert isinstance(source, torch.fx.Node)
        node.args = (copy_of(source, node), *node.args[1:])
    output = next(node for node in graph.nodes if node.op == "output")
    position = iter(range(len(output_strides)))

    def restore(node: torch.fx.Node) -> torch.fx.Node:
        (wanted, root_wanted), meta = output_strides[next(position)], node.meta.get("val")
        if wanted is None or not isinstance(meta, torch.Tensor):
            return node
        root, views = _view_chain(node)
        # strides compared as layouts: a dimension of size 1 (a batch of one) may have any stride,
        # and a lowering or a rewrite upstream can give it another (CvT's last hidden state, a
        # view of a permute at batch 1, was copied contiguous for a batch stride of 48 against 240)
        if _laid_out_as(node, wanted) and (not views or _laid_out_as(root, root_wanted)):
            return node
        if views:
            replayed = _replay_views(graph, views, copy_of(root, output), output)
            if _laid_out_as(replayed, wanted):
                left.extend(views)
                return replayed
            _erase_chain(graph, replayed, views)
        return copy_of(node, output)

    left: list[torch.fx.Node] = []  # views replayed on a copy, dead unless something else reads them
    output.args = torch.fx.node.map_arg(output.args, restore)
    for view in reversed(left):
        if not view.users:
            graph.erase_node(view)


def _is_view(target: object) -> bool:
    """Whether an op's result may alias its first argument (``Tensor(a) self -> Tensor(a)``:
    views, and ``reshape``/``flatten``, which view where the layout allows)."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if not schema.arguments or len(schema.returns) != 1:
        return False
    argument, result = schema.arguments[0].alias_info, schema.returns[0].alias_info
    return argument is not None and not argument.is_write and result is not None and not result.is_write


def _view_chain(node: torch.fx.Node) -> tuple[torch.fx.Node, list[torch.fx.Node]]:
    """The node a chain of views starts from, and the views from it down to ``node``."""
    views = []
    while node.op == "call_function" and _is_view(node.target) and isinstance(node.args[0], torch.fx.Node):
        views.append(node)
        node = node.args[0]
    return node, views[::-1]


def _replay_views(
    graph: torch.fx.Graph, views: Sequence[torch.fx.Node], base: torch.fx.Node, before: torch.fx.Node
) -> torch.fx.Node:
    """The chain of ``views`` taken again from ``base`` (a contiguous copy of their root), with
    metadata from running each view on the one before's FakeTensor."""
    for view in views:
        target = view.target
        assert callable(target)  # an OpOverload (_view_chain)
        with graph.inserting_before(before):
            base = graph.call_function(target, (base, *view.args[1:]), dict(view.kwargs))
        args = torch.fx.node.map_arg(base.args, lambda arg: arg.meta["val"])
        base.meta["val"] = target(*args, **base.kwargs)
    return base


def _erase_chain(graph: torch.fx.Graph, last: torch.fx.Node, views: Sequence[torch.fx.Node]) -> None:
    node: Any = last
    for _ in views:
        previous = node.args[0]
        graph.erase_node(node)
        node = previous


def _rewrite(
    graph_module: torch.fx.GraphModule, candidate: Candidate, substitutes: dict[torch.fx.Node, torch.fx.Node]
) -> None:
    graph = graph_module.graph
    assert candidate.build is not None
    for name, value in candidate.new_constants.items():
        graph_module.register_buffer(name, value)

    def current(node: torch.fx.Node) -> torch.fx.Node:
        while node in substitutes:
            node = substitutes[node]
        return node

    with graph.inserting_before(candidate.output):
        replacement = candidate.build(graph, current)
    region = set(candidate.region)
    candidate.output.replace_all_uses_with(replacement, delete_user_cb=lambda user: user not in region)
    substitutes[candidate.output] = replacement
    for node in reversed(candidate.region):
        graph.erase_node(node)


def _faithful_run(
    context: PassContext,
    accepted: Sequence[Candidate],
    expected: Mapping[str, Any],
    layouts: Layouts,
    rtol: float,
    atol: float,
) -> tuple[list[Candidate], float]:
    """The most of ``accepted`` (in graph order) that can be applied together with the model's
    outputs still within the tolerance of the unmodified graph's, and the largest output
    difference found once one more is added. Errors of folded arithmetic compound with depth, so
    the check is end to end: the set is the longer of the longest faithful prefix and the longest
    faithful suffix, each found by bisection (a few runs of the graph). A suffix often goes
    further, an error made late passing through fewer layers (ResNet-50 at 1e-4: 9 of its 53
    fused convolutions as a prefix, 51 as a suffix). A prefix loses the candidates of a
    :attr:`~Candidate.tail_only` pass it does not hold whole (and is checked again)."""

    def difference(chosen: Sequence[Candidate]) -> float:
        """0 when the outputs stay within the tolerance with ``chosen`` applied, else by how much
        they change."""
        try:
            with torch.no_grad():
                got = _record(context.graph_module, _inputs_for_probe(context), set(expected), chosen, layouts)
        except LayoutChanged:
            return float("inf")
        if all(_within(got[name], want, rtol, atol) for name, want in expected.items()):
            return 0.0
        return max(_difference(got[name], want) for name, want in expected.items())

    everything = difference(accepted)
    if everything == 0.0:
        return list(accepted), 0.0

    def longest(ordered: Sequence[Candidate]) -> tuple[int, float]:
        """How many of ``ordered``, from its start, keep the outputs within the tolerance, and the
        difference once one more is added."""
        low, high, worst = 0, len(ordered), everything  # the first `low` are within, the first `high` not
        while high - low > 1:
            middle = (low + high) // 2
            found = difference(ordered[:middle])
            if found == 0.0:
                low = middle
            else:
                high, worst = middle, found
        return low, worst

    count, prefix_worst = longest(accepted)
    cut = {c.pass_name for c in accepted[count:] if c.tail_only}
    prefix = [c for c in accepted[:count] if c.pass_name not in cut]
    if len(prefix) < count and difference(prefix) != 0.0:
        prefix = []
    suffix_count, suffix_worst = longest(accepted[::-1]) if len(prefix) < len(accepted) - 1 else (0, 0.0)
    if suffix_count > len(prefix):
        return list(accepted[len(accepted) - suffix_count :]), suffix_worst
    return prefix, prefix_worst


def apply_passes(context: PassContext, passes: Sequence[Pass], *, rtol: float, atol: float) -> tuple[Rewrite, ...]:
    """Run ``passes`` over ``context.graph_module``, check their candidates on the example values
    and rewrite the graph (in place) with those within ``rtol``/``atol`` of the region's own
    result, as long as the graph's outputs stay within ``rtol``/``atol`` of the unmodified
    graph's. Returns what became of every candidate."""
    candidates = [candidate for run in passes for candidate in run(context)]
    rewrites: list[Rewrite] = [c.refuse(c.refused) for c in candidates if c.refused is not None]
    checkable = [c for c in candidates if c.refused is None]
    if not checkable:
        return tuple(rewrites)
    outputs = {node.name for node in _graph_outputs(context.graph)}
    wanted = {node.name for c in checkable for node in (*c.reads, c.output)} | outputs
    with torch.no_grad():
        recorded = _record(context.graph_module, _inputs_for_probe(context), wanted)
    output_strides = _output_strides(context.graph)
    layouts = _captured_layouts(context.graph)
    taken: dict[torch.fx.Node, Candidate] = {}
    accepted: list[tuple[Candidate, float]] = []
    for candidate in checkable:
        assert candidate.compute is not None
        overlap = next((taken[node] for node in candidate.region if node in taken), None)
        if overlap is not None:
            rewrites.append(
                candidate.refuse(
                    f"overlaps a region already rewritten ({overlap.pass_name} at {overlap.output.name})",
                    taken_by=overlap.pass_name,
                )
            )
            continue
        want = recorded[candidate.output.name]
        try:
            with torch.no_grad():
                got = candidate.compute({node.name: recorded[node.name] for node in candidate.reads})
        except Exception as error:  # a replacement that cannot run here is simply not used
            rewrites.append(candidate.refuse(f"the replacement failed on the example inputs: {error}"))
            continue
        difference = _difference(got, want)
        if not _within(got, want, rtol, atol):
            rewrites.append(
                candidate.refuse(
                    f"changes the result by up to {difference:.3g} on the example inputs "
                    f"(beyond rtol={rtol:g}, atol={atol:g})",
                    difference,
                )
            )
            continue
        taken.update(dict.fromkeys(candidate.region, candidate))
        accepted.append((candidate, difference))
    expected = {name: recorded[name] for name in outputs}
    kept = [candidate for candidate, _ in accepted]
    faithful, worst = _faithful_run(context, kept, expected, layouts, rtol, atol)
    applied = {id(candidate) for candidate in faithful}
    substitutes: dict[torch.fx.Node, torch.fx.Node] = {}
    for candidate, difference in accepted:
        if id(candidate) not in applied:
            rewrites.append(
                candidate.refuse(
                    f"compounds with the {len(faithful)} rewrites kept: the model's outputs would change "
                    f"by up to {worst:.3g} on the example inputs (beyond rtol={rtol:g}, atol={atol:g})",
                    difference,
                )
            )
            continue
        _rewrite(context.graph_module, candidate, substitutes)
        rewrites.append(
            Rewrite(
                candidate.pass_name,
                candidate.output.name,
                candidate.replacement,
                RewriteOutcome.APPLIED,
                max_difference=difference,
            )
        )
    if applied:
        _refresh_metadata(context, layouts)
        _restore_layouts(context.graph, layouts, output_strides)
    context.graph_module.graph.lint()
    context.graph_module.recompile()
    return tuple(rewrites)
