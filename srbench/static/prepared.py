"""Preparing one input signature: capture, clean-up, op resolution, lifetimes, plan, code.

A :class:`PreparedGraph` is everything about a model at one input signature (structure, shapes,
strides, scalar values, memory sharing: :class:`~srbench.static.signature.InputSignature`) that
does not depend on which thread runs it: it is built once (under the module's lock) and only read
after. Runtimes bind it to their own slab (see :mod:`srbench.static.runtime`).

Aliasing follows eager. The export-level graph keeps in-place ops, so inputs that share memory
see each other's writes as in eager. A decomposed (functionalized) graph computes the new value
of an input it writes and copies it back at the end: exact for inputs that do not share memory,
wrong for inputs that do (one input's write would not reach the other before it is read). So
inputs that share memory, with each other or with the model's parameters and buffers (a caller
passing the model's own buffer), are never decomposed (their calls run the export-level graph),
a decomposed program that writes an input checks, on every call, that its inputs do not share
memory, and a program that writes an input, a parameter or a buffer checks that its inputs share
memory with the parameters and buffers as they did at prepare time. An output that is (a view
of) an input the functionalized graph writes is returned as (that view of) the input itself, as
eager returns it.

Control flow (``torch.cond``, ``torch.while_loop``, ``torch.map``) runs as sub-blocks, each
prepared on its own (:mod:`srbench.static.blocks`).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Collection, Container, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind

from srbench.graph import CapturedGraph, CaptureError, capture
from srbench.graph.attribute_state import refuse_carried_state
from srbench.graph.capture import refuse_uninitialized
from srbench.graph.eager_layout import give_eager_layouts
from srbench.graph.inert_autocast import NO_AUTOCAST, UNKNOWN, run_inert_regions_plain
from srbench.graph.lowered_autocast import lower_casting_regions
from srbench.graph.lowered_program import lowered_program_failure
from srbench.graph.nodes import enters_autocast
from srbench.graph.subgraph import Subgraph, capture_subgraph
from srbench.inputs import Inputs, KeywordOrder, copy_with_layout
from srbench.memory.hosting import NO_HOSTING, Hosting, estimated_peak, plan_hosting, validate_hosting
from srbench.memory.lifetimes import LifetimeAnalysis, analyze_lifetimes, has_static_geometry
from srbench.memory.records import TensorUsageRecord
from srbench.options import StaticOptions
from srbench.planners import DEFAULT_PLANNER, PlanResult, plan_memory
from srbench.schedulers import Schedule
from srbench.schedulers.from_fx import shared_placeholders
from srbench.static import page_release
from srbench.static.blocks import control_flow_blocks
from srbench.static.choose import Chooser, NodePlan, RunAs, written_storages
from srbench.static.codegen import CodeWriter, Program, ReturnedInput
from srbench.static.errors import UnsupportedOpError
from srbench.static.hosting import RunBuffer, hostable, output_hosts, run_buffers
from srbench.static.intra_op import Timeline
from srbench.static.mid_op_release import ReleaseWithin, find_cut, zoned_layout, zoned_plan
from srbench.static.out_variants import OutVariantRegistry
from srbench.static.passes import PASSES, Pass, Rewrite, RewriteOutcome, rewrite_graph
from srbench.static.placement import program_device, weights_device
from srbench.static.resolve import Resolution, resolve, storage_pointer
from srbench.static.reuse import dying_input_reuses
from srbench.static.serving import unavailable_reason
from srbench.static.signature import InputSignature, state_storages
from srbench.static.slab_schedule import SlabLayout, slab_layout
from srbench.static.storage_offsets import offsets_from_computed_inputs
from srbench.static.stream_code import StreamCodeWriter, StreamMode
from srbench.static.streams import plan_streams


@dataclass(frozen=True)
class ManagedTensor:
    """A tensor of the slab (or of the output arena): a typed, strided view at ``offset`` bytes."""

    storage: str
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype

    def view_of(self, storage: torch.UntypedStorage, device: torch.device) -> torch.Tensor:
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        tensor = torch.empty(0, dtype=self.dtype, device=device)
        return tensor.set_(storage, self.offset // itemsize + self.storage_offset, self.shape, self.stride)


@dataclass(frozen=True)
class PreparedGraph:
    """A model prepared for one input signature; shared by every runtime, never modified."""

    signature: InputSignature
    input_names: tuple[str, ...]  # the graph's user-input placeholders, one per leaf of the signature
    captured: CapturedGraph
    analysis: LifetimeAnalysis
    plans: tuple[NodePlan, ...]
    plan: PlanResult | None
    managed: tuple[ManagedTensor, ...]
    output_plan: PlanResult | None
    output_arena: tuple[ManagedTensor, ...]
    program: Program
    device: torch.device
    seconds: float  # preparing, from the capture on (the capture is shared by the candidates)
    rewrites: tuple[Rewrite, ...] = ()  # what the prepare-time passes did, and refused with the reason
    schedule: Schedule | None = None  # the scheduler's answer, when several streams were asked for
    # a tentative multistream program's one-stream twin, until prepare time measures which is faster
    one_stream: PreparedGraph | None = None
    hosting: Hosting | None = None  # intermediates planned into the run's fresh outputs
    # the model's parameters and buffers the program writes in place (a step counter, the running
    # statistics of a norm left training, a renormalised embedding): prepare-time timing runs the
    # program many times and gives them back their values (:mod:`srbench.static.timing`)
    written_state: tuple[torch.Tensor, ...] = ()
    # the buffers the program rebinds (forward assigns them anew), as (table, name): the timing
    # runs give the tables their tensors back
    rebound_state: tuple[tuple[dict[str, Any], str], ...] = ()
    # why fallback results are not served from the slab (no allocator hook, a higher peak)
    unserved: str | None = None

    @property
    def hosted_results(self) -> int:
        """Results written into hosted intermediates (an elementwise op writing over its dying
        input counts as one more, as in ``managed``)."""
        hosted = set(self.hosting.placement) if self.hosting else set()
        return sum(1 for p in self.plans if p.how is RunAs.OUT and hosted.intersection(p.result_storages))

    @property
    def hosted_bytes(self) -> int:
        """Bytes of the intermediates planned into the outputs' storage (:mod:`srbench.memory.hosting`)."""
        return self.hosting.hosted_bytes if self.hosting else 0

    @property
    def streams_used(self) -> int:
        """Streams the program runs on (1 where the scheduler or the measurement kept one)."""
        return self.program.streams.schedule.num_streams if self.program.streams else 1

    @property
    def key(self) -> tuple:
        return self.signature.key

    @property
    def slab_bytes(self) -> int:
        return self.plan.plan.total_bytes if self.plan else 0

    @property
    def arena_bytes(self) -> int:
        return self.output_plan.plan.total_bytes if self.output_plan else 0

    @property
    def managed_bytes(self) -> int:
        """Bytes of the intermediates srbench plans: in the slab, or hosted in outputs."""
        managed = {tensor.storage for tensor in self.managed}
        return sum(record.size for record in self.analysis.records if record.id in managed) + self.hosted_bytes

    @property
    def managed_share(self) -> float:
        """Of the bytes the ops produce as intermediates (results, not views, that no graph
        output is), the share srbench plans: written into the slab, or into an output's bytes
        (hosted, :mod:`srbench.memory.hosting`). Counted per result, not per storage: a result
        written over its dying input (:mod:`srbench.static.reuse`) counts as its own."""
        intermediate = {record.id for record in self.analysis.records}
        managed = produced = 0
        for plan in self.plans:
            if plan.how not in (RunAs.OUT, RunAs.FALLBACK, RunAs.SERVED, RunAs.OUT_FRESH):
                continue
            meta = plan.node.meta.get("val")
            values = list(meta) if isinstance(meta, (list, tuple)) else [meta]
            planned = plan.managed_storages
            for storage, value in zip(plan.result_storages, values):
                if storage in intermediate and isinstance(value, torch.Tensor) and has_static_geometry(value):
                    nbytes = value.numel() * value.element_size()
                    produced += nbytes
                    managed += nbytes if storage in planned else 0
        return managed / produced if produced else 1.0

    def count(self, how: RunAs) -> int:
        return sum(1 for plan in self.plans if plan.how is how)


