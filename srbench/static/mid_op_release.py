"""Slab segments given back part-way through a served op, before it allocates what the slab does not serve.

A served op (:mod:`srbench.static.serving`) can take its scratch from the slab while its result is
left to it: the model's output, which a run hands to the caller and so must own its bytes.
Eager's allocator gives that result the bytes of the scratch the op freed just before; a slab
held whole until the op returns holds them instead, and the result comes on top
(``transformer_encoder``: its last layer's output of 128 KiB beside a slab of 1,024 KiB, where
eager's peak is 1,024). Cleanup's segments (:mod:`srbench.static.slab_schedule`) are taken and
given back only between ops, so none of them is free by then.

So the plan is made for one *cut*, the sub-step of the intra-op timeline
(:mod:`srbench.static.intra_op`) at which such a result is allocated, in two zones: every record
alive at the cut or later in the lower one, kept; the others laid out in the lower zone where it
has room at their time, else in the upper one, a segment of its own that the allocator hook
resets right before the op's allocation of that result (``sequence(..., release_at, released)``
in ``csrc/slab_serving.cpp``; it checks that every served allocation in that segment has been
freed, else the segment is given back after the op, as before). The zones are sized by their
lower bounds, the smallest lower zone first, within the lower bound of all the records (or,
where no split reaches it, the planner's total for them all), and each is then planned by the
planner asked for. The program made this way is one more candidate whose peak is measured at
prepare time beside the others (``prepare_graph``): kept only where it holds least.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srbench.memory.records import MemoryPlan, TensorUsageRecord, align_up, lower_bound, validate_plan
from srbench.planners import PlanResult, plan_memory
from srbench.static.choose import NodePlan
from srbench.static.intra_op import Timeline
from srbench.static.slab_schedule import Release, SlabLayout, segments_at

# Lower-zone sizes tried, smallest first, before giving up on a split.
MAX_SPLITS_TRIED = 16
BEST_HEURISTICS = "best"  # the planner trying every heuristic's orders, where the one asked for does not fit


@dataclass(frozen=True)
class Cut:
    """Where the upper zone is given back: right before the op of ``node`` (at step ``step``)
    makes its allocation number ``allocation``, at sub-step ``substep`` of the timeline."""

    node: str
    step: int
    allocation: int
    substep: int


@dataclass(frozen=True)
class ZonedPlan:
    """A plan whose offsets below ``low`` hold every record alive at the cut or later; the
    others lie below it too where there is room, else above it."""

    result: PlanResult
    low: int
    cut: Cut


def find_cut(steps: Sequence[str], plans: Sequence[NodePlan], timeline: Timeline) -> Cut | None:
    """The cut worth making, if any: the largest result (the latest of equal ones) that a served
    op allocates itself after some of its served scratch is freed."""
    found: list[tuple[int, int, Cut]] = []
    position = {name: step for step, name in enumerate(steps)}
    for plan in plans:
        serving = plan.serving
        if serving is None or not serving.scratch:
            continue
        step = position[plan.node.name]
        for result in serving.unserved:
            if result.nbytes and any(scratch.freed < result.allocated for scratch in serving.scratch):
                cut = Cut(plan.node.name, step, result.allocation, timeline.starts[step] + result.allocated)
                found.append((result.nbytes, step, cut))
    return max(found, key=lambda item: item[:2])[2] if found else None


def zoned_plan(records: Sequence[TensorUsageRecord], cut: Cut, planner: str) -> ZonedPlan | None:
    """``records`` (on the intra-op timeline) planned in two zones for ``cut`` (see the module
    docstring); ``None`` where nothing would be given back or no split fits."""
    start = time.perf_counter()
    records = [record for record in records if record.size]
    late = [record for record in records if record.last >= cut.substep]
    early = sorted(
        (record for record in records if record.last < cut.substep),
        key=lambda record: (-record.size, record.first, record.id),
    )
    if not early:
        return None
    targets = sorted({_bound(records), plan_memory(records, planner).plan.total_bytes})
    for target in targets:
        for low in _low_sizes(late, early, target):
            zones = _split(late, early, low, target)
            if zones is None or not zones[1]:  # nothing to give back at the cut
                continue
            lower, upper = _fit(zones[0], low, planner), _fit(zones[1], target - low, planner)
            if lower is None or upper is None:
                continue
            used = align_up(lower.total_bytes)
            offsets = {**lower.offsets, **{name: offset + used for name, offset in upper.offsets.items()}}
            total = used + upper.total_bytes
            plan = MemoryPlan(planner=f"{planner}[zoned]", offsets=offsets, total_bytes=total)
            validate_plan(records, plan)
            seconds = time.perf_counter() - start
            return ZonedPlan(PlanResult(plan, lower_bound(records), seconds, len(records)), used, cut)
    return None


def _bound(records: Sequence[TensorUsageRecord]) -> int:
    """The lower bound of ``records`` as the slab holds them (each size rounded up to the alignment)."""
    return lower_bound(dataclasses.replace(record, size=align_up(record.size)) for record in records)


def _fit(zone: Sequence[TensorUsageRecord], capacity: int, planner: str) -> MemoryPlan | None:
    """A plan of ``zone`` within ``capacity`` bytes: the planner's, else the best of the
    heuristics (``best``: the zones' records interleave in time, as a chain of layers' results
    and scratch does, where one order of placement rarely reaches the lower bound); ``None``
    where neither fits."""
    if not zone:
        return MemoryPlan(planner=planner, offsets={}, total_bytes=0)
    for name in dict.fromkeys((planner, BEST_HEURISTICS)):
        plan = plan_memory(zone, name).plan
        if plan.total_bytes <= capacity:
            return plan
    return None


def _low_sizes(late: Sequence[TensorUsageRecord], early: Sequence[TensorUsageRecord], target: int) -> list[int]:
    """Lower-zone sizes to try, smallest first: the late records' lower bound, plus one early
    record's size, or the target less one."""
    base = _bound(late)
    sizes = {align_up(record.size) for record in early}
    candidates = {base, *(base + size for size in sizes), *(target - size for size in sizes)}
    return sorted(size for size in candidates if base <= size < target)[:MAX_SPLITS_TRIED]


