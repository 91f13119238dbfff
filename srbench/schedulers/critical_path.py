"""Critical-path list scheduling that keeps branches too small to pay on one stream.

List scheduling with estimated times, in the manner of ETF (earliest task first, Hwang et al.
1989): at each step, among the ready ops, the op and stream that can start earliest under the
cost model of :mod:`srbench.schedulers.timeline` go next: a dependency on another stream costs a
wake-up, dispatch holds the GIL (or the one host thread on CUDA), extra streams cost a hand-off
and a join. Ties go to a start without a cross-stream wait, then to the op continuing the
stream's chain (so a stream runs a branch to its end, which keeps its tensors few and its waits
rare), then to the op on the critical path: the highest *bottom level*, the estimated time from
its start to the end of the graph along its longest chain of dependents. A small branch stays on
its producer's stream, where it starts sooner than anywhere else.

The whole schedule is then judged: with 1, 2, ... ``streams`` streams, the estimated makespans
are compared and more streams are kept only when they are estimated to save at least
``min_gain`` of the time of the best schedule with fewer. A graph whose parallelism does not pay
is scheduled on one stream, in the captured graph's order. A schedule on several streams is
*tentative*: the static runtime runs it and one stream side by side at prepare time and keeps
the faster, so a machine busier than the estimate thought never makes the run slower.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from srbench.schedulers import sequential
from srbench.schedulers.graph import OpGraph
from srbench.schedulers.schedule import Schedule, build_schedule
from srbench.schedulers.timeline import SerialResource, dispatch_seconds, earliest_start, estimate, makespan

NAME = "critical_path"


def bottom_levels(graph: OpGraph) -> dict[str, float]:
    """Estimated seconds from an op's start to the end of the graph along its dependents."""
    dispatch = graph.cost_model.dispatch_seconds
    successors = graph.successors()
    level: dict[str, float] = {}
    for op in reversed(graph.ops):
        level[op] = dispatch + graph.cost(op) + max((level[s] for s in successors[op]), default=0.0)
    return level


# Ready ops considered at each step: the most critical ones (bounds the cost on wide graphs).
CANDIDATES = 32


def _list_schedule(graph: OpGraph, streams: int) -> tuple[Schedule, float]:
    model = graph.cost_model
    dispatch = dispatch_seconds(model, streams)
    quantum = max(dispatch, 1e-7)  # start times closer than this count as equal
    rank = {op: i for i, op in enumerate(graph.ops)}
    level = bottom_levels(graph)
    successors = graph.successors()
    waiting = {op: len(graph.deps_of(op)) for op in graph.ops}
    ready = [op for op in graph.ops if not waiting[op]]
    free = [0.0] + [model.stream_seconds] * (streams - 1)
    last_on: list[str | None] = [None] * streams
    used: dict[int, float] = {}
    serial = SerialResource()
    per_stream: list[list[str]] = [[] for _ in range(streams)]
    stream_of: dict[str, int] = {}
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    while ready:
        best: tuple[tuple, str, int, float] | None = None
        for op in heapq.nsmallest(CANDIDATES, ready, key=lambda o: (-level[o], rank[o])):
            deps = graph.deps_of(op)
            for s in range(streams):
                t = earliest_start(op, s, graph, free[s], end, stream_of)
                key = (
                    round(t / quantum),  # earliest start first
                    any(stream_of[d] != s for d in deps),  # then no wait across streams
                    last_on[s] not in deps,  # then continuing the stream's chain
                    -level[op],  # then the most critical
                    rank[op],
                    s,
                )
                if best is None or key < best[0]:
                    best = (key, op, s, t)
        assert best is not None
        _, op, stream, ready_at = best
        ready.remove(op)
        start[op] = serial.reserve(ready_at, dispatch)
        end[op] = free[stream] = used[stream] = start[op] + dispatch + graph.cost(op)
        stream_of[op], last_on[stream] = stream, op
        per_stream[stream].append(op)
        for successor in successors[op]:
            waiting[successor] -= 1
            if not waiting[successor]:
                ready.append(successor)
    schedule = build_schedule(NAME, graph, per_stream, priority=lambda op: (start[op], stream_of[op]))
    return schedule, makespan(used, graph)


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
    return replace(best, notes=notes, tentative=True)  # estimated: the runtime checks it