def _placeholder_values(
    captured: CapturedGraph, model: torch.nn.Module, inputs: Sequence[Any]
) -> tuple[dict[str, Any], list[str], set[str]]:
    """Real values of every placeholder (``inputs``: the call's leaves, tensors and scalars, in
    flattening order; the model's live parameters and buffers, so in-place updates reach them as
    in eager mode), the user-input placeholders in order, and the names of the constant ones."""
    exported = captured.exported
    values: dict[str, Any] = {}
    user: list[str] = []
    constant: set[str] = set()
    user_values = iter(inputs)
    for spec in exported.graph_signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            values[name] = next(user_values)
            user.append(name)
            continue
        if spec.kind == InputKind.PARAMETER:
            values[name] = model.get_parameter(spec.target)
        elif spec.kind == InputKind.BUFFER:
            values[name] = model.get_buffer(spec.target)
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            values[name] = exported.constants[spec.target]
        else:
            raise UnsupportedOpError(f"input of kind {spec.kind.name}", name, "the static runtime has no value for it")
        constant.add(name)
    for node in captured.graph.nodes:
        if node.op == "get_attr":
            values[node.name] = operator.attrgetter(node.target)(captured.graph_module)
            constant.add(node.name)
    return values, user, constant


def capture_graph(model: torch.nn.Module, inputs: Inputs, options: StaticOptions, *, name: str) -> CapturedGraph:
    """``model`` captured at ``inputs`` as :func:`prepare_graph` takes it: lowered with
    ``options.decompose`` unless inputs share memory, with each other or with the model's
    parameters and buffers (see the module docstring), after the checks
    of what a capture cannot hold (:func:`_capture`); a control-flow op's sub-block, already
    captured with its model, is copied with the metadata of ``inputs``."""
    inputs = KeywordOrder.of(model).arrange(inputs)
    if isinstance(model, Subgraph):
        return capture_subgraph(model, inputs, name=name)
    signature = InputSignature.of(inputs, state=state_storages(model))
    decompose = options.decompose and not signature.shares_memory and not signature.shares_state
    return _capture(model, inputs, name=name, decompose=decompose)


def _capture(model: torch.nn.Module, inputs: Inputs, *, name: str, decompose: bool) -> CapturedGraph:
    """``capture``; where ``decompose`` fails on a model two of whose program's placeholders view
    one storage (a buffer registered as a slice of another, or given as an input, or held by a
    plain object too; the program writing one), the capture without it
    (:func:`_undecomposed_sharing_storage`): torch's own decomposition fails on such a program,
    and ``decompose`` is not applied to it, as to inputs that share memory. A model carrying state
    from call to call in a plain Python attribute is refused first
    (:mod:`srbench.graph.attribute_state`); that check's eager call gives the layouts the
    program's outputs are copied into where the graph's differ (:mod:`srbench.graph.eager_layout`)
    and the buffers forward assigns anew, and refuses a model whose answer holds a tensor
    subclass the program cannot give (:mod:`srbench.graph.output_types`)."""
    refuse_uninitialized(model, name=name)  # before the state check reads the parameters
    checked = refuse_carried_state(model, inputs, name=name)
    if checked is not None and checked.subclassed is not None:
        raise CaptureError(name, checked.subclassed.reason())
    try:
        captured = capture(model, inputs, name=name, decompose=decompose)
    except CaptureError:
        undecomposed = _undecomposed_sharing_storage(model, inputs, name=name) if decompose else None
        if undecomposed is None:
            raise
        captured = undecomposed
    if checked is None:
        return captured
    lost = sorted(checked.changed - _written_buffers(captured))
    if lost:
        raise CaptureError(
            name,
            f"the forward assigns the buffer {lost[0]!r} anew (a new tensor with other values at each call), "
            "and torch.export's graph never writes it (assigned past `Module.__setattr__`, into the module's "
            "`_buffers` table, where neither export nor srbench sees the assignment), so "
            "the program would leave it as it was where eager's calls change it (and read its first value "
            "at every call). Write it in place (`self.last.copy_(new)`), or keep it in the model itself",
        )
    give_eager_layouts(captured, checked.layouts)
    return replace(captured, assigned_state=checked.assigned)


