"""Critical-path list scheduling that keeps branches too small to pay on one stream.

Classic list scheduling (HLFET: highest level first, with estimated times): an op's priority is
its *bottom level*, the estimated time from its start to the end of the graph along its longest
chain of dependents, so ops on the critical path go first. Taken in that order as they become
ready, each op goes to the stream where it could start earliest under the cost model of
:mod:`srbench.schedulers.timeline`: a dependency on another stream costs a wake-up, dispatch
holds the GIL (or the one host thread on CUDA), extra streams cost a hand-off and a join. A
small branch therefore stays on its producer's stream, where it starts sooner than anywhere
else.

The whole schedule is then judged: with 1, 2, ... ``streams`` streams, the estimated makespans
are compared and more streams are kept only when they are estimated to save at least
``min_gain`` of the time of the best schedule with fewer. A graph whose parallelism does not pay
is scheduled on one stream, in the captured graph's order.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from srbench.schedulers import sequential
from srbench.schedulers.graph import OpGraph
from srbench.schedulers.schedule import Schedule, build_schedule
from srbench.schedulers.timeline import SerialResource, earliest_start, estimate, makespan

NAME = "critical_path"


def bottom_levels(graph: OpGraph) -> dict[str, float]:
    """Estimated seconds from an op's start to the end of the graph along its dependents."""
    dispatch = graph.cost_model.dispatch_seconds
    successors = graph.successors()
    level: dict[str, float] = {}
    for op in reversed(graph.ops):
        level[op] = dispatch + graph.cost(op) + max((level[s] for s in successors[op]), default=0.0)
    return level


def _list_schedule(graph: OpGraph, streams: int) -> tuple[Schedule, float]:
    model = graph.cost_model
    rank = {op: i for i, op in enumerate(graph.ops)}
    level = bottom_levels(graph)
    successors = graph.successors()
    waiting = {op: len(graph.deps_of(op)) for op in graph.ops}
    ready = [(-level[op], rank[op], op) for op in graph.ops if not waiting[op]]
    heapq.heapify(ready)
    free = [0.0] + [model.stream_seconds] * (streams - 1)
    used: dict[int, float] = {}
    serial = SerialResource()
    per_stream: list[list[str]] = [[] for _ in range(streams)]
    stream_of: dict[str, int] = {}
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    while ready:
        _, _, op = heapq.heappop(ready)
        latest_dep = max(graph.deps_of(op), key=lambda d: (end[d], -rank[d]), default=None)
        home = stream_of[latest_dep] if latest_dep is not None else 0

        def when(s: int, op: str = op, home: int = home) -> tuple[float, bool, int]:
            # earliest start, then the stream of the latest dependency (no wait), then the lowest
            return (earliest_start(op, s, graph, free[s], end, stream_of), s != home, s)

        stream = min(range(streams), key=when)
        start[op] = serial.reserve(when(stream)[0], model.dispatch_seconds)
        end[op] = free[stream] = used[stream] = start[op] + model.dispatch_seconds + graph.cost(op)
        stream_of[op] = stream
        per_stream[stream].append(op)
        for successor in successors[op]:
            waiting[successor] -= 1
            if not waiting[successor]:
                heapq.heappush(ready, (-level[successor], rank[successor], successor))
    schedule = build_schedule(NAME, graph, per_stream, priority=lambda op: (start[op], stream_of[op]))
    return schedule, makespan(used, model)


def schedule(graph: OpGraph, *, streams: int, min_gain: float = 0.1) -> Schedule:
    one_stream = estimate(graph, sequential.schedule(graph)).seconds
    best, best_seconds = None, one_stream
    considered = {1: one_stream}
    for count in range(2, streams + 1):
        candidate, seconds = _list_schedule(graph, count)
        considered[count] = seconds
        if seconds < best_seconds * (1 - min_gain) and candidate.num_streams > 1:
            best, best_seconds = candidate, seconds
    notes = {"estimated_seconds": best_seconds, "estimated_seconds_by_streams": considered}
    if best is None:
        return build_schedule(NAME, graph, [graph.ops], notes=notes)
    return replace(best, notes=notes)
