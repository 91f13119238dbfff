"""Tensor usage records, memory plans, and the one validator every plan goes through.

A record says that a tensor needs ``size`` bytes from step ``first`` to step ``last``
(both inclusive: the step that produces it and the last step that reads it). A plan gives each
record a byte offset in one slab of ``total_bytes``. Planners are pure functions from records to
plans (see ``srbench.planners``); nothing here trusts them: :func:`validate_plan` checks every plan
in tests and at run time, and :func:`lower_bound` is the yardstick every plan is compared with.
"""

from __future__ import annotations

import bisect
import heapq
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_ALIGNMENT = 64
# Offsets index an int64-addressed uint8 slab: anything beyond cannot be allocated or viewed.
MAX_SLAB_BYTES = 2**63 - 1
# Planners count steps in int64, one past a record's last step and across lifetimes: steps up to
# here leave that arithmetic room (a last step of 2**63 - 1 wrapped the exact search's section
# bounds negative, a numpy error instead of a plan).
MAX_STEP = 2**62


class RecordError(ValueError):
    """Records that cannot be planned: negative size, inverted lifetime, duplicate id."""


class PlanError(ValueError):
    """A plan that is wrong for its records. ``tensors`` names the record ids involved."""

    def __init__(self, message: str, tensors: tuple[str, ...] = ()):
        super().__init__(message)
        self.tensors = tensors


@dataclass(frozen=True, slots=True)
class TensorUsageRecord:
    """One storage that needs memory: ``size`` bytes, alive over steps ``[first, last]``."""

    id: str
    first: int
    last: int
    size: int

    def overlaps_in_time(self, other: TensorUsageRecord) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class MemoryPlan:
    """Where each record lives in the slab. ``proven_optimal`` is only ever set by a planner
    that proved no smaller total exists (the exact planner)."""

    planner: str
    offsets: Mapping[str, int]
    total_bytes: int
    proven_optimal: bool = False
    notes: Mapping[str, object] = field(default_factory=dict)