def _undecomposed_sharing_storage(model: torch.nn.Module, inputs: Inputs, *, name: str) -> CapturedGraph | None:
    """The capture without ``decompose`` where two of its program's placeholders view one storage
    (torch's own decomposition fails on such a program: 'expected compiled_fn to be
    GraphModule'); ``None`` where none do, or where that capture fails too. The placeholders are
    the parameters, the buffers, the inputs and the tensors export lifts as constants: a tensor
    a plain object of the model holds that is also a buffer (transformers' ``StaticCache`` holds
    its layers' keys and values, which its ExecuTorch wrappers register as buffers, and the
    program writes the object's) is one storage under two placeholders, as a buffer registered
    as a slice of another is."""
    try:
        captured = capture(model, inputs, name=name, decompose=False)
    except CaptureError:
        return None
    signature, constants = captured.exported.graph_signature, captured.exported.constants
    lifted = [constants[spec.target] for spec in signature.input_specs if spec.kind == InputKind.CONSTANT_TENSOR]
    # parameters() and buffers() give a tied weight once: the program names it twice, and reads it only
    tensors = (*model.parameters(), *model.buffers(), *lifted, *inputs.tensors())
    pointers = [storage_pointer(tensor) for tensor in tensors if isinstance(tensor, torch.Tensor)]
    known = [pointer for pointer in pointers if pointer is not None]
    return captured if len(known) != len(set(known)) else None


def _written_buffers(captured: CapturedGraph) -> set[str]:
    """The buffers (by qualified name) ``captured`` writes: a new value among its outputs
    (lowered), or a ``copy_`` into the buffer (traced)."""
    signature = captured.exported.graph_signature
    written = {spec.target for spec in signature.output_specs if spec.kind == OutputKind.BUFFER_MUTATION}
    buffers = {spec.arg.name: spec.target for spec in signature.input_specs if spec.kind == InputKind.BUFFER}
    written.update(buffers[placeholder] for placeholder in _copies_into(captured.graph, buffers))
    return {target for target in written if target is not None}


def _copies_into(graph: torch.fx.Graph, placeholders: Container[str]) -> dict[str, torch.fx.Node]:
    """The last ``copy_`` into each of ``placeholders`` the graph makes, by placeholder: how the
    graph export traced (not lowered) writes a buffer, written in place or assigned anew."""
    copies = {}
    for node in graph.nodes:
        if node.target is torch.ops.aten.copy_.default and getattr(node.args[0], "name", None) in placeholders:
            copies[node.args[0].name] = node  # the last one stays
    return copies


def _rebound_state(captured: CapturedGraph, model: torch.nn.Module) -> dict[str, tuple[dict[str, Any], str]]:
    """The buffers forward assigns anew (``captured.assigned_state``), by placeholder: the table
    holding each (its module's ``_buffers``) and its name there. The program reads each from its
    table at every call and puts its new value there, a tensor of its own, as eager does: after a
    call the buffer is the tensor the call returned, and a tensor the caller held as the buffer
    keeps its value (written into, it changed under the caller)."""
    rebound = {}
    for spec in captured.exported.graph_signature.input_specs:
        if spec.kind == InputKind.BUFFER and spec.target in captured.assigned_state:
            path, _, key = spec.target.rpartition(".")
            rebound[spec.arg.name] = (model.get_submodule(path)._buffers, key)
    return rebound


def _assignments_as_outputs(graph: torch.fx.Graph, rebound: Mapping[str, Any]) -> dict[int, str]:
    """The graph export traced (not lowered) writes a buffer assigned anew into it with a last
    ``copy_(buffer, new)``: each such write of a ``rebound`` buffer is made an output of the graph
    (flat index -> the placeholder), as lowering makes it, so the program puts the new value in
    the buffer's table. A lowered graph has none (its new values are outputs already)."""
    writes = _copies_into(graph, rebound)
    if not writes:
        return {}
    output = next(node for node in graph.nodes if node.op == "output")
    start, added = len(output.args[0]), []
    for target, write in writes.items():
        if write.users:
            continue
        added.append((target, write.args[1]))
        graph.erase_node(write)
    output.args = ((*output.args[0], *(new for _, new in added)), *output.args[1:])
    return {start + position: target for position, (target, _) in enumerate(added)}


def _with_shared_storage(written: set[str], values: Mapping[str, Any]) -> set[str]:
    """``written`` and every placeholder whose tensor shares memory with a written one's. The
    graph names each buffer, parameter and input apart, but two of them can view one storage (a
    buffer registered as a slice of another): an op writing one changes what the other reads,
    which is then no constant to compute once at prepare time (that gave eager's first-call
    numbers at every call)."""
    pointers = {
        name: storage_pointer(value) if isinstance(value, torch.Tensor) else None for name, value in values.items()
    }
    shared = {pointers[name] for name in written if pointers.get(name) is not None}
    return written | {name for name, pointer in pointers.items() if pointer is not None and pointer in shared}


