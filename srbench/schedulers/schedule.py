"""What a scheduler returns, the happens-before order it implies, and the check it must pass.

A :class:`Schedule` assigns every op to one stream (a CPU thread, or a CUDA stream) and orders the
ops of each stream; ops of different streams are ordered only by :class:`CrossStreamWait`s (an
event recorded after ``producer`` on its stream, waited for before ``consumer`` on another). So
op ``x`` *happens before* op ``y`` exactly when a chain of same-stream successions and waits
leads from ``x`` to ``y``; otherwise they may run at the same time. :class:`HappensBefore`
answers that in O(1) per query with vector clocks, and :func:`check_schedule` rejects, before
any op runs, a schedule under which an op may start before one it depends on (naming both), or
which waits in a circle (a deadlock).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from srbench.schedulers.graph import OpGraph


class ScheduleError(ValueError):
    """A schedule that cannot run its graph correctly. ``ops`` names the ops involved."""

    def __init__(self, message: str, ops: tuple[str, ...] = ()):
        super().__init__(message)
        self.ops = ops


@dataclass(frozen=True)
class CrossStreamWait:
    """``consumer`` starts only after ``producer`` (on another stream) has finished."""

    producer: str
    consumer: str


@dataclass(frozen=True)
class Schedule:
    """Ops per stream in the order each stream runs them, and the waits between streams.

    ``order`` is one interleaving of all ops consistent with both (every op after its stream
    predecessor and after the producers it waits for): the order a single host thread issues
    them in on CUDA, and the time axis multistream lifetimes are measured on
    (:mod:`srbench.memory.concurrency`). ``notes`` carries what the scheduler wants reported
    (estimated times, the streams it considered). ``tentative``: the scheduler's gain is an
    estimate the runtime should check: it keeps the schedule only if it measures faster than
    one stream at prepare time.
    """

    scheduler: str
    streams: tuple[tuple[str, ...], ...]
    waits: tuple[CrossStreamWait, ...]
    order: tuple[str, ...]
    notes: Mapping[str, object] = field(default_factory=dict)
    tentative: bool = False

    @property
    def num_streams(self) -> int:
        return len(self.streams)

    def stream_of(self) -> dict[str, int]:
        return {op: s for s, ops in enumerate(self.streams) for op in ops}

    def events(self) -> dict[str, tuple[str, ...]]:
        """Ops after which an event is recorded -> the ops that wait for it."""
        waiters: dict[str, list[str]] = {}
        for wait in self.waits:
            waiters.setdefault(wait.producer, []).append(wait.consumer)
        return {producer: tuple(consumers) for producer, consumers in waiters.items()}


class HappensBefore:
    """The happens-before order of a schedule, as vector clocks.

    ``clock[op][s]`` counts the ops of stream ``s`` that have finished whenever ``op`` starts, or
    have started (``op`` itself, on its own stream). Clocks are computed in one pass in a
    topological order of same-stream successions and waits; a circle of waits means no such
    order exists and raises :class:`ScheduleError` naming the ops that wait for each other.
    """

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.stream: dict[str, int] = {}
        self.index: dict[str, int] = {}
        for s, ops in enumerate(schedule.streams):
            for i, op in enumerate(ops):
                if op in self.stream:
                    raise ScheduleError(
                        f"scheduler {schedule.scheduler!r}: op {op!r} is scheduled twice "
                        f"(streams {self.stream[op]} and {s})",
                        (op,),
                    )
                self.stream[op], self.index[op] = s, i
        waited: dict[str, list[str]] = {}
        for wait in schedule.waits:
            for op in (wait.producer, wait.consumer):
                if op not in self.stream:
                    raise ScheduleError(
                        f"scheduler {schedule.scheduler!r}: a wait names op {op!r}, which is not scheduled", (op,)
                    )
            waited.setdefault(wait.consumer, []).append(wait.producer)
        self.clock: dict[str, tuple[int, ...]] = {}
        self._columns: dict[tuple[int, int], list[int]] = {}
        width = schedule.num_streams
        for op in self._topological(waited):
            s, i = self.stream[op], self.index[op]
            clock = list(self.clock[schedule.streams[s][i - 1]]) if i else [0] * width
            for producer in waited.get(op, ()):
                clock = [max(a, b) for a, b in zip(clock, self.clock[producer])]
            clock[s] = i + 1
            self.clock[op] = tuple(clock)

    def _topological(self, waited: Mapping[str, list[str]]) -> list[str]:
        streams = self.schedule.streams
        pending = {op: len(waited.get(op, ())) + (1 if self.index[op] else 0) for op in self.stream}
        released: dict[str, list[str]] = {}
        for consumer, producers in waited.items():
            for producer in producers:
                released.setdefault(producer, []).append(consumer)
        ready = [op for op, count in pending.items() if count == 0]
        result = []
        while ready:
            op = ready.pop()
            result.append(op)
            s, i = self.stream[op], self.index[op]
            following = released.get(op, []) + ([streams[s][i + 1]] if i + 1 < len(streams[s]) else [])
            for successor in following:
                pending[successor] -= 1
                if pending[successor] == 0:
                    ready.append(successor)
        if len(result) < len(self.stream):
            stuck = self._cycle({op for op, count in pending.items() if count > 0}, waited)
            raise ScheduleError(
                f"scheduler {self.schedule.scheduler!r}: deadlock, ops wait for each other in a circle: "
                + " -> ".join(f"{op!r} (stream {self.stream[op]})" for op in stuck),
                tuple(stuck),
            )
        return result

    def _cycle(self, stuck: set[str], waited: Mapping[str, list[str]]) -> list[str]:
        """One circle among the ops that never became ready: walk back through what each waits for."""
        streams = self.schedule.streams

        def blockers(op: str) -> list[str]:
            s, i = self.stream[op], self.index[op]
            before = [streams[s][i - 1]] if i else []
            return [p for p in before + list(waited.get(op, ())) if p in stuck]

        op = min(stuck)
        seen: dict[str, int] = {}
        path: list[str] = []
        while op not in seen:
            seen[op] = len(path)
            path.append(op)
            op = blockers(op)[0]
        return list(reversed(path[seen[op] :]))

    def before(self, first: str, second: str) -> bool:
        """``first`` finishes before ``second`` starts, under every interleaving."""
        return first != second and self.clock[second][self.stream[first]] > self.index[first]

    def first_after(self, op: str, stream: int) -> int:
        """Index on ``stream`` of the first op that ``op`` happens before (its length if none).

        Clocks never decrease along a stream, so the ops ``op`` happens before are a suffix of
        each stream, found by bisection."""
        own = self.stream[op]
        if stream == own:
            return self.index[op] + 1
        column = self._columns.get((stream, own))
        if column is None:
            column = self._columns[(stream, own)] = [self.clock[o][own] for o in self.schedule.streams[stream]]
        return bisect.bisect_left(column, self.index[op] + 1)


def check_schedule(graph: OpGraph, schedule: Schedule) -> HappensBefore:
    """Raise :class:`ScheduleError` unless ``schedule`` runs exactly ``graph``'s ops, without
    deadlock, each after every op it depends on, and ``schedule.order`` is a valid interleaving.
    Returns the happens-before order, for whoever plans memory on the schedule next."""
    name = schedule.scheduler
    known = set(graph.ops)
    scheduled: set[str] = set()
    for s, ops in enumerate(schedule.streams):
        if not ops:
            raise ScheduleError(f"scheduler {name!r}: stream {s} has no ops")
        for op in ops:
            if op not in known:
                raise ScheduleError(f"scheduler {name!r}: op {op!r} is not in the graph", (op,))
            scheduled.add(op)
    for op in graph.ops:
        if op not in scheduled:
            raise ScheduleError(f"scheduler {name!r}: op {op!r} is not scheduled", (op,))
    order = HappensBefore(schedule)
    for op in graph.ops:
        for dep in sorted(graph.deps_of(op)):
            if not order.before(dep, op):
                s_dep, s_op = order.stream[dep], order.stream[op]
                why = (
                    f"it comes before {dep!r} on stream {s_op}"
                    if s_dep == s_op
                    else f"no event orders stream {s_dep} before it on stream {s_op}"
                )
                raise ScheduleError(
                    f"scheduler {name!r}: op {op!r} may start before {dep!r}, which it depends on: {why}", (dep, op)
                )
    _check_order(schedule, order)
    return order


def _check_order(schedule: Schedule, order: HappensBefore) -> None:
    name = schedule.scheduler
    if sorted(schedule.order) != sorted(order.stream):
        raise ScheduleError(f"scheduler {name!r}: the issue order does not list every scheduled op exactly once")
    position = {op: i for i, op in enumerate(schedule.order)}
    for ops in schedule.streams:
        for a, b in itertools.pairwise(ops):
            if position[a] > position[b]:
                raise ScheduleError(f"scheduler {name!r}: the issue order puts {b!r} before {a!r}", (a, b))
    for wait in schedule.waits:
        if position[wait.producer] > position[wait.consumer]:
            raise ScheduleError(
                f"scheduler {name!r}: the issue order puts {wait.consumer!r} before {wait.producer!r}, "
                "which it waits for",
                (wait.producer, wait.consumer),
            )


def build_schedule(
    scheduler: str,
    graph: OpGraph,
    streams: Sequence[Sequence[str]],
    *,
    extra_deps: Mapping[str, Iterable[str]] | None = None,
    priority: Callable[[str], object] | None = None,
    notes: Mapping[str, object] | None = None,
) -> Schedule:
    """The schedule that runs ``streams`` (ops per stream, in order) with the fewest waits that
    order every dependency of ``graph`` (and ``extra_deps``, op -> ops it must follow).

    A dependency needs a wait only if the happens-before order built so far does not already
    imply it: ops are visited in an interleaving of the streams; each op's vector clock starts
    from its stream predecessor's and is raised by a wait on each dependency it does not yet
    cover, latest issued first (so no wait is implied by another: the waits are the fewest).
    Empty streams are dropped. ``priority`` orders the interleaving among ops ready at the same
    time (default: graph order); the result is the schedule's ``order``.
    """
    lanes = tuple(tuple(ops) for ops in streams if ops)
    stream_of = {op: s for s, ops in enumerate(lanes) for op in ops}
    index = {op: i for ops in lanes for i, op in enumerate(ops)}
    rank = {op: i for i, op in enumerate(graph.ops)}
    key = priority or rank.__getitem__
    missing = [op for op in graph.ops if op not in stream_of]
    if missing:
        raise ScheduleError(f"scheduler {scheduler!r}: op {missing[0]!r} is not scheduled", (missing[0],))
    needs = {op: set(graph.deps_of(op)) | set((extra_deps or {}).get(op, ())) for op in stream_of}
    width = len(lanes)
    clock: dict[str, list[int]] = {}
    waits: list[CrossStreamWait] = []
    order: list[str] = []
    position: dict[str, int] = {}
    heads = [0] * width  # per stream, the next op not yet visited
    offered: set[str] = set()
    ready: list[tuple[object, int, str]] = []

    def offer_heads() -> None:
        for s in range(width):
            if heads[s] < len(lanes[s]):
                op = lanes[s][heads[s]]
                if op not in offered and all(dep in clock for dep in needs[op]):
                    offered.add(op)
                    heapq.heappush(ready, (key(op), rank.get(op, 0), op))

    offer_heads()
    while ready:
        _, _, op = heapq.heappop(ready)
        s, i = stream_of[op], index[op]
        current = list(clock[lanes[s][i - 1]]) if i else [0] * width
        # latest issued first: a dependency issued later may imply an earlier one, never the reverse
        for dep in sorted(needs[op], key=position.__getitem__, reverse=True):
            if current[stream_of[dep]] <= index[dep]:  # not yet ordered: wait for it, inherit its clock
                waits.append(CrossStreamWait(dep, op))
                current = [max(a, b) for a, b in zip(current, clock[dep])]
        current[s] = i + 1
        clock[op] = current
        position[op] = len(order)
        order.append(op)
        heads[s] += 1
        offer_heads()
    if len(order) < len(stream_of):
        blocked = next(lanes[s][heads[s]] for s in range(width) if heads[s] < len(lanes[s]))
        lacking = sorted(dep for dep in needs[blocked] if dep not in clock)
        raise ScheduleError(
            f"scheduler {scheduler!r}: op {blocked!r} can never start: it depends on {lacking[0]!r}, "
            "which its streams order after it",
            (lacking[0], blocked),
        )
    return Schedule(scheduler, lanes, tuple(waits), tuple(order), dict(notes or {}))
