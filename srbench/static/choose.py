"""How each node of a prepared graph runs, once op resolution and lifetimes are known.

:class:`Chooser` turns the resolver's findings into one :class:`NodePlan` per node, whose
:class:`RunAs` says how it runs: out variant into the slab or the output arena, fallback (its
results served from the slab where the allocator hook can, :mod:`srbench.static.serving`), native
(views, in-place ops; made once per runtime when static), folded into a constant, or skipped.
The code generator (``codegen.py``) and the profile read these plans; nothing else decides.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.utils import _pytree as pytree

from srbench.graph.nodes import getitem_parts, op_schema, written_arguments
from srbench.memory.lifetimes import LifetimeAnalysis
from srbench.options import StaticOptions
from srbench.static.calls import Call
from srbench.static.resolve import Category, Resolution
from srbench.static.serving import Serving
from srbench.static.view_tracking import ViewTracking, functional


def _views_as_captured(node: torch.fx.Node) -> bool:
    """Whether ``node``'s op returns views of its arguments, not copies, on arguments laid out as
    captured. A static view is made once per runtime from fixed tensors, the slab's among them,
    which have the captured strides; the resolver saw the op on eager's values, whose strides can
    differ (a kernel's result laid out otherwise than its metadata: batch norm of a transposed
    input is contiguous, its fake result strided like the input; a convolution's channels-last
    fake result is contiguous for real). Where ``contiguous`` (or ``reshape``, ``to``) aliased on
    eager's values and copies on the slab's, the copy was made once and every run read it stale
    (diffusers' VQModel: ``z_q.permute(0, 3, 1, 2).contiguous()`` gave NaN). The op runs on
    ``meta`` tensors with the captured strides; a result sharing no storage with an argument is a
    copy, and so is anything that cannot be told."""

    def on_meta(argument: torch.fx.Node) -> Any:
        fake = argument.meta.get("val")
        if not isinstance(fake, torch.Tensor):
            return fake
        return torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype, device="meta")

    try:
        args, kwargs = torch.fx.node.map_arg((node.args, dict(node.kwargs)), on_meta)
        result = node.target(*args, **kwargs)  # type: ignore[operator]
    except Exception:  # symbolic sizes, an op without a meta kernel: not known to view
        return False
    storages = {t.untyped_storage()._cdata for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
    results = [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]
    return all(t.untyped_storage()._cdata in storages for t in results)


class RunAs(enum.Enum):
    """How one node runs; chosen once, at prepare time. The values are what profiles print."""

    OUT = "out"  # its out variant writes into the slab (or the output arena, or an output hosting intermediates)
    OUT_FRESH = "out_fresh"  # only an out variant works and nothing manages its results: fresh buffers each run
    NATIVE = "native"  # views, in-place ops, getitem, opaque calls: as they are, nothing allocated for them
    FALLBACK = "fallback"  # the op allocates its own results
    SERVED = "served"  # the op allocates its results, served from the slab by the allocator hook (serving.py)
    CONSTANT = "constant"  # computed from constants only: folded at prepare time
    SKIP = "skip"  # asserts what the runtime already guarantees: not run

    @property
    def runs_code(self) -> bool:
        """Whether the node has a call (folded and skipped nodes have none)."""
        return self not in (RunAs.CONSTANT, RunAs.SKIP)


@dataclass(frozen=True)
class NodePlan:
    """The prepared decision for one node: how it runs, the call, and where its results go.

    ``result_storages`` are the storage ids of its results (``OUT``: where in the slab or arena);
    ``inplace_of`` names the argument node an in-place op writes (its value is that node's);
    ``static``: a view or getitem of fixed objects, made once per runtime instead of every run;
    ``constant``: the folded value (``CONSTANT``); ``allocating`` (``OUT``): the op's call that
    allocates its result in the planned geometry, where the resolver found one (what makes a
    run buffer this op writes first, see :meth:`srbench.static.codegen.CodeWriter.node_lines`);
    ``serving`` (``SERVED``): which of the op's allocations become which results in the slab;
    ``tracking``: whether its call runs below ``ADInplaceOrView`` (:mod:`srbench.static.view_tracking`).
    """

    node: torch.fx.Node
    how: RunAs
    kind: str
    call: Call | None
    result_storages: tuple[str | None, ...] = ()
    inplace_of: str | None = None
    static: bool = False
    constant: Any = None
    allocating: Call | None = None
    serving: Serving | None = None
    tracking: ViewTracking = ViewTracking.KEPT

    def __post_init__(self) -> None:
        if self.how.runs_code and self.call is None:
            raise ValueError(f"node {self.node.name!r} runs as {self.how.value} but has no call")
        if (self.how is RunAs.SERVED) != (self.serving is not None):
            raise ValueError(f"node {self.node.name!r} runs as {self.how.value}: a serving goes with served only")

    @property
    def managed_storages(self) -> tuple[str, ...]:
        """The storages of its results that live in the slab or the arena: every result of an
        out variant, the served results of a ``SERVED`` op."""
        if self.how is RunAs.OUT:
            return tuple(s for s in self.result_storages if s is not None)
        if self.serving is not None:
            return tuple(s for r in self.serving.results if (s := self.result_storages[r.result]) is not None)
        return ()

    @property
    def served_regions(self) -> tuple[tuple[str, int], ...]:
        """The slab record and bytes of each allocation a ``SERVED`` op has served, in the order
        it is armed with their addresses: its results, then its scratch."""
        serving = self.serves
        results = tuple((self.result_storages[r.result] or "", r.nbytes) for r in serving.results)
        return results + tuple((s.id(self.node.name), s.nbytes) for s in serving.scratch)

    @property
    def serves(self) -> Serving:
        """The serving of a ``SERVED`` node."""
        if self.serving is None:
            raise ValueError(f"node {self.node.name!r} ({self.how.value}) is not served")
        return self.serving

    @property
    def runs(self) -> Call:
        """The call of a node that runs code."""
        if self.call is None:
            raise ValueError(f"node {self.node.name!r} ({self.how.value}) runs no code")
        return self.call


# Below this many seconds per call an op's cost is mostly how it is called, not its kernel.
OVERHEAD_BOUND = 50e-6
# An out variant whose kernel took this many times the fallback's is a different, slow kernel.
SLOWER_KERNEL = 3.0


def written_storages(graph: torch.fx.Graph, analysis: LifetimeAnalysis) -> set[str]:
    """Storages some op of the graph writes in place."""
    return {
        analysis.storage_of[argument.name]
        for node in graph.nodes
        for argument in written_arguments(node)
        if argument.name in analysis.storage_of
    }


def _geometry(value: Any) -> tuple:
    return (tuple(value.shape), value.stride(), value.storage_offset()) if isinstance(value, torch.Tensor) else ()


def _metadata_mutated(
    graph: torch.fx.Graph, resolutions: Mapping[str, Resolution], analysis: LifetimeAnalysis
) -> set[str]:
    """Storages an in-place op changes the shape or strides of (``t_``, ``unsqueeze_``): their
    tensor objects cannot be made once and reused, so they are never managed nor static."""
    mutated = set()
    for node in graph.nodes:
        resolution = resolutions.get(node.name)
        if resolution is None or resolution.category is not Category.INPLACE:
            continue
        base = node.all_input_nodes[0] if node.all_input_nodes else None
        if base is not None and _geometry(node.meta.get("val")) != _geometry(base.meta.get("val")):
            mutated.add(analysis.storage_of.get(base.name, base.name))
    return mutated


def _inplace_target(node: torch.fx.Node) -> str | None:
    schema = op_schema(node)
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            value = (
                node.args[index]
                if index < len(node.args) and not argument.kwarg_only
                else node.kwargs.get(argument.name)
            )
            if isinstance(value, torch.fx.Node):
                return value.name
    return None


def _out_is_slower(resolution: Resolution) -> bool:
    """An out variant reachable only through a slow path (a raw ``.out`` overload, parsed
    against its schema at every call) can cost more than the allocation it saves. That only
    matters where calling overhead dominates: ops that ran under :data:`OVERHEAD_BOUND` seconds
    at prepare time use the fallback when it was clearly faster; for longer ops the kernel
    dominates and timings differ by noise, so the out variant (no allocation) is kept unless its
    kernel is another, much slower one (:data:`SLOWER_KERNEL` times the fallback's: ``linear.out``
    on a transposed input, as ``nn.MultiheadAttention`` feeds it, skips BLAS and took 5x)."""
    out, fallback = resolution.out_seconds, resolution.fallback_seconds
    if resolution.out is None or out is None or fallback is None:
        return False
    if out > OVERHEAD_BOUND:
        return out > SLOWER_KERNEL * fallback
    if not resolution.out.parses_schema:
        return False  # through a C binding an out variant costs no more than the op itself
    return out > 1.25 * fallback + 2e-6


class Chooser:
    """Chooses how each node runs once lifetimes are known.

    A functional op runs as out variant when enabled, all its results can live in the slab
    (intermediates) or the output arena (outputs, with ``manage_output_tensors``), or its one result
    is an output the run allocates because it hosts intermediates (:mod:`srbench.static.hosting`),
    and it is not clearly slower than the fallback; otherwise as fallback, or, if only an out variant works,
    into fresh tensors. A view or ``getitem`` whose
    inputs are fixed objects (constants, managed tensors, other such views) is made once per
    runtime instead of at every run, unless it is a graph output.
    """

    def __init__(
        self,
        graph: torch.fx.Graph,
        resolutions: Mapping[str, Resolution],
        analysis: LifetimeAnalysis,
        options: StaticOptions,
        constant_nodes: set[str],
        device: torch.device,
        reuses: Mapping[str, str] | None = None,
        *,
        hosts: frozenset[str] = frozenset(),
        hosted: frozenset[str] = frozenset(),
    ):
        """``reuses``: nodes that write their result over a dying input, to the input's node
        (:mod:`srbench.static.reuse`; ``analysis`` gives them that input's storage). ``hosts``:
        output storages a single-result out variant may write (allocated by the run, see
        :mod:`srbench.static.hosting`); ``hosted``: intermediates placed in them. Tensors of both
        are made at every run, so nothing made from them is made once per runtime."""
        self.graph = graph
        self.reuses = reuses or {}
        self.hosts = hosts
        self.per_run = hosts | hosted
        self.resolutions = resolutions
        self.analysis = analysis
        self.options = options
        self.device = device
        self.allowed = {record.id for record in analysis.records}
        if options.manage_output_tensors:
            self.allowed |= {record.id for record in analysis.output_records}
        self.intermediates = {record.id: record.size for record in analysis.records}
        self.unmanageable = _metadata_mutated(self.graph, resolutions, analysis)
        # folded results must never change: not written in place, not handed to the caller
        self.output_ids = {r.id for r in analysis.output_records}
        self.unfoldable = written_storages(self.graph, analysis) | self.output_ids
        self.fixed: set[str] = set(constant_nodes)  # nodes whose value object is the same at every run
        self.how: dict[str, RunAs] = {}
        output = next(node for node in self.graph.nodes if node.op == "output")
        self.output_nodes = {node.name for node in output.all_input_nodes}
        self.arena = self.output_ids if options.manage_output_tensors else set()

    def _write_tracking(
        self, node: torch.fx.Node, how: RunAs, storages: tuple[str | None, ...], measured: ViewTracking
    ) -> ViewTracking:
        """Whether a functional node's call runs below ``ADInplaceOrView``, where the caller sees
        its writes in an output's version counter. Below the autograd keys alone, a kernel's own
        writes into its result (``addmm`` fills a fresh result through an inner out call) and an
        out variant's write are counted; eager's autograd kernel sends a functional op below the
        key as well, so eager's result comes back at version 0. A node whose result is (or is
        hosted in the bytes of) an output the run makes afresh therefore runs below the key, as
        eager's does (such outputs came back at version 1). An out variant writing the arena of
        ``manage_output_tensors`` rewrites the tensor the caller got from the previous run: it
        keeps the key, so that tensor's version counter moves and autograd's saved-tensor check
        refuses a backward over its old value (below the key a timing chose, it gave a wrong
        gradient without a word). A call whose results differ below the key keeps it
        (:attr:`ViewTracking.NEEDED`). Elsewhere the timing's ``measured`` decides."""
        if how is RunAs.OUT and any(s in self.arena for s in storages):
            return ViewTracking.KEPT
        if measured is ViewTracking.NEEDED:
            return ViewTracking.KEPT
        if functional(node.target) and any(s in self.per_run or s in self.output_ids for s in storages):
            return ViewTracking.SKIPPED
        return measured

    def _can_manage(self, node: torch.fx.Node, storages: tuple[str | None, ...]) -> bool:
        meta = node.meta.get("val")
        values = list(meta) if isinstance(meta, (list, tuple)) else [meta]
        return (
            bool(storages)
            and all(
                s is not None
                and (s in self.allowed or (s in self.hosts and len(storages) == 1))
                and s not in self.unmanageable
                for s in storages
            )
            and all(isinstance(v, torch.Tensor) and v.device == self.device for v in values)
        )

    def _serving(self, resolution: Resolution, storages: tuple[str | None, ...]) -> Serving | None:
        """What the slab serves of a fallback's results: the intermediates (not written into by
        a host) among them, no other result's, each at most the bytes the plan gives it. Never an
        output, even into the arena of ``manage_output_tensors``: a served tensor does not own its
        bytes, and the caller's output must keep them alive (an arena view holds the arena's
        storage; a served output would dangle once its runtime is gone)."""
        serving = resolution.serving
        if serving is None or not (self.options.enable_out_variant and self.options.serve_fallbacks):
            return None
        counts = {s: storages.count(s) for s in storages}
        kept = [
            result.result
            for result in serving.results
            if result.result < len(storages)
            and (storage := storages[result.result]) is not None
            and storage in self.intermediates
            and storage not in self.unmanageable
            and storage not in self.per_run
            and counts[storage] == 1
            and result.nbytes <= self.intermediates[storage]
        ]
        # scratch served with one stream only: only its planner sees lifetimes within an op
        return serving.only(kept, scratch=self.options.streams == 1)

    def _foldable(self, node: torch.fx.Node) -> bool:
        storages = self.analysis.outputs_of.get(node.name) or (self.analysis.storage_of.get(node.name),)
        return node.name not in self.output_nodes and not any(s in self.unfoldable for s in storages)

    def _may_be_static(self, node: torch.fx.Node) -> bool:
        return (
            all(arg.name in self.fixed for arg in node.all_input_nodes)
            and node.name not in self.output_nodes
            and self.analysis.storage_of.get(node.name) not in self.unmanageable
            and (not isinstance(node.target, torch._ops.OpOverload) or _views_as_captured(node))
        )

    def choose(self, node: torch.fx.Node) -> NodePlan:
        resolution = self.resolutions[node.name]
        kind, category, native = resolution.kind, resolution.category, resolution.native
        if category is Category.SKIP:
            return NodePlan(node, RunAs.SKIP, kind, None)
        if resolution.foldable and self._foldable(node):
            self.fixed.add(node.name)
            return NodePlan(node, RunAs.CONSTANT, kind, None, constant=resolution.constant)
        if category is Category.FUNCTIONAL and self.how.get(self.reuses.get(node.name, "")) is RunAs.OUT:
            storage = self.analysis.storage_of[node.name]  # the input's, which dies here
            if storage not in self.per_run:  # the slab's tensor, as the input's: views of it made once
                self.fixed.add(node.name)
            tracking = self._write_tracking(node, RunAs.OUT, (storage,), resolution.out_tracking)
            return NodePlan(node, RunAs.OUT, kind, resolution.out, (storage,), tracking=tracking)
        if category is Category.FUNCTIONAL:
            storages = self.analysis.outputs_of.get(node.name, ())
            if (
                resolution.out is not None
                and self.options.enable_out_variant
                and self._can_manage(node, storages)
                and not _out_is_slower(resolution)
            ):
                if len(storages) == 1 and storages[0] not in self.per_run:
                    self.fixed.add(node.name)
                allocating = resolution.fallback if resolution.fallback_allocates_as_planned else None
                return NodePlan(
                    node,
                    RunAs.OUT,
                    kind,
                    resolution.out,
                    storages,
                    allocating=allocating,
                    tracking=self._write_tracking(node, RunAs.OUT, storages, resolution.out_tracking),
                )
            if resolution.fallback is not None:
                serving = self._serving(resolution, storages)
                how = RunAs.FALLBACK if serving is None else RunAs.SERVED
                return NodePlan(
                    node,
                    how,
                    kind,
                    resolution.fallback,
                    storages,
                    serving=serving,
                    tracking=self._write_tracking(node, how, storages, resolution.fallback_tracking),
                )
            tracking = self._write_tracking(node, RunAs.OUT_FRESH, storages, resolution.out_tracking)
            return NodePlan(node, RunAs.OUT_FRESH, kind, resolution.out, storages, tracking=tracking)
        if category is Category.GETITEM and self.how.get(getitem_parts(node)[0].name) is RunAs.OUT:
            self.fixed.add(node.name)  # one of a multi-output op's managed results
            return NodePlan(node, RunAs.NATIVE, kind, native)
        if category in (Category.GETITEM, Category.VIEW):
            static = self._may_be_static(node)
            if static:
                self.fixed.add(node.name)
            return NodePlan(node, RunAs.NATIVE, kind, native, static=static)
        if category is Category.INPLACE:
            target = _inplace_target(node)
            if target in self.fixed:
                self.fixed.add(node.name)
            return NodePlan(node, RunAs.NATIVE, kind, native, inplace_of=target)
        return NodePlan(node, RunAs.NATIVE, kind, native)

    def plans(self) -> list[NodePlan]:
        result = []
        for node in self.graph.nodes:
            if node.op == "call_function":
                plan = self.choose(node)
                self.how[node.name] = plan.how
                result.append(plan)
        return result