def _mutation_outputs(captured: CapturedGraph) -> dict[int, str]:
    """Outputs of a functionalized graph (``decompose``) that carry the new value of a buffer, a
    parameter (``nn.Embedding(max_norm=...)`` renormalises its weight in place) or an input it
    mutates: flat output index -> the placeholder to copy it into."""
    signature = captured.exported.graph_signature
    state = {
        spec.target: spec.arg.name
        for spec in signature.input_specs
        if spec.kind in (InputKind.BUFFER, InputKind.PARAMETER)
    }
    mutations = {}
    for index, spec in enumerate(signature.output_specs):
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            mutations[index] = state[spec.target]
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutations[index] = spec.target
        elif spec.kind != OutputKind.USER_OUTPUT:
            raise UnsupportedOpError(
                f"graph output of kind {spec.kind.name}", spec.arg.name, "the static runtime cannot return it"
            )
    return mutations


def _managed_tensors(
    plans: Sequence[NodePlan], records: Sequence[TensorUsageRecord], result: PlanResult | None
) -> tuple[ManagedTensor, ...]:
    if result is None:
        return ()
    wanted = {record.id for record in records}
    tensors = []
    for plan in plans:
        if plan.how is RunAs.SERVED:
            # the region an allocation is served from: bytes, whatever the op makes of them
            for region, nbytes in plan.served_regions:
                if region in wanted:
                    tensors.append(ManagedTensor(region, result.plan.offsets[region], (nbytes,), (1,), 0, torch.uint8))
            continue
        if plan.how is not RunAs.OUT:
            continue
        meta = plan.node.meta["val"]
        values = list(meta) if isinstance(meta, (list, tuple)) else [meta]
        for storage, value in zip(plan.result_storages, values):
            if storage in wanted:
                tensors.append(
                    ManagedTensor(
                        storage,
                        result.plan.offsets[storage],
                        tuple(value.shape),
                        value.stride(),
                        value.storage_offset(),
                        value.dtype,
                    )
                )
    return tuple(tensors)


def _estimated_peak(
    plans: Sequence[NodePlan],
    analysis: LifetimeAnalysis,
    held: Callable[[Sequence[TensorUsageRecord]], list[int]],
    timeline: Timeline,
) -> int:
    """The most bytes a run of ``plans`` holds at one step, as the plan sees it: the scratch of
    ops with a serving in the slab where served, else its peak beside the slab (the scratch of
    other ops is not known)."""
    managed = {storage for plan in plans for storage in plan.managed_storages}
    slab = [record for record in analysis.records if record.id in managed] + timeline.served_scratch(plans)
    unplanned = [record for record in analysis.records if record.id not in managed] + timeline.eager_scratch(plans)
    return estimated_peak(held(slab), unplanned, analysis.output_records)


def _served_where_the_estimate_allows(
    resolutions: Mapping[str, Resolution],
    plans_of: Callable[[Mapping[str, Resolution]], list[NodePlan]],
    analysis: LifetimeAnalysis,
    held: Callable[[Sequence[TensorUsageRecord]], list[int]],
    timeline: Timeline,
) -> tuple[list[dict[str, Resolution]], str | None]:
    """The servings to try (:mod:`srbench.static.serving`): ``resolutions`` with a serving kept
    only for the fallback results that, taken in graph order, do not raise the run's estimated
    peak, each with its op's scratch where that estimates lower; then, where ops have scratch,
    every result served with every op's scratch (an op whose results are not served, such as
    the one making the model's output, with its scratch alone). And why none of the first is, where the
    estimate leaves none. A served result's bytes stay held in the slab (whole, or in
    its segment) where eager frees and reuses them, so serving a result that lives across the
    run's peak can add to it (``transformer_encoder``'s four fused layers: serving the first and
    third layer's results keeps one slab region of 128 KiB, the second's too needs two, one of
    them held while the last layer's output is made), and so can a result nothing reads
    (``embedding_bag``'s bag sizes), held to the end of its segment. ``plans_of`` chooses how
    each node runs under given resolutions."""

    def serving_only(kept: Collection[tuple[str, int]], scratch: Collection[str]) -> dict[str, Resolution]:
        trial = {}
        for name, resolution in resolutions.items():
            served = None
            if resolution.serving is not None:
                positions = {position for node, position in kept if node == name}
                served = resolution.serving.only(positions, scratch=name in scratch)
            trial[name] = replace(resolution, serving=served)
        return trial

    def estimate(kept: Collection[tuple[str, int]], scratch: Collection[str]) -> int:
        return _estimated_peak(plans_of(serving_only(kept, scratch)), analysis, held, timeline)

    candidates = [
        (plan.node.name, result.result)
        for plan in plans_of(resolutions)
        if plan.serving
        for result in plan.serving.results
    ]
    kept: list[tuple[str, int]] = []
    scratch: set[str] = set()  # the ops served with their scratch
    best = estimate(kept, scratch)
    for candidate in candidates:
        node = candidate[0]
        # with the op's scratch served too, or not: the one of the lower estimate (without where equal)
        trials = [(estimate([*kept, candidate], scratch - {node}), scratch - {node})]
        if node in timeline.scratch:
            trials.append((estimate([*kept, candidate], scratch | {node}), scratch | {node}))
        peak, chosen = min(trials, key=lambda trial: trial[0])
        if peak <= best:
            kept.append(candidate)
            scratch, best = chosen, peak
    greedy = serving_only(kept, scratch)
    # every result with every op's scratch, measured beside it: one op's scratch alone adds its
    # region to a slab held whole beside the others' eager scratch (which the estimate, holding
    # the slab by segments, does not see), while together they share one
    everything = [serving_only(candidates, set(timeline.scratch))] if timeline.scratch and candidates else []
    why = None
    if candidates and not kept:
        why = f"serving any of {len(candidates)} fallback result(s) would raise the estimated peak"
    return [greedy, *everything], why