def align_up(nbytes: int, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Round ``nbytes`` up to a multiple of ``alignment``."""
    if alignment <= 0:
        raise ValueError(f"alignment must be positive, got {alignment}")
    return -(-nbytes // alignment) * alignment


def check_alignment(alignment: object) -> int:
    """``alignment`` as a Python int, or ValueError naming it: a positive whole number of bytes.
    A numpy integer (an alignment computed from arrays) is taken as its value; planners given
    one as is kept numpy scalars in their offsets (storage groups' total was refused by the
    validator as not a byte count), and a float such as 1.5 gave every planner's plan offsets
    the validator refused, instead of one error naming the alignment."""
    if isinstance(alignment, bool) or not hasattr(alignment, "__index__"):
        raise ValueError(f"alignment must be a positive whole number of bytes, got {alignment!r}")
    value = operator.index(alignment)
    if value <= 0:
        raise ValueError(f"alignment must be a positive whole number of bytes, got {alignment!r}")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_records(records: Iterable[TensorUsageRecord], *, alignment: int = 1) -> None:
    """Reject records no planner should see, with the offending record in the message.

    Besides each record alone, the records together must fit an int64-addressed slab: their
    sizes, rounded up to ``alignment``, may not sum past :data:`MAX_SLAB_BYTES`. Planners do
    their arithmetic in int64 (numpy, numba), and no placement ever needs more than that sum, so
    records that pass cannot overflow a planner; records that fail are refused before planning,
    naming the largest sizes, instead of after it by the validator.
    """
    records = list(records)
    seen: set[str] = set()
    for index, record in enumerate(records):
        # Anything else failed inside a planner: a tuple or dict with an AttributeError, ids of
        # mixed types with a TypeError from sorting them, where the record is named here.
        if not isinstance(record, TensorUsageRecord):
            raise RecordError(
                f"records[{index}] is a {type(record).__name__}, expected a TensorUsageRecord(id, first, last, size)"
            )
        if not isinstance(record.id, str):
            raise RecordError(f"records[{index}]: id must be a str, got {type(record.id).__name__} {record.id!r}")
        for name in ("first", "last", "size"):
            if not _is_int(getattr(record, name)):
                raise RecordError(f"record {record.id!r}: {name} must be an int, got {getattr(record, name)!r}")
        if record.size < 0:
            raise RecordError(f"record {record.id!r}: negative size {record.size}")
        if record.first < 0:
            raise RecordError(f"record {record.id!r}: negative first step {record.first}")
        if record.last > MAX_STEP:
            raise RecordError(f"record {record.id!r}: last step {record.last} is beyond the largest step ({MAX_STEP})")
        if record.last < record.first:
            raise RecordError(
                f"record {record.id!r}: inverted lifetime, last step {record.last} is before first step {record.first}"
            )
        if record.size > MAX_SLAB_BYTES:
            raise RecordError(f"record {record.id!r}: size {record.size} exceeds the largest slab ({MAX_SLAB_BYTES})")
        if record.id in seen:
            raise RecordError(f"duplicate record id {record.id!r}")
        seen.add(record.id)
    check_total(records, alignment)


def check_total(records: Sequence[TensorUsageRecord], alignment: int) -> None:
    """Refuse records whose sizes, rounded up to ``alignment``, sum past the largest slab."""
    total = sum(align_up(record.size, alignment) for record in records)
    if total > MAX_SLAB_BYTES:
        largest = sorted(records, key=lambda r: (-r.size, r.id))[:3]
        named = ", ".join(f"{r.id!r} ({r.size} bytes)" for r in largest)
        raise RecordError(
            f"{len(records)} records need {total} bytes in all (sizes rounded up to {alignment}), beyond the "
            f"largest slab ({MAX_SLAB_BYTES}); the largest: {named}"
        )


def lower_bound(records: Iterable[TensorUsageRecord]) -> int:
    """The most bytes alive at any one step: no plan can be smaller than this."""
    delta: dict[int, int] = {}
    for record in records:
        delta[record.first] = delta.get(record.first, 0) + record.size
        delta[record.last + 1] = delta.get(record.last + 1, 0) - record.size
    live = best = 0
    for step in sorted(delta):
        live += delta[step]
        best = max(best, live)
    return best


def validate_plan(records: Sequence[TensorUsageRecord], plan: MemoryPlan, alignment: int = DEFAULT_ALIGNMENT) -> None:
    """Raise :class:`PlanError` unless ``plan`` is a correct placement of ``records``.

    Checked: every record has an integer, aligned, non-negative offset; the total covers every
    tensor and fits an int64-addressed slab; and no two tensors alive at the same step share a
    byte. The overlap check sweeps the steps keeping the live tensors sorted by offset: since
    the live set is disjoint so far, a new tensor only has to be compared with its neighbours,
    which keeps validation O(n log n) on plans of 10,000 tensors.
    """
    alignment = check_alignment(alignment)  # 0 divided by zero; 1.5 and -3 passed every offset
    if not isinstance(plan, MemoryPlan):  # a planner plugin's None was an AttributeError here
        raise PlanError(f"expected a MemoryPlan, got {type(plan).__name__} {plan!r:.60}")
    total = plan.total_bytes
    if not _is_int(total) or total < 0 or total > MAX_SLAB_BYTES:
        raise PlanError(f"plan {plan.planner!r}: total {total!r} is not a byte count in [0, {MAX_SLAB_BYTES}]")
    known = {record.id for record in records}
    extra = set(plan.offsets) - known
    if extra:
        raise PlanError(f"plan {plan.planner!r} places unknown tensors {sorted(extra)[:5]}", tuple(sorted(extra)))
    for record in records:
        if record.id not in plan.offsets:
            raise PlanError(f"plan {plan.planner!r} has no offset for tensor {record.id!r}", (record.id,))
        offset = plan.offsets[record.id]
        if not _is_int(offset) or offset < 0:
            raise PlanError(f"plan {plan.planner!r}: tensor {record.id!r} has bad offset {offset!r}", (record.id,))
        if offset % alignment:
            raise PlanError(
                f"plan {plan.planner!r}: tensor {record.id!r} offset {offset} is not aligned to {alignment}",
                (record.id,),
            )
        if offset + record.size > total:
            raise PlanError(
                f"plan {plan.planner!r}: tensor {record.id!r} ends at byte {offset + record.size}, "
                f"past the total {total}",
                (record.id,),
            )

    live_by_offset: list[tuple[int, int, str]] = []  # (offset, end, id), disjoint, sorted
    expiring: list[tuple[int, int, int, str]] = []  # heap of (last, offset, end, id)
    for record in sorted(records, key=lambda r: (r.first, r.id)):
        if record.size == 0:
            continue
        while expiring and expiring[0][0] < record.first:
            _, offset, end, rid = heapq.heappop(expiring)
            del live_by_offset[bisect.bisect_left(live_by_offset, (offset, end, rid))]
        offset = plan.offsets[record.id]
        entry = (offset, offset + record.size, record.id)
        where = bisect.bisect_left(live_by_offset, entry)
        for neighbour in live_by_offset[max(where - 1, 0) : where + 1]:
            if neighbour[0] < entry[1] and entry[0] < neighbour[1]:
                raise PlanError(
                    f"plan {plan.planner!r}: tensors {neighbour[2]!r} [{neighbour[0]}, {neighbour[1]}) and "
                    f"{record.id!r} [{entry[0]}, {entry[1]}) are alive at the same step and share bytes",
                    (neighbour[2], record.id),
                )
        live_by_offset.insert(where, entry)
        heapq.heappush(expiring, (record.last, *entry))
