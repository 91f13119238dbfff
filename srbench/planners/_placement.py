"""Pieces every heuristic planner shares: sizes, tie-break orders, the best-fit gap search, plans.

Conventions all srbench heuristics follow, so their totals compare fairly:

* A tensor occupies its size rounded up to the alignment (:func:`footprint`); since every
  footprint is a multiple of the alignment, offsets built from sums of footprints are aligned.
* Zero-size tensors need no bytes: they get offset 0 and are never placed.
* The slab total is the end of the furthest tensor (``max(offset + size)``), the smallest total
  the validator accepts for those offsets.
* Ties are broken by a documented key that ends with the record id, so the plan depends on the
  records, never on the order they were given in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from srbench.memory.records import MAX_SLAB_BYTES, MemoryPlan, TensorUsageRecord, align_up

SortKey = Callable[[TensorUsageRecord], tuple]

# How records of equal size are ordered by the greedy planners. The ARCHITECTURE notes measured
# MobileNetV2 and ResNet-50 flipping between 1.0x and ~1.4x the lower bound on this choice alone,
# so it is a named, documented option rather than an accident of sorting.
TIE_BREAKS: dict[str, SortKey] = {
    # Equal sizes in order of first use (then last use): the order the graph produces them.
    "earliest_first": lambda r: (r.first, r.last, r.id),
    # Equal sizes latest first use first: fills the end of the graph before the start.
    "latest_first": lambda r: (-r.first, -r.last, r.id),
    # Equal sizes longest lifetime first: the hardest to fit go in while the slab is empty.
    "longest_first": lambda r: (r.first - r.last, r.first, r.id),
}
DEFAULT_TIE_BREAK = "earliest_first"


def tie_break_key(name: str) -> SortKey:
    """The tie-break key called ``name``; a clear error lists the known ones."""
    if name not in TIE_BREAKS:
        raise ValueError(f"unknown tie_break {name!r}; expected one of {', '.join(TIE_BREAKS)}")
    return TIE_BREAKS[name]


def footprint(record: TensorUsageRecord, alignment: int) -> int:
    """Bytes a tensor occupies in the slab: its size rounded up to the alignment."""
    return align_up(record.size, alignment)


def slab_total(records: Iterable[TensorUsageRecord], offsets: Mapping[str, int]) -> int:
    """The smallest slab holding every tensor at its offset."""
    return max((offsets[r.id] + r.size for r in records if r.size), default=0)


def make_plan(
    planner: str,
    records: Sequence[TensorUsageRecord],
    offsets: Mapping[str, int],
    **notes: object,
) -> MemoryPlan:
    """A plan with zero-size tensors at offset 0 and the total that the offsets need."""
    full = {r.id: offsets.get(r.id, 0) for r in records}
    return MemoryPlan(planner=planner, offsets=full, total_bytes=slab_total(records, full), notes=notes)


def place_best_fit(ordered: Sequence[TensorUsageRecord], alignment: int) -> dict[str, int]:
    """Place records in the given order, each in the tightest gap that fits it (Pisarchyk & Lee).

    For each record, the already-placed records whose lifetimes overlap it are walked in offset
    order; a gap is the space between the furthest end seen so far and the next placed offset.
    The record goes into the smallest gap that holds it (the lowest such gap on a tie), or after
    the furthest-ending overlapping record when none does.

    Placed records sit in numpy arrays in placement order, so finding the ones that overlap in
    time is one vectorised mask per record, and only those few are sorted by offset (stable, so
    equal offsets keep placement order): 10,000 records plan in a fraction of a second, where a
    Python scan over every placed pair would take tens of seconds.
    """
    candidates = [r for r in ordered if r.size]
    sizes = [footprint(r, alignment) for r in candidates]
    # int64 cannot overflow while every end stays below the sum of all footprints; beyond that
    # (only hand-made records get there) Python integers in object arrays keep the sums exact.
    dtype = np.int64 if sum(sizes) <= MAX_SLAB_BYTES else object
    first = np.array([r.first for r in candidates], dtype=np.int64)
    last = np.array([r.last for r in candidates], dtype=np.int64)
    starts = np.zeros(len(candidates), dtype=dtype)
    ends = np.zeros(len(candidates), dtype=dtype)
    offsets: dict[str, int] = {}
    for placed, (record, size) in enumerate(zip(candidates, sizes)):
        overlapping = ((first[:placed] <= record.last) & (last[:placed] >= record.first)).nonzero()[0]
        if overlapping.size:
            by_offset = overlapping[np.argsort(starts[overlapping], kind="stable")]
            offset = _best_gap(starts[by_offset], ends[by_offset], size)
        else:
            offset = 0
        starts[placed] = offset
        ends[placed] = offset + size
        offsets[record.id] = offset
    return offsets


def _best_gap(starts: np.ndarray, ends: np.ndarray, size: int) -> int:
    """Lowest offset of the smallest gap of at least ``size`` bytes among (non-empty) intervals
    sorted by start, or the end of the furthest interval when no gap is big enough."""
    reach = np.maximum.accumulate(ends)
    gap_starts = np.empty_like(starts)
    gap_starts[0] = 0
    gap_starts[1:] = reach[:-1]
    gaps = starts - gap_starts
    fitting = (gaps >= size).nonzero()[0]
    if fitting.size == 0:
        return int(reach[-1])
    return int(gap_starts[fitting[np.argmin(gaps[fitting])]])