_Writer = TypeVar("_Writer", bound=CodeWriter)


@dataclass(frozen=True)
class _Choice:
    """How every node runs, and the lifetimes and slab and arena records that follow from it;
    with ``hosting``, the intermediates planned into outputs and the tensors a run makes for them."""

    analysis: LifetimeAnalysis
    plans: tuple[NodePlan, ...]
    slab_records: tuple[TensorUsageRecord, ...]
    arena_records: tuple[TensorUsageRecord, ...]
    hosting: Hosting = NO_HOSTING
    run_buffers: tuple[RunBuffer, ...] = ()


def _region_held_by_thread(graph_module: torch.fx.GraphModule, device: torch.device) -> bool:
    """Whether the program enters an autocast region by a call (``_enter_autocast``, kept: see
    srbench.graph.inert_autocast) and would run its streams on threads: the region holds for the
    thread that entered it only, so another stream's thread ran the region's ops uncast (float32
    where eager gives bfloat16), and an exit run on a thread other than the enter's left the
    caller's thread with autocast on. Such a program runs on one stream."""
    return StreamMode.for_device(device) is StreamMode.THREADS and enters_autocast(graph_module)


def _plan(records: Sequence[TensorUsageRecord], planner: str) -> PlanResult | None:
    return plan_memory(records, planner) if records else None


def _returned_inputs(
    graph: torch.fx.Graph,
    mutations: Mapping[int, str],
    user_inputs: Sequence[str],
    returns_state: frozenset[int],
    analysis: LifetimeAnalysis,
) -> dict[int, ReturnedInput]:
    """Outputs of a functionalized graph that eager returns as (a view of) an input, buffer or
    parameter it writes: flat output index -> that placeholder, and the view's geometry relative
    to its start. A view is regenerated only where the new value is laid out as the placeholder
    is, so the view's strides mean the same bytes of it. A buffer written in place and returned
    (``self.count += 1; return self.count``) is the buffer itself in eager, which the next call
    changes; the graph's new value is a tensor of its own, which the write-back only copies. A
    buffer assigned anew (``self.ema = ...``) and returned is not: ``returns_state`` (the user
    outputs sharing state in the graph export traced) tells which eager returns."""
    output = next(node for node in graph.nodes if node.op == "output")
    outputs = list(output.args[0])
    placeholders = {node.name: node for node in graph.nodes if node.op == "placeholder"}
    written: dict[str, tuple[torch.fx.Node, str]] = {}  # storage -> (new value node, placeholder it goes to)
    for index, target in mutations.items():
        node = outputs[index]
        if isinstance(node, torch.fx.Node) and node.op == "call_function":
            written[analysis.storage_of.get(node.name, node.name)] = (node, target)
    user_positions = {
        index: position for position, index in enumerate(i for i in range(len(outputs)) if i not in mutations)
    }
    returned: dict[int, ReturnedInput] = {}
    for index, value in enumerate(outputs):
        if index in mutations or not isinstance(value, torch.fx.Node):
            continue
        found = written.get(analysis.storage_of.get(value.name, ""))
        if found is None:
            continue
        new_value, target = found
        if target not in user_inputs and user_positions[index] not in returns_state:
            continue
        if value is new_value:
            returned[index] = ReturnedInput(target)
            continue
        new, view, original = new_value.meta.get("val"), value.meta.get("val"), placeholders[target].meta.get("val")
        if not (
            isinstance(new, torch.Tensor)
            and isinstance(view, torch.Tensor)
            and isinstance(original, torch.Tensor)
            and all(has_static_geometry(t) for t in (new, view, original))
        ):
            continue
        if (new.shape, new.stride(), new.storage_offset()) == (original.shape, original.stride(), 0):
            returned[index] = ReturnedInput(target, (tuple(view.shape), view.stride(), int(view.storage_offset())))
            continue
        replayed = _view_chain_on(value, new_value, original)
        if replayed is not None:
            returned[index] = ReturnedInput(target, replayed)
    return returned


# Views whose result means the same elements whatever the strides of their base (a logical
# view: it fails rather than reads other bytes where the base cannot be viewed so); as_strided
# and its kin name bytes, not elements, and are left out.
_LOGICAL_VIEWS = frozenset({
    torch.ops.aten.view.default, torch.ops.aten.permute.default, torch.ops.aten.t.default,
    torch.ops.aten.transpose.int, torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim,
    torch.ops.aten.squeeze.dims, torch.ops.aten.squeeze.default, torch.ops.aten.expand.default,
    torch.ops.aten.slice.Tensor, torch.ops.aten.select.int, torch.ops.aten.diagonal.default,
    torch.ops.aten.unfold.default, torch.ops.aten.alias.default,
})  # fmt: skip


def _probe_copies(values: Mapping[str, Any], written: Container[str]) -> dict[str, Any]:
    """``values`` with a copy of each tensor the graph writes, for the resolver to run the ops on.
    Each copy keeps its tensor's layout (shape, strides, storage offset, over a copy of its
    storage, made once per storage): the resolver plans a chain of views of an input as one
    ``as_strided`` of the geometry it sees on these copies, and a ``clone()`` of a sliced or
    transposed input is contiguous, so a view of a written, sliced input read the caller's
    memory as if contiguous at every call (right shape, wrong elements, silently)."""
    storages: dict[int, torch.UntypedStorage] = {}
    copies: dict[str, Any] = {}
    for name, value in values.items():
        if name not in written or not isinstance(value, torch.Tensor):
            copies[name] = value
            continue
        plain = type(value) in (torch.Tensor, torch.nn.Parameter) and not (value.is_conj() or value.is_neg())
        copied = copy_with_layout(value, storages) if plain else None
        copies[name] = value.clone() if copied is None else copied
    return copies


