"""Estimated, planned and observed bytes of one model, node by node.

For a zoo case this gathers: the estimate on fake tensors (:mod:`srbench.estimate`); eager
observed node by node (:mod:`srbench.observe.eager`); srbench's static runtime prepared with the
given options (its plan: which nodes write into the slab, and how many bytes each result takes
there; the lower bound is that of every intermediate it plans, in the slab or hosted in
outputs' bytes, :mod:`srbench.memory.hosting`) and observed running
(:mod:`srbench.observe.static`). The three captures of one model give the same node names, so a
row is one node of the graph, in graph order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from srbench.estimate import GraphEstimate, NodeKind, estimate_case
from srbench.memory.records import lower_bound
from srbench.observe.observation import NodeObservation, Observation
from srbench.zoo import ModelCase

if TYPE_CHECKING:
    from srbench.static import StaticOptions

RUNTIMES = ("eager", "srbench")


@dataclass(frozen=True)
class NodeSideBySide:
    """One node: what the estimate says, what srbench planned for it, what each runtime did.

    ``planned_bytes`` is what srbench's slab holds for the node's results (0 when they are not
    in the slab: views, fallback ops, outputs), ``srbench_how`` how srbench runs it (``out``,
    ``fallback``...; None when srbench does not run it at all: folded constants, views made once
    per runtime). ``lower_bound_live`` is the bytes of planned intermediates alive at the node.
    """

    step: int
    node: str
    op: str
    estimated_output: int
    estimated_temporary: int
    temporary_source: str
    estimated_live: int
    planned_bytes: int
    srbench_how: str | None
    lower_bound_live: int
    eager: NodeObservation | None
    srbench: NodeObservation | None


@dataclass(frozen=True)
class SideBySide:
    model: str
    estimate: GraphEstimate
    eager: Observation | None
    srbench: Observation | None
    slab_bytes: int
    lower_bound: int
    rows: tuple[NodeSideBySide, ...]
    hosted_bytes: int = 0  # intermediates planned into outputs' bytes (srbench.memory.hosting)


def _profile(records: Sequence, steps: int) -> list[int]:
    """Bytes of ``records`` alive at each step."""
    live = [0] * (steps + 1)
    for record in records:
        live[record.first] += record.size
        live[record.last + 1] -= record.size
    running, profile = 0, []
    for step in range(steps):
        running += live[step]
        profile.append(running)
    return profile


def side_by_side(
    case: ModelCase,
    *,
    runtimes: Sequence[str] = RUNTIMES,
    batch: int | None = None,
    options: StaticOptions | None = None,
    device: str = "cpu",
) -> SideBySide:
    """Estimate, prepare, plan and observe ``case`` at its default input shape on ``device``;
    ``options`` are the :class:`srbench.static.StaticOptions` srbench runs with (the defaults
    when None). Bytes are the device allocator's blocks (on CUDA, requests rounded up to 512)."""
    from srbench.graph import capture
    from srbench.observe.eager import observe_eager
    from srbench.observe.static import observe_static
    from srbench.static import StaticModule, StaticOptions

    unknown = [name for name in runtimes if name not in RUNTIMES]
    if unknown:
        raise ValueError(f"unknown runtime {unknown[0]!r} to observe; expected one of {', '.join(RUNTIMES)}")
    estimate = estimate_case(case, batch=batch, planners=[], device=device)
    inputs = case.example_inputs(0, batch=batch).to(device)
    eager = None
    if "eager" in runtimes:
        eager = observe_eager(capture(case.model().to(device), inputs, name=case.name), inputs, device=device)
    module = StaticModule(case.model().to(device), inputs, options or StaticOptions(), name=case.name)
    srbench = observe_static(module, inputs) if "srbench" in runtimes else None

    prepared = module.prepared
    sizes = {record.id: record.size for record in prepared.analysis.all_records}
    slab = {tensor.storage for tensor in prepared.managed}
    plans = {plan.node.name: plan for plan in prepared.plans}
    graph_steps = {node.name: step for step, node in enumerate(prepared.captured.graph.nodes)}
    lower = _profile(prepared.analysis.records, len(graph_steps))
    eager_nodes = {n.node: n for n in eager.nodes} if eager else {}
    srbench_nodes = {n.node: n for n in srbench.nodes} if srbench else {}
    rows = []
    for node in estimate.nodes:
        if node.kind in (NodeKind.INPUT, NodeKind.PARAMETER, NodeKind.OUTPUT, NodeKind.NO_TENSOR):
            continue
        plan = plans.get(node.name)
        ran = srbench_nodes.get(node.name)
        storages = plan.result_storages if plan is not None else ()
        rows.append(
            NodeSideBySide(
                step=node.step,
                node=node.name,
                op=node.op,
                estimated_output=node.block_bytes,
                estimated_temporary=node.temporary.nbytes,
                temporary_source=node.temporary_source.value,
                estimated_live=node.live_bytes,
                planned_bytes=sum(sizes[s] for s in storages if s is not None and s in slab),
                srbench_how=plan.how.value if plan is not None and ran is not None else None,
                lower_bound_live=lower[graph_steps[node.name]] if node.name in graph_steps else 0,
                eager=eager_nodes.get(node.name),
                srbench=ran,
            )
        )
    # the intermediates srbench plans: the slab's, and those planned into outputs' bytes
    planned = slab | set(prepared.hosting.placement if prepared.hosting else ())
    return SideBySide(
        model=case.name,
        estimate=estimate,
        eager=eager,
        srbench=srbench,
        slab_bytes=prepared.slab_bytes,
        lower_bound=lower_bound([record for record in prepared.analysis.records if record.id in planned]),
        rows=tuple(rows),
        hosted_bytes=prepared.hosted_bytes,
    )
