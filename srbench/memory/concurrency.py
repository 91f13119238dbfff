"""Memory plans for multistream schedules: lifetimes on a partial order, and their validator.

With one stream, a tensor's bytes may be reused once its last reader has run: records count
steps in the one order ops run in. With several streams, ops of different streams run in any
interleaving, so reusing tensor A's bytes for tensor B is safe only if every use of A (its
producer and every reader) *happens before* B's producer under the schedule (a chain of
same-stream successions and cross-stream waits, :class:`~srbench.schedulers.schedule.HappensBefore`).

:func:`concurrent_records` expresses that rule as ordinary :class:`TensorUsageRecord` s, so every
planner plans multistream graphs unchanged through ``plan_memory``: steps are positions in the
schedule's issue order, a tensor starts at its producer, and it ends at the last position of an
op that is *not* ordered after all of its uses. Two tensors whose records do not overlap are
then ordered (the later one's producer sits past that point, so after every use of the earlier
one); the price is that a tensor also stays alive over ops of other streams that may still run
beside its uses. With one stream this gives the single-stream records back. AITemplate's simple
multistream planner indexes lifetimes by parallel step; a schedule whose steps are separated by
waits gets exactly those lifetimes from this rule.

:func:`check_concurrency` checks a plan against the rule itself, pair by pair of tensors that
share bytes, and names both tensors when it fails: it is how a single-stream plan is shown to be
unsafe on several streams, and the independent check of every multistream plan.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from srbench.memory.records import (
    DEFAULT_ALIGNMENT,
    MemoryPlan,
    PlanError,
    TensorUsageRecord,
    align_up,
    lower_bound,
)
from srbench.planners import DEFAULT_PLANNER, PlanResult, plan_memory
from srbench.schedulers.schedule import HappensBefore, Schedule


class ConcurrencyError(PlanError):
    """Two tensors share bytes although ops using them may run at the same time."""


@dataclass(frozen=True)
class TensorUses:
    """The ops that touch one planned tensor: the one that writes it first, and every other op
    that reads or writes it through any alias."""

    id: str
    producer: str
    readers: frozenset[str] = frozenset()

    @property
    def ops(self) -> frozenset[str]:
        return self.readers | {self.producer}


def _check_uses(records: Sequence[TensorUsageRecord], uses: Mapping[str, TensorUses], order: HappensBefore) -> None:
    for record in records:
        use = uses.get(record.id)
        if use is None:
            raise PlanError(f"tensor {record.id!r} has no recorded uses", (record.id,))
        for op in use.ops:
            if op not in order.stream:
                raise PlanError(f"tensor {record.id!r} is used by op {op!r}, which is not scheduled", (record.id,))


def concurrent_records(
    records: Sequence[TensorUsageRecord],
    uses: Mapping[str, TensorUses],
    schedule: Schedule,
    *,
    live_to_end: Collection[str] = (),
    order: HappensBefore | None = None,
) -> list[TensorUsageRecord]:
    """``records`` with lifetimes re-counted for ``schedule`` (see the module docstring).

    Sizes and ids are kept; ``live_to_end`` names tensors that must outlive the run (graph
    outputs), which end at the last step.
    """
    order = order or HappensBefore(schedule)
    _check_uses(records, uses, order)
    position = {op: i for i, op in enumerate(schedule.order)}
    end = len(schedule.order) - 1
    # per stream, positions of its ops in issue order (increasing: the order is an interleaving)
    positions = [[position[op] for op in ops] for ops in schedule.streams]
    overlapped: dict[str, int] = {}

    def concurrent_until(op: str) -> int:
        """The last position of an op that ``op`` does not happen before (``op`` itself at least)."""
        found = overlapped.get(op)
        if found is None:
            found = position[op]
            for stream, stream_positions in enumerate(positions):
                after = order.first_after(op, stream)
                if after:
                    found = max(found, stream_positions[after - 1])
            overlapped[op] = found
        return found

    result = []
    for record in records:
        use = uses[record.id]
        first = position[use.producer]
        last = end if record.id in live_to_end else max(concurrent_until(op) for op in use.ops)
        result.append(TensorUsageRecord(record.id, first, last, record.size))
    return result


def check_concurrency(
    records: Sequence[TensorUsageRecord],
    plan: MemoryPlan,
    uses: Mapping[str, TensorUses],
    schedule: Schedule,
    *,
    live_to_end: Collection[str] = (),
    order: HappensBefore | None = None,
) -> None:
    """Raise :class:`ConcurrencyError` unless, for every two tensors of ``plan`` that share a
    byte, every use of one happens before the producer of the other under ``schedule``
    (tensors in ``live_to_end`` outlive the run: nothing may follow them in their bytes).

    Pairs are found by a sweep over offsets (only tensors whose byte ranges overlap are
    compared); each pair is decided with vector clocks in O(streams).
    """
    order = order or HappensBefore(schedule)
    _check_uses(records, uses, order)
    last_use: dict[str, list[int]] = {}  # per tensor, per stream: highest index of a use, or -1
    for record in records:
        latest = [-1] * schedule.num_streams
        for op in uses[record.id].ops:
            latest[order.stream[op]] = max(latest[order.stream[op]], order.index[op])
        last_use[record.id] = latest

    def ordered(earlier: str, later: str) -> bool:
        producer = uses[later].producer
        if earlier in live_to_end or producer in uses[earlier].ops:
            return False
        clock = order.clock[producer]
        return all(clock[s] > index for s, index in enumerate(last_use[earlier]) if index >= 0)

    position = {op: i for i, op in enumerate(schedule.order)}
    placed = sorted(
        (plan.offsets[r.id], plan.offsets[r.id] + r.size, r.id) for r in records if r.size and r.id in plan.offsets
    )
    active: list[tuple[int, int, str]] = []  # (start, end, id) of tensors reaching past the sweep point
    for start, stop, tensor in placed:
        active = [entry for entry in active if entry[1] > start]
        for entry in active:
            other = entry[2]
            if ordered(other, tensor) or ordered(tensor, other):
                continue
            first, second = sorted([entry, (start, stop, tensor)], key=lambda e: position[uses[e[2]].producer])
            outlives = [t for t in (first[2], second[2]) if t in live_to_end]
            why = (
                f"{outlives[0]!r} is a graph output, which must outlive the run"
                if outlives
                else f"under schedule {schedule.scheduler!r} ops using them (on streams "
                f"{_streams_of(first[2], uses, order)} and {_streams_of(second[2], uses, order)}) "
                "may run at the same time"
            )
            raise ConcurrencyError(
                f"plan {plan.planner!r}: tensors {first[2]!r} [{first[0]}, {first[1]}) and "
                f"{second[2]!r} [{second[0]}, {second[1]}) share bytes, but {why}",
                (first[2], second[2]),
            )
        active.append((start, stop, tensor))


def _streams_of(tensor: str, uses: Mapping[str, TensorUses], order: HappensBefore) -> str:
    return ",".join(str(s) for s in sorted({order.stream[op] for op in uses[tensor].ops}))


def issue_order_records(
    records: Sequence[TensorUsageRecord],
    uses: Mapping[str, TensorUses],
    schedule: Schedule,
    *,
    live_to_end: Collection[str] = (),
) -> list[TensorUsageRecord]:
    """``records`` with lifetimes counted in the schedule's issue order, as if its ops ran one
    after the other in that order (one of the interleavings every multistream plan must allow:
    their lower bound is a lower bound for any plan of the schedule)."""
    position = {op: i for i, op in enumerate(schedule.order)}
    end = len(schedule.order) - 1
    return [
        TensorUsageRecord(
            r.id,
            position[uses[r.id].producer],
            end if r.id in live_to_end else max(position[op] for op in uses[r.id].ops),
            r.size,
        )
        for r in records
    ]


def _per_stream_layout(
    records: Sequence[TensorUsageRecord],
    uses: Mapping[str, TensorUses],
    schedule: Schedule,
    order: HappensBefore,
    planner: str,
    live_to_end: Collection[str],
    alignment: int,
    options: Mapping[str, Any],
) -> MemoryPlan:
    """One region of the slab per stream for the tensors only that stream uses, planned in the
    stream's own order (ops of one stream never overlap, so any reuse inside a region is safe),
    then one region for the tensors several streams use (or that outlive the run), planned on
    :func:`concurrent_records`."""
    private: list[list[TensorUsageRecord]] = [[] for _ in schedule.streams]
    shared: list[TensorUsageRecord] = []
    for record in records:
        streams = {order.stream[op] for op in uses[record.id].ops}
        if len(streams) == 1 and record.id not in live_to_end:
            indices = [order.index[op] for op in uses[record.id].ops]
            first = order.index[uses[record.id].producer]
            private[streams.pop()].append(TensorUsageRecord(record.id, first, max(indices), record.size))
        else:
            shared.append(record)
    regions = [*private, concurrent_records(shared, uses, schedule, live_to_end=live_to_end, order=order)]
    offsets: dict[str, int] = {}
    base = 0
    for region in regions:
        if not region:
            continue
        placed = plan_memory(region, planner, alignment=alignment, **options).plan
        offsets.update({tensor: base + offset for tensor, offset in placed.offsets.items()})
        base += align_up(placed.total_bytes, alignment)
    total = max((offsets[r.id] + r.size for r in records if r.size), default=0)
    return MemoryPlan(planner, offsets, total, notes={"layout": "a region per stream"})


def plan_concurrent_memory(
    records: Sequence[TensorUsageRecord],
    uses: Mapping[str, TensorUses],
    schedule: Schedule,
    planner: str = DEFAULT_PLANNER,
    *,
    live_to_end: Collection[str] = (),
    alignment: int = DEFAULT_ALIGNMENT,
    **options: Any,
) -> PlanResult:
    """Plan ``records`` for ``schedule`` with any registered planner; ``options`` go to it.

    Two layouts are planned and the smaller kept. *One region*: every tensor on the records of
    :func:`concurrent_records`, so tensors of different streams share bytes wherever waits order
    them, but a tensor also stays alive while other streams may still run. *A region per
    stream* (:func:`_per_stream_layout`): tensors used by one stream only reuse each other's
    bytes as on one stream, never another stream's. Every plan goes through ``plan_memory``
    (validated there), and the kept one is checked against the concurrency rule itself. The
    lower bound beside it is that of the schedule's issue order run on one stream.
    """
    start = time.perf_counter()
    order = HappensBefore(schedule)
    concurrent = concurrent_records(records, uses, schedule, live_to_end=live_to_end, order=order)
    one_region = plan_memory(concurrent, planner, alignment=alignment, **options).plan
    one_region = replace(one_region, notes={**one_region.notes, "layout": "one region"})
    per_stream = _per_stream_layout(records, uses, schedule, order, planner, live_to_end, alignment, options)
    plan = min(one_region, per_stream, key=lambda p: p.total_bytes)
    check_concurrency(records, plan, uses, schedule, live_to_end=live_to_end, order=order)
    bound = lower_bound(issue_order_records(records, uses, schedule, live_to_end=live_to_end))
    return PlanResult(plan=plan, lower_bound=bound, seconds=time.perf_counter() - start, num_tensors=len(records))