def _view_chain_on(
    value: torch.fx.Node, new_value: torch.fx.Node, original: torch.Tensor
) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    """The geometry, on the input written, of an output that the functionalized graph makes as
    logical views of the input's new value (``view(mul, [-1, 16])``) where that new value is laid
    out otherwise than the input (a sliced or transposed input: the graph's ``mul`` is
    contiguous). Eager's output is such a view of the input itself (``x.reshape(...)`` taken
    before ``x.mul_``), which the caller's later writes to the input show; the program returned
    a view of its own new tensor, right in value and sharing memory with nothing. The view ops
    are replayed on a meta tensor laid out as the input; ``None`` where the chain holds another
    op or the input's layout cannot be viewed so (the program's copy stays)."""
    chain: list[torch.fx.Node] = []
    node = value
    while node is not new_value:
        if node.op != "call_function" or node.target not in _LOGICAL_VIEWS or not node.args:
            return None
        base = node.args[0]
        if not isinstance(base, torch.fx.Node) or any(isinstance(arg, torch.fx.Node) for arg in node.args[1:]):
            return None
        chain.append(node)
        node = base
    if not chain:
        return None
    view = torch.empty_strided(original.shape, original.stride(), dtype=original.dtype, device="meta")
    try:
        for step in reversed(chain):
            op: Callable[..., torch.Tensor] = step.target  # type: ignore[assignment]  # one of _LOGICAL_VIEWS
            view = op(view, *step.args[1:], **step.kwargs)
    except RuntimeError:  # the input's layout cannot be viewed so: eager's reshape copied too
        return None
    return tuple(view.shape), view.stride(), int(view.storage_offset())


