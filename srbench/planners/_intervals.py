"""Interval structures over lifetimes, so planners never scan every record per record.

Best-fit placement (greedy by size, greedy by breadth, squeaky wheel) asks, for every record
it places, where the already placed records alive at some step of its lifetime sit, to find
the tightest free gap among them; the exact planner needs, for every record, the records
alive at the same time. Scanning every record for that is quadratic (100,000 records took
19 s). Two structures answer it instead, both over the same coordinates:

* Steps are compressed to the sorted distinct first steps ("coordinates"): record i covers the
  coordinates ``lo[i] .. hi[i]`` (``hi``: the last coordinate not after its last step). Two
  records overlap in time exactly when their coordinate ranges overlap.
* The records overlapping record i either are alive at its first coordinate (a stabbing query
  at ``lo[i]``) or start within its range (``lo[i] <= lo[j] <= hi[i]``).
* Stabbing queries use the interval segment tree (Bentley 1977; de Berg et al., *Computational
  Geometry*, ch. 10.3): each record is stored at the O(log n) nodes that exactly cover its
  range, and the nodes on the path from the root to a coordinate's leaf hold each record alive
  there exactly once.

:class:`LifetimeIndex` is static: records sorted by start plus the stabbing tree, listing the
records that overlap one in O(log n + k). The occupancy structure (second half of this module)
is dynamic and keeps offsets instead of records: see the comment there. Everything is arrays, so
both are compiled with numba (plain Python without it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from srbench.planners._compiled import njit


class LifetimeIndex(NamedTuple):
    """The index over records ``0 .. n - 1`` (arrays as built by :func:`build_lifetime_index`)."""

    lo: np.ndarray  # first coordinate of each record
    hi: np.ndarray  # last coordinate of each record
    by_start: np.ndarray  # records sorted by lo
    start_ptr: np.ndarray  # by_start[start_ptr[c]:start_ptr[d]]: the records starting in c .. d - 1
    node_ptr: np.ndarray  # CSR over segment tree nodes (leaf of coordinate c: node half + c)
    node_idx: np.ndarray  # records stored at each node

    def overlapping(self, record: int, wanted: np.ndarray) -> np.ndarray:
        """The records ``j`` with ``wanted[j]`` whose lifetime overlaps ``record``'s, in no order."""
        out = np.empty(self.lo.shape[0], dtype=np.int64)
        count = collect_overlapping(
            self.lo, self.hi, self.by_start, self.start_ptr, self.node_ptr, self.node_idx, record, wanted, out
        )
        return out[:count]


def build_lifetime_index(first: np.ndarray, last: np.ndarray) -> LifetimeIndex:
    """Index records alive over steps ``first[i] .. last[i]`` (inclusive, int64)."""
    return LifetimeIndex(*index_arrays(first, last))


@njit(cache=True)
def coordinates(first, last):
    """Each record's first and last coordinate (index among the distinct first steps; the last
    one not after its last step), and the number of leaves of a segment tree over them."""
    starts = np.unique(first)
    lo = np.searchsorted(starts, first).astype(np.int64)
    hi = (np.searchsorted(starts, last, side="right") - 1).astype(np.int64)
    half = 1
    while half < starts.shape[0]:
        half *= 2
    return lo, hi, half


@njit(cache=True)
def index_arrays(first, last):
    """The arrays of a :class:`LifetimeIndex`, for compiled callers (at least one record)."""
    count = first.shape[0]
    lo, hi, half = coordinates(first, last)
    by_start = np.argsort(lo, kind="mergesort").astype(np.int64)
    start_ptr = np.zeros(half + 1, dtype=np.int64)
    for record in range(count):
        start_ptr[lo[record] + 1] += 1
    start_ptr = np.cumsum(start_ptr)
    # Two passes over the canonical nodes of every range: count, then fill.
    node_ptr = np.zeros(2 * half + 1, dtype=np.int64)
    for record in range(count):
        left, right = lo[record] + half, hi[record] + half + 1
        while left < right:
            if left & 1:
                node_ptr[left + 1] += 1
                left += 1
            if right & 1:
                right -= 1
                node_ptr[right + 1] += 1
            left >>= 1
            right >>= 1
    node_ptr = np.cumsum(node_ptr)
    fill = node_ptr[:-1].copy()
    node_idx = np.empty(node_ptr[-1], dtype=np.int64)
    for record in range(count):
        left, right = lo[record] + half, hi[record] + half + 1
        while left < right:
            if left & 1:
                node_idx[fill[left]] = record
                fill[left] += 1
                left += 1
            if right & 1:
                right -= 1
                node_idx[fill[right]] = record
                fill[right] += 1
            left >>= 1
            right >>= 1
    return lo, hi, by_start, start_ptr, node_ptr, node_idx


