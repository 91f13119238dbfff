"""Estimated timelines: when each op of a schedule would start and end under a cost model.

The model (:class:`~srbench.schedulers.costs.CostModel`): an op starts once its stream is free
and every op it depends on has ended (plus a wake-up when that op ran on another stream); its
dispatch then needs the one serial resource (the GIL, or the host thread launching CUDA
kernels) for ``dispatch_seconds`` (plus ``contention_seconds`` when several streams take turns
at it), and its kernel runs for its cost without it. Extra streams
start ``stream_seconds`` late (the hand-off) and join ``stream_seconds`` late, and a run never
takes less than its ops' total time spread over the machine's free ``cores``. Schedulers use
:class:`SerialResource` and :func:`earliest_start` to build schedules; :func:`estimate` gives the
makespan of any schedule, to compare them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass

from srbench.schedulers.costs import CostModel
from srbench.schedulers.graph import OpGraph
from srbench.schedulers.schedule import Schedule


class SerialResource:
    """Busy intervals of a resource only one op holds at a time; finds the earliest free slot."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []

    def reserve(self, ready: float, duration: float) -> float:
        """Book the earliest slot of ``duration`` at or after ``ready``; returns its start."""
        start = ready
        index = bisect.bisect_right(self.starts, start)
        if index and self.ends[index - 1] > start:
            start = self.ends[index - 1]
        while index < len(self.starts) and self.starts[index] < start + duration:
            start = max(start, self.ends[index])
            index += 1
        self.starts.insert(index, start)
        self.ends.insert(index, start + duration)
        return start


def earliest_start(
    op: str,
    stream: int,
    graph: OpGraph,
    stream_free: float,
    end: Mapping[str, float],
    stream_of: Mapping[str, int],
) -> float:
    """When ``op`` could start on ``stream``: its stream free, each dependency ended (woken up
    across streams)."""
    wait = graph.cost_model.wait_seconds
    start = stream_free
    for dep in graph.deps_of(op):
        start = max(start, end[dep] + (wait if stream_of[dep] != stream else 0.0))
    return start


def dispatch_seconds(model: CostModel, streams: int) -> float:
    """What dispatching one op holds the serial resource for: more when streams contend for it."""
    return model.dispatch_seconds + (model.contention_seconds if streams > 1 else 0.0)


def makespan(stream_ends: Mapping[int, float], graph: OpGraph) -> float:
    """End of a run: the last stream's end, extra streams joining ``stream_seconds`` late; and
    never less than the ops' total time spread over the cores that can run them at once."""
    model = graph.cost_model
    joined = max((t + (model.stream_seconds if s else 0.0) for s, t in stream_ends.items()), default=0.0)
    work = sum(graph.cost(op) for op in graph.ops) + len(graph.ops) * model.dispatch_seconds
    return max(joined, work / max(1.0, min(float(len(stream_ends)), model.cores)))


@dataclass(frozen=True)
class Timeline:
    start: Mapping[str, float]
    end: Mapping[str, float]
    seconds: float


def estimate(graph: OpGraph, schedule: Schedule) -> Timeline:
    """The estimated timeline of ``schedule`` (ops taken in its issue order)."""
    model = graph.cost_model
    stream_of = schedule.stream_of()
    free = {s: (model.stream_seconds if s else 0.0) for s in range(schedule.num_streams)}
    serial = SerialResource()
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    dispatch = dispatch_seconds(model, schedule.num_streams)
    for op in schedule.order:
        s = stream_of[op]
        ready = earliest_start(op, s, graph, free[s], end, stream_of)
        start[op] = serial.reserve(ready, dispatch)
        end[op] = free[s] = start[op] + dispatch + graph.cost(op)
    return Timeline(start, end, makespan(free, graph))
