"""Pieces every heuristic planner shares: record arrays, tie-break orders, best-fit placement, plans.

Conventions all srbench heuristics follow, so their totals compare fairly:

* A tensor occupies its size rounded up to the alignment (its footprint); since every
  footprint is a multiple of the alignment, offsets built from sums of footprints are aligned.
* Zero-size tensors need no bytes: they get offset 0 and are never placed.
* The slab total is the end of the furthest tensor (``max(offset + size)``), the smallest total
  the validator accepts for those offsets.
* Ties are broken by a documented key that ends with the record id, so the plan depends on the
  records, never on the order they were given in.

Planners work on :class:`RecordTable`, the records with their fields as numpy arrays. It is a
sequence of records itself, so ``best`` builds one table and hands it to every candidate: a
third-party planner sees plain records, the built-in ones reuse the arrays instead of
rebuilding them (at 100,000 records, building costs about as much as a placement).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import overload

import numpy as np

from srbench.memory.records import MAX_SLAB_BYTES, MemoryPlan, TensorUsageRecord, align_up, check_total
from srbench.planners._compiled import njit
from srbench.planners._intervals import coordinates, occupy, taken_offsets, tightest_gap


class RecordTable(Sequence[TensorUsageRecord]):
    """Records, and their fields as int64 arrays (built on first use, then kept).

    Steps only matter by their order to the heuristics, so steps beyond int64 (record files may
    number them with any integers) are replaced by their rank among the distinct steps.
    Footprints are checked to sum within an int64 slab (:func:`check_total`): past that, no
    int64 arithmetic here could be trusted, and the records are refused.
    """

    def __init__(self, records: Iterable[TensorUsageRecord]):
        self._records = tuple(records)
        self._footprints: dict[int, np.ndarray] = {}
        self.placements: dict[tuple[int, bytes], np.ndarray] = {}  # see best_fit

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[TensorUsageRecord]:
        return iter(self._records)

    @overload
    def __getitem__(self, index: int) -> TensorUsageRecord: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TensorUsageRecord]: ...

    def __getitem__(self, index: int | slice) -> TensorUsageRecord | Sequence[TensorUsageRecord]:
        return self._records[index]

    @cached_property
    def ids(self) -> list[str]:
        return [record.id for record in self._records]

    @cached_property
    def _steps(self) -> tuple[np.ndarray, np.ndarray]:
        firsts = [record.first for record in self._records]
        lasts = [record.last for record in self._records]
        try:
            return np.array(firsts, dtype=np.int64), np.array(lasts, dtype=np.int64)
        except OverflowError:
            rank = {step: index for index, step in enumerate(sorted(set(firsts) | set(lasts)))}
            return (
                np.array([rank[step] for step in firsts], dtype=np.int64),
                np.array([rank[step] for step in lasts], dtype=np.int64),
            )

    @property
    def first(self) -> np.ndarray:
        return self._steps[0]

    @property
    def last(self) -> np.ndarray:
        return self._steps[1]

    @cached_property
    def size(self) -> np.ndarray:
        try:
            return np.array([record.size for record in self._records], dtype=np.int64)
        except OverflowError:
            check_total(self._records, 1)  # a size beyond int64 is beyond the largest slab: raises
            raise

    @cached_property
    def id_rank(self) -> np.ndarray:
        """Each record's position among the records sorted by id: the last key of every tie-break."""
        order = sorted(range(len(self._records)), key=self.ids.__getitem__)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order), dtype=np.int64)
        return rank

    def footprint(self, alignment: int) -> np.ndarray:
        """Each record's size rounded up to ``alignment``; raises RecordError (naming the largest
        sizes) when they sum past the largest slab."""
        if alignment not in self._footprints:
            if alignment <= 0:
                raise ValueError(f"alignment must be positive, got {alignment}")
            if len(self) and (alignment > 2**32 or int(self.size.max()) > 2**62):  # int64 rounding could wrap
                rounded = [align_up(record.size, alignment) for record in self._records]
            else:
                rounded = (-(-self.size // alignment) * alignment).tolist()
            if sum(rounded) > MAX_SLAB_BYTES:
                check_total(self._records, alignment)  # raises
            self._footprints[alignment] = np.array(rounded, dtype=np.int64)
        return self._footprints[alignment]


def as_table(records: Sequence[TensorUsageRecord]) -> RecordTable:
    """``records`` as a table, reusing it when it already is one."""
    return records if isinstance(records, RecordTable) else RecordTable(records)


TieBreak = Callable[[RecordTable], list[np.ndarray]]

# How records of equal size are ordered by the greedy planners, as sort keys over the table
# (most significant first). The ARCHITECTURE notes measured MobileNetV2 and ResNet-50 flipping
# between 1.000x and 1.33-1.49x the lower bound on this choice, so it is a named, documented
# option rather than an accident of sorting.
TIE_BREAKS: dict[str, TieBreak] = {
    # Equal sizes in order of first use (then last use): the order the graph produces them.
    "earliest_first": lambda t: [t.first, t.last, t.id_rank],
    # Equal sizes latest first use first: fills the end of the graph before the start.
    "latest_first": lambda t: [-t.first, -t.last, t.id_rank],
    # Equal sizes longest lifetime first: the hardest to fit go in while the slab is empty.
    "longest_first": lambda t: [t.first - t.last, t.first, t.id_rank],
}
DEFAULT_TIE_BREAK = "earliest_first"


def tie_break_keys(name: str, table: RecordTable) -> list[np.ndarray]:
    """The sort keys of the tie-break called ``name``; a clear error lists the known ones."""
    if name not in TIE_BREAKS:
        raise ValueError(f"unknown tie_break {name!r}; expected one of {', '.join(TIE_BREAKS)}")
    return TIE_BREAKS[name](table)


def sort_order(keys: Sequence[np.ndarray]) -> np.ndarray:
    """Record indices sorted by ``keys``, most significant first (a stable lexicographic sort)."""
    return np.lexsort(tuple(reversed(keys)))


def range_min(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``min(values[lo[i]:hi[i] + 1])`` for every i, via a sparse table (O(n log n))."""
    table = [values]
    width = 1
    while 2 * width <= len(values):
        previous = table[-1]
        table.append(np.minimum(previous[:-width], previous[width:]))
        width *= 2
    level = np.floor(np.log2(hi - lo + 1)).astype(np.int64)
    result = np.empty(len(lo), dtype=values.dtype)
    for k in set(level.tolist()):
        pick = level == k
        row = table[k]
        result[pick] = np.minimum(row[lo[pick]], row[hi[pick] - (1 << int(k)) + 1])
    return result


# Steps :func:`aligned_peak` checks with their own largest rounding (each a pass over the records).
ALIGNED_PEAK_STEPS = 64


def live_at_starts(table: RecordTable, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps where some record starts, and the bytes alive at each when record i takes
    ``sizes[i]`` bytes: every step's live set is within the one at the last start before it."""
    starts = np.unique(table.first)
    delta = np.zeros(starts.shape[0] + 1, dtype=np.int64)
    np.add.at(delta, np.searchsorted(starts, table.first), sizes)
    np.add.at(delta, np.searchsorted(starts, table.last, side="right"), -sizes)
    return starts, np.cumsum(delta)[:-1]


def live_peak(table: RecordTable, sizes: np.ndarray) -> int:
    """The most bytes alive at one step when record i takes ``sizes[i]`` bytes (the lower bound
    of :func:`srbench.memory.records.lower_bound`, over arrays)."""
    if not len(table):
        return 0
    return int(live_at_starts(table, sizes)[1].max())


def aligned_peak(table: RecordTable, alignment: int) -> int:
    """A lower bound on any plan at ``alignment``, at least :func:`live_peak`'s: the tensors alive
    at one step lie one above another at aligned offsets, so each but the topmost takes its
    size rounded up to the alignment, and the topmost saves at most the largest rounding among
    them. Where sizes are not multiples of the alignment, the bytes alive cannot be reached, and
    a search starting from them has every capacity up to this one to exhaust before it can prove
    anything (30 tensors of 100-303 bytes at alignment 48: no proof in 20 s from 4,920 bytes
    alive; the optimum, 5,473, is this bound).

    The bound only shrinks as tensors leave a live set, so the steps where one starts are the
    ones to check; taking the largest rounding of all at each gives a bound at once, and the
    :data:`ALIGNED_PEAK_STEPS` steps with the most rounded bytes alive, those that may beat it,
    are checked with their own largest rounding (up to a few bytes more on random sizes at
    alignment 64, which proved 3 of 10 optima otherwise out of reach in 5 s)."""
    if not len(table):
        return 0
    footprints = table.footprint(alignment)
    rounding = footprints - table.size
    best = live_peak(table, table.size)
    if not rounding.any():
        return best
    starts, alive_bytes = live_at_starts(table, footprints)
    best = max(best, int(alive_bytes.max() - rounding.max()))
    for index in np.argsort(-alive_bytes, kind="stable")[:ALIGNED_PEAK_STEPS]:
        if alive_bytes[index] <= best:
            break
        alive = (table.first <= starts[index]) & (table.last >= starts[index])
        best = max(best, int(alive_bytes[index] - rounding[alive].max()))
    return best


def best_fit(table: RecordTable, order: np.ndarray, alignment: int) -> np.ndarray:
    """Offsets of every record when those in ``order`` are placed one by one, each in the
    tightest gap that fits it (Pisarchyk & Lee); zero-size records stay at 0.

    For each record, the already-placed records whose lifetimes overlap it are taken in offset
    order; a gap is the space between the furthest end seen so far and the next placed offset.
    The record goes into the smallest gap that holds it (the lowest such gap on a tie), or
    after the furthest-ending overlapping record when none does. The offsets taken come from
    the occupancy structure of :mod:`srbench.planners._intervals`, so a placement reads the
    pieces of about 3 log n interval sets instead of every placed record.

    The table remembers each placement by its order: ``best`` runs the same order more than once
    (squeaky wheel's first round is greedy by size's default plan; tie-breaks that reorder
    nothing give equal orders), and a remembered placement is not computed again.
    """
    footprints = table.footprint(alignment)
    order = np.asarray(order, dtype=np.int64)
    order = order[table.size[order] > 0]
    key = (alignment, order.tobytes())
    if key not in table.placements:
        offsets = np.zeros(len(table), dtype=np.int64)
        if order.shape[0]:
            offsets[order] = _best_fit(table.first[order], table.last[order], footprints[order])
        table.placements[key] = offsets
    return table.placements[key].copy()


@njit(cache=True)
def _best_fit(first, last, footprint):
    """Best-fit offsets of records given in placement order (all sizes positive)."""
    count = first.shape[0]
    lo, hi, half = coordinates(first, last)
    base = np.zeros(4 * half, dtype=np.int64)
    taken = np.zeros(4 * half, dtype=np.int64)
    capacity = np.zeros(4 * half, dtype=np.int64)
    pool = np.empty((2, 16 * count + 64), dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    starts = np.empty(2 * count, dtype=np.int64)
    ends = np.empty(2 * count, dtype=np.int64)
    spare = np.empty((2, 2 * count), dtype=np.int64)
    runs = np.empty(4 * 64 + 2, dtype=np.int64)
    offset = np.zeros(count, dtype=np.int64)
    for record in range(count):
        _, run_count = taken_offsets(lo, hi, half, base, taken, pool, record, starts, ends, runs)
        offset[record] = tightest_gap(starts, ends, spare, runs, run_count, footprint[record])
        end = offset[record] + footprint[record]
        while not occupy(lo, hi, half, base, taken, capacity, pool, used, record, offset[record], end):
            bigger = np.empty((2, 2 * pool.shape[1]), dtype=np.int64)
            bigger[:, : used[0]] = pool[:, : used[0]]
            pool = bigger
    return offset


def place_best_fit(ordered: Sequence[TensorUsageRecord], alignment: int) -> dict[str, int]:
    """Best-fit offsets of the non-empty records, placed in the given order."""
    table = as_table(ordered)
    offsets = best_fit(table, np.arange(len(table)), alignment)
    return {name: offset for name, offset, size in zip(table.ids, offsets.tolist(), table.size.tolist()) if size}


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


def plan_from_offsets(planner: str, table: RecordTable, offsets: np.ndarray, **notes: object) -> MemoryPlan:
    """A plan from an offset per record of ``table`` (zero-size records at 0)."""
    total = int((offsets + table.size).max()) if len(table) and table.size.any() else 0
    return MemoryPlan(planner=planner, offsets=dict(zip(table.ids, offsets.tolist())), total_bytes=total, notes=notes)