@njit(cache=True)
def collect_overlapping(lo, hi, by_start, start_ptr, node_ptr, node_idx, record, wanted, out):
    """Write the records ``j`` with ``wanted[j]`` overlapping ``record`` in time to ``out``;
    returns how many. The two parts (starting within its range, alive at its start having
    started before) are disjoint, so no record is written twice."""
    count = 0
    start, end = lo[record], hi[record]
    for position in range(start_ptr[start], start_ptr[end + 1]):
        other = by_start[position]
        if wanted[other]:
            out[count] = other
            count += 1
    half = (node_ptr.shape[0] - 1) // 2
    node = start + half
    while node >= 1:
        for position in range(node_ptr[node], node_ptr[node + 1]):
            other = node_idx[position]
            if wanted[other] and lo[other] < start:
                out[count] = other
                count += 1
        node >>= 1
    return count


def overlap_degrees(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """How many other records each record overlaps in time, without listing them (O(n log n)):
    the records starting by its last step, less those that ended before its first step (a
    subset of them), less itself. Tells the size of :func:`overlap_lists` before building it."""
    starts, ends = np.sort(first), np.sort(last)
    return np.searchsorted(starts, last, side="right") - np.searchsorted(ends, first, side="left") - 1


@njit(cache=True)
def overlap_lists(first, last):
    """For each record, the other records overlapping it in time, ascending, as CSR arrays
    ``(ptr, idx)``: ``idx[ptr[i]:ptr[i + 1]]`` for record i. O(n log n + k) for k entries."""
    count = first.shape[0]
    ptr = np.zeros(count + 1, dtype=np.int64)
    if count == 0:
        return ptr, np.zeros(0, dtype=np.int64)
    lo, hi, by_start, start_ptr, node_ptr, node_idx = index_arrays(first, last)
    everyone = np.ones(count, dtype=np.bool_)
    found = np.empty(count, dtype=np.int64)
    for record in range(count):
        ptr[record + 1] = (
            ptr[record]
            + collect_overlapping(lo, hi, by_start, start_ptr, node_ptr, node_idx, record, everyone, found)
            - 1
        )
    idx = np.empty(ptr[count], dtype=np.int64)
    for record in range(count):
        k = collect_overlapping(lo, hi, by_start, start_ptr, node_ptr, node_idx, record, everyone, found)
        row = np.sort(found[:k])
        at = ptr[record]
        for other in row:
            if other != record:
                idx[at] = other
                at += 1
    return ptr, idx


# --- offsets taken over a span of steps ---------------------------------------------------------
#
# Best fit needs more than the overlapping records: the free gaps among their offsets. The
# occupancy structure keeps, for the placed records, the union of the offsets they take, as
# sorted, disjoint, coalesced interval sets at the nodes of two segment trees over the
# coordinates: the stabbing tree (a record at the nodes that exactly cover its lifetime) and the
# start tree (a record at its first coordinate's leaf and every ancestor). The offsets taken at
# some step of a lifetime are the union of the sets on the stabbing path of its first coordinate
# and of the start tree's nodes covering its lifetime. Coalescing keeps the sets short where the
# placement is dense (a node over many steps of a tight packing holds a few pieces), so a query
# reads the pieces of about 3 log n sets instead of every overlapping record.
#
# The sets live in one pool (``pool[0]`` starts, ``pool[1]`` ends); set ``which`` occupies
# ``base[which] .. base[which] + count[which]`` within ``capacity[which]`` slots, and moves to
# the pool's end with twice the room when it outgrows them. Set ``node`` (1 .. 2 half - 1) is a
# stabbing tree node, set ``2 half + node`` a start tree node.


@njit(cache=True)
def _insert(base, count, capacity, pool, used, which, start, end):
    """Add ``[start, end)`` to set ``which``; False (and nothing changed) when the pool has no
    room left to move the set into."""
    first = base[which]
    size = count[which]
    # The pieces overlapping or touching [start, end) are one run: low .. high - 1.
    low, high = 0, size
    while low < high:  # the first piece ending at or after start
        middle = (low + high) // 2
        if pool[1, first + middle] < start:
            low = middle + 1
        else:
            high = middle
    high = low
    while high < size and pool[0, first + high] <= end:
        high += 1
    grown = size - (high - low) + 1
    if grown > capacity[which]:
        room = max(4, 2 * capacity[which])
        if used[0] + room > pool.shape[1]:
            return False
        pool[:, used[0] : used[0] + size] = pool[:, first : first + size]
        first = used[0]
        base[which] = first
        capacity[which] = room
        used[0] += room
    if high > low:
        start = min(start, pool[0, first + low])
        end = max(end, pool[1, first + high - 1])
    shift = 1 - (high - low)  # the pieces after the run move by this much
    if shift > 0:
        for position in range(first + size - 1, first + high - 1, -1):
            pool[0, position + shift] = pool[0, position]
            pool[1, position + shift] = pool[1, position]
    elif shift < 0:
        for position in range(first + high, first + size):
            pool[0, position + shift] = pool[0, position]
            pool[1, position + shift] = pool[1, position]
    pool[0, first + low] = start
    pool[1, first + low] = end
    count[which] = grown
    return True


@njit(cache=True)
def occupy(lo, hi, half, base, count, capacity, pool, used, record, start, end):
    """Record that ``record`` takes ``[start, end)`` over its lifetime. False when the pool ran
    out of room: grow it and call again (adding an interval twice changes nothing)."""
    left, right = lo[record] + half, hi[record] + half + 1
    while left < right:
        if left & 1:
            if not _insert(base, count, capacity, pool, used, left, start, end):
                return False
            left += 1
        if right & 1:
            right -= 1
            if not _insert(base, count, capacity, pool, used, right, start, end):
                return False
        left >>= 1
        right >>= 1
    node = lo[record] + half
    while node >= 1:
        if not _insert(base, count, capacity, pool, used, 2 * half + node, start, end):
            return False
        node >>= 1
    return True


@njit(cache=True)
def _gather(base, count, pool, which, starts, ends, taken, runs, run_count):
    """Append set ``which``'s pieces, a sorted run, to ``starts`` and ``ends``."""
    size = count[which]
    if size == 0:
        return taken, run_count
    first = base[which]
    for position in range(size):
        starts[taken + position] = pool[0, first + position]
        ends[taken + position] = pool[1, first + position]
    runs[run_count + 1] = taken + size
    return taken + size, run_count + 1


@njit(cache=True)
def taken_offsets(lo, hi, half, base, count, pool, record, starts, ends, runs):
    """Write the pieces of offsets taken at some step of ``record``'s lifetime to ``starts`` and
    ``ends`` (possibly overlapping; room for two per placed record), as sorted runs whose
    bounds go to ``runs`` (room for 4 log n + 2); returns how many pieces and runs."""
    taken = 0
    run_count = 0
    runs[0] = 0
    node = lo[record] + half
    while node >= 1:
        taken, run_count = _gather(base, count, pool, node, starts, ends, taken, runs, run_count)
        node >>= 1
    left, right = lo[record] + half, hi[record] + half + 1
    while left < right:
        if left & 1:
            taken, run_count = _gather(base, count, pool, 2 * half + left, starts, ends, taken, runs, run_count)
            left += 1
        if right & 1:
            right -= 1
            taken, run_count = _gather(base, count, pool, 2 * half + right, starts, ends, taken, runs, run_count)
        left >>= 1
        right >>= 1
    return taken, run_count


@njit(cache=True)
def _merge_runs(starts, ends, spare, runs, run_count):
    """Sort the pieces ``starts[i], ends[i]`` (i < ``runs[run_count]``), made of runs sorted by
    start with bounds ``runs``, by start: runs are merged pairwise, O(m log r) for m pieces in r
    runs. ``spare`` is scratch with two rows of the same length."""
    source_starts, source_ends = starts, ends
    target_starts, target_ends = spare[0], spare[1]
    width = 1
    while width < run_count:
        for left in range(0, run_count, 2 * width):
            low = runs[left]
            middle = runs[min(left + width, run_count)]
            high = runs[min(left + 2 * width, run_count)]
            i, j = low, middle
            for k in range(low, high):
                if j >= high or (i < middle and source_starts[i] <= source_starts[j]):
                    target_starts[k] = source_starts[i]
                    target_ends[k] = source_ends[i]
                    i += 1
                else:
                    target_starts[k] = source_starts[j]
                    target_ends[k] = source_ends[j]
                    j += 1
        source_starts, target_starts = target_starts, source_starts
        source_ends, target_ends = target_ends, source_ends
        width *= 2
    return source_starts, source_ends


@njit(cache=True)
def tightest_gap(starts, ends, spare, runs, run_count, size):
    """Best fit among the pieces in ``starts`` and ``ends`` (runs sorted by start, bounds
    ``runs``): the lowest offset of the smallest free gap of at least ``size`` bytes below the
    highest end, or that end when none fits. ``spare``: scratch, two rows as long."""
    by_start, their_ends = _merge_runs(starts, ends, spare, runs, run_count)
    best_gap = -1
    best_offset = -1
    reach = 0  # the highest end so far, in start order
    for index in range(runs[run_count]):
        gap = by_start[index] - reach
        if gap >= size and (best_gap < 0 or gap < best_gap):
            best_gap = gap
            best_offset = reach
        reach = max(reach, their_ends[index])
    return reach if best_offset < 0 else best_offset
