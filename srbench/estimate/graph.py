"""The estimate of one captured graph: per node and in total, from metadata alone.

Per node: the bytes of the storages it allocates (views, in-place ops and ops that return an input
allocate none), the block the device's allocator would hand out for them, its temporaries and
where that knowledge comes from, its FLOPs, and the bytes alive while it runs in eager mode.
Per graph: parameters, inputs and outputs; eager's activation peak; the lower bound of the
intermediates; and the slab each planner would need (through :func:`srbench.planners.plan_memory`,
the one path to every planner).

*Eager* here is the graph run in topological order by a runtime that frees every storage after
its last use, as eager PyTorch does when nothing else holds a reference, with each node's
temporaries alive while it runs; the device's allocator model (:mod:`srbench.estimate.allocators`)
turns those requests into blocks and segments. Graph outputs live to the end; inputs and
parameters are the caller's and are counted apart.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from srbench.estimate.allocators import Action, AllocatorStats, MemoryEvent, allocator_for
from srbench.estimate.kernels import TemporarySource, extra_result_bytes, known_temporary
from srbench.estimate.ops import op_facts
from srbench.estimate.sizes import ZERO, Bound, ByteCount, concrete_graph, tensor_bytes
from srbench.memory.lifetimes import LifetimeAnalysis, analyze_lifetimes
from srbench.memory.records import DEFAULT_ALIGNMENT, TensorUsageRecord, align_up, lower_bound


class NodeKind(enum.Enum):
    """What a node does to memory."""

    INPUT = "input"  # a user input: the caller's memory
    PARAMETER = "parameter"  # a parameter, buffer or constant: the model's memory
    ALLOCATES = "allocates"  # its results are new storages
    VIEW = "view"  # its result aliases an argument (schema)
    IN_PLACE = "in-place"  # it writes an argument and returns it
    RETURNS_INPUT = "returns input"  # the schema says new, but it returns an argument as is (eval dropout)
    ELEMENT = "element"  # getitem of a multi-result op
    OPAQUE = "opaque"  # not an ATen op (higher-order op, Python callable): not estimated
    NO_TENSOR = "no tensor"  # symbolic ints, asserts
    OUTPUT = "output"


@dataclass(frozen=True)
class NodeEstimate:
    step: int
    name: str
    op: str
    kind: NodeKind
    shape: str
    output: ByteCount  # bytes of the storages the node allocates
    block_bytes: int  # what the device's allocator hands out for them
    temporary: ByteCount  # what it needs beyond its results while it runs
    temporary_source: TemporarySource
    flops: int
    live_bytes: int  # eager: bytes of blocks alive while the node runs, temporaries included
    runs_as: tuple[str, ...] = ()
    problem: str | None = None


@dataclass(frozen=True)
class NodeProblem:
    """A node whose figures are bounds or unknown, and why."""

    node: str
    op: str
    reason: str


@dataclass(frozen=True)
class PlanFootprint:
    """One planner's slab for the graph's intermediates; ``reserved_bytes`` is what the device's
    allocator takes from the device for that one slab."""

    planner: str
    slab_bytes: int | None
    reserved_bytes: int | None
    ratio_to_lower_bound: float | None
    proven_optimal: bool = False
    seconds: float = 0.0
    error: str | None = None


@dataclass(frozen=True)
class GraphEstimate:
    """The estimate of one graph on one device. ``bound`` is EXACT unless a data-dependent size
    made some figures upper bounds (or unknown); ``problems`` names every node that did, and
    every node that could not be estimated. ``complete`` is False when the graph is only the part
    of the model that could be traced (see :mod:`srbench.estimate.partial`)."""

    name: str
    device: str
    traced_on: str
    nodes: tuple[NodeEstimate, ...]
    parameter_bytes: int
    input_bytes: int
    output_bytes: int
    flops: int
    eager: AllocatorStats
    lower_bound: int
    alignment: int
    plans: tuple[PlanFootprint, ...]
    problems: tuple[NodeProblem, ...] = ()
    bound: Bound = Bound.EXACT
    complete: bool = True
    notes: tuple[str, ...] = ()

    def node(self, name: str) -> NodeEstimate:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"no node {name!r} in the estimate of {self.name!r}")


def _op_name(node: torch.fx.Node) -> str:
    if node.op != "call_function":
        return node.op
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__name__", str(target))


_DTYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
}


def describe(value: object) -> str:
    """``f32[1, 64, 112, 112]``, a tuple of such, or the type of a non-tensor value."""
    if isinstance(value, torch.Tensor):
        dtype = _DTYPES.get(value.dtype, str(value.dtype).removeprefix("torch."))
        return f"{dtype}[{', '.join(str(size) for size in value.shape)}]"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(describe(item) for item in value) + ")"
    return "" if value is None else type(value).__name__


def _kind(node: torch.fx.Node, lifetimes: LifetimeAnalysis, user_inputs: Collection[str], aliases: Mapping) -> NodeKind:
    if node.op == "placeholder":
        return NodeKind.INPUT if node.name in user_inputs else NodeKind.PARAMETER
    if node.op == "get_attr":
        return NodeKind.PARAMETER
    if node.op == "output":
        return NodeKind.OUTPUT
    if node.target is operator.getitem:
        return NodeKind.ELEMENT
    if node.name in aliases:
        return NodeKind.RETURNS_INPUT
    if not isinstance(node.target, torch._ops.OpOverload):
        return NodeKind.OPAQUE if node.name in lifetimes.unplanned else NodeKind.NO_TENSOR
    if any(storage is not None for storage in lifetimes.outputs_of.get(node.name, ())):
        return NodeKind.ALLOCATES
    returns = node.target._schema.returns
    if any(r.alias_info is not None and r.alias_info.is_write for r in returns):
        return NodeKind.IN_PLACE
    if any(r.alias_info is not None for r in returns):
        return NodeKind.VIEW
    return NodeKind.NO_TENSOR


def _events(lifetimes: LifetimeAnalysis, sizes: Mapping[str, int], temporaries: Sequence[int]) -> list[MemoryEvent]:
    """Eager's allocations and frees, step by step: a node's results, then its temporaries
    (allocated and freed while it runs), then the storages it was the last to read."""
    outputs = {record.id for record in lifetimes.output_records}
    born: dict[int, list[str]] = {}
    dies: dict[int, list[str]] = {}
    for record in lifetimes.all_records:
        born.setdefault(record.first, []).append(record.id)
        if record.id not in outputs:
            dies.setdefault(record.last, []).append(record.id)
    events = []
    for step in range(lifetimes.num_steps):
        events += [MemoryEvent(step, storage, Action.ALLOCATE, sizes[storage]) for storage in born.get(step, ())]
        if temporaries[step]:
            temporary = f"<temporary of step {step}>"
            events += [
                MemoryEvent(step, temporary, Action.ALLOCATE, temporaries[step]),
                MemoryEvent(step, temporary, Action.FREE),
            ]
        events += [MemoryEvent(step, storage, Action.FREE) for storage in dies.get(step, ())]
    return events


def _plans(
    records: Sequence[TensorUsageRecord],
    planners: Sequence[str],
    planner_options: Mapping[str, Mapping[str, Any]],
    alignment: int,
    reserved_for: Any,
) -> tuple[PlanFootprint, ...]:
    from srbench.planners import plan_memory

    footprints = []
    for planner in planners:
        try:
            result = plan_memory(records, planner, alignment=alignment, **planner_options.get(planner, {}))
        except Exception as error:  # a planner plugin may fail any way; report it and go on
            footprints.append(PlanFootprint(planner, None, None, None, error=f"{type(error).__name__}: {error}"))
            continue
        total = result.plan.total_bytes
        footprints.append(
            PlanFootprint(
                planner,
                total,
                reserved_for(total),
                result.ratio_to_lower_bound,
                proven_optimal=result.plan.proven_optimal,
                seconds=result.seconds,
            )
        )
    return tuple(footprints)


def estimate_graph(
    graph: torch.fx.Graph,
    *,
    name: str,
    user_inputs: Collection[str],
    device: str = "cpu",
    traced_on: str | None = None,
    planners: Sequence[str] = (),
    planner_options: Mapping[str, Mapping[str, Any]] | None = None,
    alignment: int = DEFAULT_ALIGNMENT,
    problems: Sequence[NodeProblem] = (),
    complete: bool = True,
    notes: Sequence[str] = (),
) -> GraphEstimate:
    """Estimate ``graph`` (an ATen graph whose nodes carry FakeTensor ``meta["val"]``) for
    ``device``; see the module docstring. ``user_inputs`` names the placeholders that are the
    model's inputs (the others are parameters, buffers and constants)."""
    allocator = allocator_for(device)
    nodes = list(graph.nodes)
    facts = [op_facts(node) for node in nodes]
    aliases = {node.name: fact.returns_input for node, fact in zip(nodes, facts) if fact.returns_input}
    sized, data_dependent = concrete_graph(graph)
    copies = {node.name for node, fact in zip(nodes, facts) if fact.copies}
    lifetimes = analyze_lifetimes(sized, alignment=1, aliases=aliases, copies=copies)
    sizes = {record.id: record.size for record in lifetimes.all_records}
    for node in nodes:  # result storages a kernel makes larger than their shapes
        for index, extra in extra_result_bytes(node, device).items():
            storage = lifetimes.outputs_of.get(node.name, ())[index : index + 1]
            if storage and storage[0] is not None:
                sizes[storage[0]] += extra

    estimated_temporaries = [known_temporary(node, device, fact) for node, fact in zip(nodes, facts)]
    temporary_bytes = [temporary.nbytes for temporary, _ in estimated_temporaries]
    stats = allocator.replay(_events(lifetimes, sizes, temporary_bytes), steps=len(nodes))

    found = list(problems)
    estimates = []
    for step, (node, fact, (temporary, source)) in enumerate(zip(nodes, facts, estimated_temporaries)):
        storages = [s for s in lifetimes.outputs_of.get(node.name, ()) if s is not None]
        output = sum((_storage_bytes(node, s, sizes, data_dependent) for s in storages), ZERO)
        problem = "; ".join(p for p in (data_dependent.get(node.name), fact.problem) if p) or None
        if problem:
            found.append(NodeProblem(node.name, _op_name(node), problem))
        estimates.append(
            NodeEstimate(
                step=step,
                name=node.name,
                op=_op_name(node),
                kind=_kind(node, lifetimes, user_inputs, aliases),
                shape=describe(node.meta.get("val")),
                output=output,
                block_bytes=sum(allocator.block_size(sizes[s]) for s in storages),
                temporary=temporary,
                temporary_source=source,
                flops=fact.flops,
                live_bytes=stats.step_peaks[step] if step < len(stats.step_peaks) else 0,
                runs_as=fact.runs_as,
                problem=problem,
            )
        )

    records = [TensorUsageRecord(r.id, r.first, r.last, align_up(sizes[r.id], alignment)) for r in lifetimes.records]
    footprints = _plans(records, planners, planner_options or {}, alignment, allocator.reserved_for)
    bound = max((e.output.bound for e in estimates), key=list(Bound).index, default=Bound.EXACT)
    return GraphEstimate(
        name=name,
        device=device,
        traced_on=traced_on or device,
        nodes=tuple(estimates),
        parameter_bytes=_placeholder_bytes(nodes, lambda n: n.name not in user_inputs),
        input_bytes=_placeholder_bytes(nodes, lambda n: n.name in user_inputs),
        output_bytes=sum(sizes[record.id] for record in lifetimes.output_records),
        flops=sum(fact.flops for fact in facts),
        eager=stats,
        lower_bound=lower_bound(records),
        alignment=alignment,
        plans=footprints,
        problems=tuple(found),
        bound=bound,
        complete=complete,
        notes=tuple(notes),
    )


def _storage_bytes(node: torch.fx.Node, storage: str, sizes: Mapping[str, int], data_dependent: Mapping) -> ByteCount:
    if node.name not in data_dependent:
        return ByteCount(sizes[storage])
    values = node.meta.get("val")
    tensors = [values] if isinstance(values, torch.Tensor) else [v for v in values or () if isinstance(v, torch.Tensor)]
    bounded = sum((tensor_bytes(t) for t in tensors), ZERO)
    return ByteCount(sizes[storage], bounded.bound, bounded.why)


def _placeholder_bytes(nodes: Sequence[torch.fx.Node], wanted: Any) -> int:
    return sum(
        tensor_bytes(node.meta["val"]).nbytes
        for node in nodes
        if node.op in ("placeholder", "get_attr") and wanted(node) and isinstance(node.meta.get("val"), torch.Tensor)
    )