def _split(
    late: Sequence[TensorUsageRecord], early: Sequence[TensorUsageRecord], low: int, target: int
) -> tuple[list[TensorUsageRecord], list[TensorUsageRecord]] | None:
    """The records of each zone: the late ones low; each early one, largest first, in the upper
    zone where its live bytes stay within ``target - low``, else low where they stay within
    ``low`` (``None`` where neither does)."""
    end = max(record.last for record in (*late, *early)) + 1
    live = {False: np.zeros(end, dtype=np.int64), True: np.zeros(end, dtype=np.int64)}
    capacity = {False: low, True: target - low}
    zones: dict[bool, list[TensorUsageRecord]] = {False: [], True: []}

    def place(record: TensorUsageRecord, upper: bool) -> bool:
        span = live[upper][record.first : record.last + 1]
        if int(span.max()) + align_up(record.size) > capacity[upper]:
            return False
        span += align_up(record.size)
        zones[upper].append(record)
        return True

    if not all(place(record, False) for record in late):
        return None
    for record in early:
        if not place(record, True) and not place(record, False):
            return None
    return zones[False], zones[True]


def zoned_layout(
    steps: Sequence[str],
    records: Sequence[TensorUsageRecord],
    zoned: ZonedPlan,
    runs_code: frozenset[str] | None = None,
    lazy_release: bool = False,
) -> SlabLayout:
    """The two segments of a zoned plan: the lower one taken and given back as cleanup's are,
    the upper one given back by the allocator hook within the cut's op (and right after it,
    where the hook could not). ``records`` are on whole steps; ``runs_code``: the nodes with
    lines in the run (all of them where not given) and ``lazy_release`` as for
    :func:`slab_layout` (a segment whose pages are given back lazily stays held by torch's
    allocator: it is not given back within the op)."""
    plan = zoned.result.plan
    runs_code = frozenset(steps) if runs_code is None else runs_code
    records = [record for record in records if record.size]
    layout = segments_at(steps, records, plan.offsets, [0, zoned.low], plan.total_bytes, runs_code, lazy_release)
    segments = list(layout.segments)
    upper = segments[-1]
    if upper.start == zoned.low and upper.release_after == zoned.cut.node and upper.release is Release.RESIZE:
        segments[-1] = dataclasses.replace(upper, release_within=zoned.cut.allocation)
    return SlabLayout(tuple(segments))


@dataclass(frozen=True)
class ReleaseWithin:
    """What the generated code arms a cut's op with: the allocation before which the hook gives
    the slab's ``segment`` back, and the positions (in the order the op is armed) of the served
    allocations lying in it."""

    allocation: int
    segment: int
    released: tuple[int, ...]

    @staticmethod
    def of(zoned: ZonedPlan, layout: SlabLayout, plans: Sequence[NodePlan]) -> ReleaseWithin | None:
        """For the cut's op among ``plans`` under ``layout`` (``None`` where no segment is given
        back in it)."""
        found = [index for index, segment in enumerate(layout.segments) if segment.release_within is not None]
        if not found:
            return None
        plan = next(plan for plan in plans if plan.node.name == zoned.cut.node)
        offsets = zoned.result.plan.offsets
        released = tuple(
            position for position, (region, _) in enumerate(plan.served_regions) if offsets[region] >= zoned.low
        )
        return ReleaseWithin(zoned.cut.allocation, found[0], released)
