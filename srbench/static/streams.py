"""Preparing a graph to run on several streams: its schedule and its multistream memory plan.

With ``StaticOptions(streams=N)`` (N > 1), the ops that run code each run are handed to the
scheduler named by ``options.scheduler`` (:mod:`srbench.schedulers`), with their dependencies
(data, in-place writes through aliases, effects: the order of the ops the resolver found to
draw random numbers, :attr:`~srbench.static.resolve.Resolution.draws`) and their costs: the seconds each op took at
prepare time where the resolver timed it (out variants and fallbacks, on the CPU), estimates
from FLOPs and bytes otherwise. The schedule is checked before any op runs. If the scheduler
keeps everything on one stream, the program is the ordinary one-stream program. Otherwise the
slab (and the output arena) are planned on multistream records
(:func:`srbench.memory.concurrency.plan_concurrent_memory`), so no two tensors used by ops that
may run at the same time share bytes, and the code is written per stream
(:mod:`srbench.static.stream_code`): on the CPU each stream is a thread, on CUDA a CUDA stream,
and cross-stream dependencies are events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch
import torch.fx

from srbench.memory.concurrency import plan_concurrent_memory
from srbench.memory.lifetimes import LifetimeAnalysis
from srbench.memory.records import TensorUsageRecord
from srbench.options import StaticOptions
from srbench.planners import PlanResult
from srbench.schedulers import Schedule, schedule_graph
from srbench.schedulers.costs import CUDA_COST_MODEL, DEFAULT_COST_MODEL, with_measured_machine
from srbench.schedulers.from_fx import op_graph, tensor_uses
from srbench.static.choose import NodePlan, RunAs
from srbench.static.resolve import Resolution
from srbench.static.stream_code import StreamMode


@dataclass(frozen=True)
class StreamPlan:
    """The schedule, and the slab and output-arena plans made for it."""

    schedule: Schedule
    plan: PlanResult | None
    output_plan: PlanResult | None


def measured_seconds(plans: Sequence[NodePlan], resolutions: Mapping[str, Resolution]) -> dict[str, float]:
    """Per node, the seconds its chosen call took at prepare time, where the resolver timed it."""
    measured = {}
    for plan in plans:
        resolution = resolutions.get(plan.node.name)
        if resolution is None:
            continue
        seconds = resolution.out_seconds if plan.how in (RunAs.OUT, RunAs.OUT_FRESH) else None
        if plan.how in (RunAs.FALLBACK, RunAs.SERVED):
            seconds = resolution.fallback_seconds
        if seconds is not None:
            measured[plan.node.name] = seconds
    return measured


def plan_streams(
    graph: torch.fx.Graph,
    analysis: LifetimeAnalysis,
    ops: Sequence[str],
    plans: Sequence[NodePlan],
    resolutions: Mapping[str, Resolution],
    options: StaticOptions,
    device: torch.device,
    slab_records: Sequence[TensorUsageRecord],
    arena_records: Sequence[TensorUsageRecord],
    shared: Mapping[str, str] | None = None,
) -> StreamPlan:
    """Schedule ``ops`` (the nodes that run code each run) and plan memory for the schedule.

    On CUDA the prepare-time timings measured kernel launches, not kernels, so costs are
    estimated from shapes there. On the CPU the cores free now and a thread hand-off are
    measured (:func:`~srbench.schedulers.costs.with_measured_machine`): on a busy machine the
    scheduler then keeps one stream. ``shared``: placeholders that are one storage
    (:func:`~srbench.schedulers.from_fx.shared_placeholders`), whose accesses keep the graph's order."""
    mode = StreamMode.for_device(device)
    threads = mode is StreamMode.THREADS
    graph_of_ops = op_graph(
        graph,
        analysis,
        runs=set(ops),
        measured=measured_seconds(plans, resolutions) if threads else None,
        cost_model=DEFAULT_COST_MODEL if threads else CUDA_COST_MODEL,
        draws={name for name, resolution in resolutions.items() if resolution.draws},
        shared=shared,
    )
    if threads:  # measured with as many threads as streams could be busy, never more (each is a thread)
        streams = min(options.streams, graph_of_ops.concurrency_bound())
        graph_of_ops = replace(graph_of_ops, cost_model=with_measured_machine(graph_of_ops.cost_model, streams))
    schedule = schedule_graph(graph_of_ops, options.scheduler, streams=options.streams)
    if schedule.num_streams == 1:
        return StreamPlan(schedule, None, None)
    uses = tensor_uses(graph, analysis, set(ops))
    plan = plan_concurrent_memory(slab_records, uses, schedule, options.planner) if slab_records else None
    outputs = {record.id for record in arena_records}
    output_plan = (
        plan_concurrent_memory(arena_records, uses, schedule, options.planner, live_to_end=outputs)
        if arena_records
        else None
    )
    return StreamPlan(schedule, plan, output_plan)