def prepare_graph(
    model: torch.nn.Module,
    inputs: Inputs,
    options: StaticOptions,
    *,
    name: str,
    out_variants: OutVariantRegistry,
    argument_names: Sequence[str] = (),
    measure_peak: Callable[[PreparedGraph], int] | None = None,
    passes: Sequence[Pass] = PASSES,
    captured: CapturedGraph | None = None,
) -> PreparedGraph:
    """Prepare ``model`` for calls like ``inputs`` (see the module docstring); ``argument_names``
    name the model's positional parameters, for messages; ``passes``: the rewrites proposed
    (with ``options.rewrite``), in order. ``captured``: the model's capture at ``inputs``
    (:func:`capture_graph` under the same ``decompose``), which preparing changes; captured now
    where not given. ``measure_peak``: the bytes a run of
    a program holds at its peak, measured; where given, fallback results are served from the slab
    (:mod:`srbench.static.serving`) only if that does not raise it: a served result's bytes stay
    held in the slab where eager may have freed and reused them (``transformer_encoder``'s fused
    layers: 1,152 KiB with the first and third layers' results served, 1,280 with every layer's
    scratch too, as the last layer's output, never served, comes on top of the slab; 1,024 KiB
    not served, as eager; 1,024 with everything served and the slab planned to be given back in
    part before that output is made, :mod:`srbench.static.mid_op_release`), and where it pays
    cannot be told from the plan alone (it does not see the scratch of unserved ops, of oneDNN, of
    worker threads). Of equal peaks, the program managing more bytes is kept."""
    start = time.perf_counter()
    keyword_order = KeywordOrder.of(model)
    inputs = keyword_order.arrange(inputs)  # the placeholders follow the keyword arguments' arrangement
    state = state_storages(model)
    signature = InputSignature.of(inputs, argument_names, keyword_order, state)
    if captured is None:
        captured = capture_graph(model, inputs, options, name=name)
    rebound = _rebound_state(captured, model)
    graph = captured.graph
    mutations = _mutation_outputs(captured) | _assignments_as_outputs(graph, rebound)
    rebound = {name: entry for name, entry in rebound.items() if name in mutations.values()}  # each written
    # a sub-block runs within its parent's autocast state; a program the runtime calls, under none
    run_inert_regions_plain(captured.graph_module, UNKNOWN if isinstance(model, Subgraph) else NO_AUTOCAST)
    if not isinstance(model, Subgraph):  # the regions left cast: their casts made ops of the program
        lower_casting_regions(captured.graph_module)
    graph.eliminate_dead_code()
    values, user_inputs, constant_nodes = _placeholder_values(captured, model, inputs.leaves())
    rewrites = rewrite_graph(captured, model, values, options, passes)
    if any(rewrite.outcome is RewriteOutcome.APPLIED for rewrite in rewrites):  # new constants
        values, user_inputs, constant_nodes = _placeholder_values(captured, model, inputs.leaves())
    constant_nodes -= rebound.keys()  # read from the module's table at every call
    if control_flow_blocks(captured.graph_module, options, name=name, out_variants=out_variants):
        graph.eliminate_dead_code()  # the sub-graphs' get_attr nodes: each block holds its own
    device = program_device((tensor.device for tensor in inputs.tensors()), weights_device(model, name=name))

    offsets_from_computed_inputs(graph)  # before the ops are resolved: their calls carry it
    schema_analysis = analyze_lifetimes(graph)
    written = _with_shared_storage(written_storages(graph, schema_analysis) | set(mutations.values()), values)
    probe_values = _probe_copies(values, written)
    written_state = tuple(
        value
        for name, value in values.items()
        if name in written and name in constant_nodes and isinstance(value, torch.Tensor)
    )
    with torch.no_grad():
        try:
            resolutions = resolve(
                graph,
                probe_values,
                frozenset(constant_nodes - written),
                out_variants,
                serve=options.serve_fallbacks and options.enable_out_variant,
            )
        except UnsupportedOpError as error:
            failure = lowered_program_failure(model, inputs, name=name) if captured.lowered else None
            if failure is None:
                raise
            raise error.torch_lowering_fails_too(failure) from error
    aliases = {node: r.aliases for node, r in resolutions.items() if r.aliases}
    aliases |= {element: base for r in resolutions.values() for element, base in r.element_aliases}
    analysis = analyze_lifetimes(graph, aliases=aliases) if aliases else schema_analysis

    steps = [node.name for node in graph.nodes]
    lazy = page_release.supported(device)  # pages of large segments given back lazily
    serving_asked = options.serve_fallbacks and options.enable_out_variant

    def plans_of(trial: Mapping[str, Resolution]) -> list[NodePlan]:
        return Chooser(graph, trial, analysis, options, constant_nodes, device).plans()

    # the slab is planned with the lifetimes within served ops (every serving found, each kept
    # one's records among them): see srbench.static.intra_op
    timeline = Timeline.of(steps, plans_of(resolutions) if serving_asked else ())

    def planned(records: Sequence[TensorUsageRecord], planner: str) -> PlanResult | None:
        return _plan(timeline.refine(records), planner)

    def slab_held(records: Sequence[TensorUsageRecord]) -> list[int]:
        """Bytes a slab of ``records`` holds at each step: whole, or in the segments cleanup
        takes and gives back (every node counted as one that runs code). An estimate, made with
        the default planner: the one asked for may take seconds a plan (``exact``), and hosting
        tries several sets of records; the slab that runs is planned with the one asked for."""
        plan = planned(records, DEFAULT_PLANNER)
        total = plan.plan.total_bytes if plan is not None else 0
        if plan is None or not options.cleanup_activations:
            return [total] * len(steps)
        return slab_layout(steps, records, plan.plan.offsets, total, frozenset(steps), lazy).held(steps)

    def finish(options: StaticOptions, resolutions: Mapping[str, Resolution], zone: bool = False) -> PreparedGraph:
        """The program from here on under ``resolutions``: how each node runs, the plan, the code;
        with ``zone``, the slab planned to be given back in part within a served op, where it can
        be (:mod:`srbench.static.mid_op_release`)."""
        plain_plans = Chooser(graph, resolutions, analysis, options, constant_nodes, device).plans()
        reuses = dying_input_reuses(graph, plain_plans, analysis)
        # planned again with each such result in its input's storage
        reused = analyze_lifetimes(graph, aliases={**aliases, **reuses}) if reuses else analysis

        def choose(reuse: bool, hosting: Hosting = NO_HOSTING) -> _Choice:
            """How every node runs; with ``reuse``, elementwise results written over dying inputs
            (one stream only: see :mod:`srbench.static.reuse`); with ``hosting``, intermediates
            planned into outputs (one stream only: see :mod:`srbench.memory.hosting`)."""
            chosen = reused if reuse else analysis
            hosts = frozenset(plan.host.id for plan in hosting.plans)
            hosted = frozenset(hosting.placement)
            if reuse and (reuses or hosting.plans):
                chooser = Chooser(
                    graph, resolutions, chosen, options, constant_nodes, device, reuses, hosts=hosts, hosted=hosted
                )
                plans = chooser.plans()
            else:
                plans = plain_plans
            managed_ids = {s for p in plans for s in p.managed_storages} - hosts - hosted
            scratch = timeline.served_scratch(plans)
            return _Choice(
                chosen,
                tuple(plans),
                tuple(r for r in chosen.records if r.id in managed_ids) + tuple(scratch),
                tuple(r for r in chosen.output_records if r.id in managed_ids),
                hosting,
                run_buffers(plans, hosting) if hosting.plans else (),
            )

        def with_hosting(single: _Choice) -> _Choice:
            """``single`` (one stream) with intermediates planned into the outputs a run allocates
            anyway, where the estimated peak of a run falls (:mod:`srbench.memory.hosting`)."""
            if options.manage_output_tensors or not options.enable_out_variant or not single.slab_records:
                return single
            if any(plan.serving is not None and plan.serving.scratch for plan in single.plans):
                return single  # hosting plans on whole steps, where served scratch overlaps results
            outputs = single.analysis.output_records
            probe = Chooser(
                graph,
                resolutions,
                single.analysis,
                options,
                constant_nodes,
                device,
                reuses,
                hosts=frozenset(record.id for record in outputs),
            ).plans()
            hosts = output_hosts(probe, single.analysis, {name: step for step, name in enumerate(steps)})
            if not hosts:
                return single
            slab_ids = {record.id for record in single.slab_records}
            hosting = plan_hosting(
                single.slab_records,
                hostable(single.plans, slab_ids),
                hosts,
                unplanned=[record for record in single.analysis.records if record.id not in slab_ids],
                outputs=outputs,
                held=slab_held,
                planner=options.planner,
            )
            return choose(reuse=True, hosting=hosting) if hosting.plans else single

        out_spec = captured.exported.call_spec.out_spec
        returned_inputs = _returned_inputs(graph, mutations, user_inputs, captured.returns_state, analysis)
        # a functionalized graph that writes an input is exact only for inputs not sharing memory
        disjoint_inputs = any(target in user_inputs for target in mutations.values())
        # a program that writes an input, a parameter or a buffer, or one made for inputs sharing
        # memory with the model's parameters and buffers, is exact only for calls sharing so
        guarded_state = state if written or signature.shares_state else None

        def writer_of(cls: type[_Writer], choice: _Choice) -> _Writer:
            constants = {n: v for n, v in values.items() if n in constant_nodes}
            return cls(
                graph,
                choice.plans,
                user_inputs,
                constants,
                out_spec,
                mutations,
                signature,
                returned_inputs=returned_inputs,
                disjoint_inputs=disjoint_inputs,
                guarded_state=guarded_state,
                arena_outputs=bool(choice.arena_records),
                run_buffers=choice.run_buffers,
                rebound=rebound,
            )

        def cleanup_of(plan: PlanResult | None) -> int | None:
            return plan.plan.total_bytes if (options.cleanup_activations and plan is not None) else None

        def slab_cleanup(
            choice: _Choice, plan: PlanResult | None, bodies: list[tuple[str, list[str]]]
        ) -> SlabLayout | None:
            if not options.cleanup_activations or plan is None:
                return None
            runs_code = frozenset(name for name, _ in bodies)
            return slab_layout(steps, choice.slab_records, plan.plan.offsets, plan.plan.total_bytes, runs_code, lazy)

        def prepared_with(
            choice: _Choice, plan: PlanResult | None, output_plan: PlanResult | None, program: Program, **streams: Any
        ) -> PreparedGraph:
            return PreparedGraph(
                signature=signature,
                input_names=tuple(user_inputs),
                captured=captured,
                analysis=choice.analysis,
                plans=choice.plans,
                plan=plan,
                managed=_managed_tensors(choice.plans, choice.slab_records, plan),
                output_plan=output_plan,
                output_arena=_managed_tensors(choice.plans, choice.arena_records, output_plan),
                program=program,
                device=device,
                seconds=time.perf_counter() - start,
                rewrites=rewrites,
                hosting=choice.hosting if choice.hosting.plans else None,
                written_state=written_state,
                rebound_state=tuple(rebound.values()),
                **streams,
            )

        def one_stream(choice: _Choice, **streams: Any) -> PreparedGraph:
            choice = with_hosting(choice)
            cut = find_cut(steps, choice.plans, timeline) if zone and options.cleanup_activations else None
            zoned = zoned_plan(timeline.refine(choice.slab_records), cut, options.planner) if cut else None
            plan = zoned.result if zoned else planned(choice.slab_records, options.planner)
            if choice.hosting.plans:
                outputs = choice.analysis.output_records
                validate_hosting(choice.slab_records, plan.plan if plan else None, outputs, choice.hosting)
            writer = writer_of(CodeWriter, choice)
            if zoned is not None:  # every node counted as running code: the segments are the same
                segments = zoned_layout(steps, choice.slab_records, zoned, lazy_release=lazy)
                within = ReleaseWithin.of(zoned, segments, choice.plans)
                writer.releases_within = {zoned.cut.node: within} if within else {}
            bodies = writer.node_bodies()
            output_plan = _plan(choice.arena_records, options.planner)
            runs_code = frozenset(name for name, _ in bodies)
            layout = zoned_layout(steps, choice.slab_records, zoned, runs_code, lazy) if zoned else None
            program = writer.assemble(bodies, layout or slab_cleanup(choice, plan, bodies))
            return prepared_with(choice, plan, output_plan, program, **streams)

        single = choose(reuse=True)
        if options.streams == 1 or _region_held_by_thread(captured.graph_module, device):
            return one_stream(single)
        multi = choose(reuse=False)
        writer = writer_of(StreamCodeWriter, multi)
        bodies = writer.node_bodies()
        ops = [op for op, _ in bodies]
        streams = plan_streams(
            graph,
            multi.analysis,
            ops,
            multi.plans,
            resolutions,
            options,
            device,
            multi.slab_records,
            multi.arena_records,
            shared_placeholders(values),
        )
        schedule = streams.schedule
        if schedule.num_streams == 1:  # the scheduler keeps one stream: the one-stream program
            return one_stream(single, schedule=schedule)
        if schedule.tentative and written & (set(user_inputs) | constant_nodes | rebound.keys()):
            # a run writes the model's inputs or buffers: it is not run again at prepare time to
            # measure the estimate, and an unmeasured gain is not taken
            return one_stream(single, schedule=schedule)
        mode = StreamMode.for_device(device)
        alternative = None
        if schedule.tentative and mode is StreamMode.THREADS:  # measured against it at prepare time
            alternative = one_stream(single, schedule=schedule)
        program = writer.assemble_streams(bodies, schedule, mode, cleanup_of(streams.plan))
        return prepared_with(
            multi, streams.plan, streams.output_plan, program, schedule=schedule, one_stream=alternative
        )

    unserved_reason = None
    trials = [resolutions]
    if serving_asked:
        trials, unserved_reason = _served_where_the_estimate_allows(
            resolutions, plans_of, analysis, slab_held, timeline
        )
    finished = [finish(options, trial) for trial in trials[: 1 if measure_peak is None else None]]
    if measure_peak is not None and options.cleanup_activations and options.streams == 1:
        # each trial whose slab can be given back in part within a served op, so planned: measured too
        cuttable = [trial for trial in trials if find_cut(steps, plans_of(trial), timeline)]
        finished += [finish(options, trial, zone=True) for trial in cuttable]
    served = [prepared for prepared in finished if any(plan.how is RunAs.SERVED for plan in prepared.plans)]
    if not served:
        prepared = finished[0]
        return replace(prepared, unserved=unserved_reason or unavailable_reason()) if serving_asked else prepared
    if measure_peak is None:
        return served[0]
    unserved = finish(replace(options, serve_fallbacks=False), resolutions)
    without = measure_peak(unserved)
    # the lowest measured peak; where equal, the one managing most bytes, then the first (the
    # estimate's choice): a program giving the slab back within an op reaches eager's peak
    # with every result served, where the estimate's may serve fewer
    with_serving, _, best = min(
        (measure_peak(prepared), -prepared.managed_bytes, index) for index, prepared in enumerate(served)
    )
    if with_serving <= without:
        return served[best]
    reason = (
        f"a run with fallback results served from the slab measured a peak of {with_serving / 1024:,.0f} KiB, "
        f"{without / 1024:,.0f} KiB without"
    )
    return replace(unserved, unserved=reason)
