"""The compiled core of the exact planner: a resumable depth-first search in MiniMalloc's manner.

The question answered here is the decision version of memory planning: can these buffers be
placed within ``capacity`` bytes? The search follows the ideas published with MiniMalloc
(Moffitt, ASPLOS 2024, google/minimalloc); this is an independent implementation over numpy
arrays so that numba can compile it:

* **Canonical solutions.** Buffers are placed in non-decreasing order of offset, each at the
  lowest offset its already placed, time-overlapping neighbours leave free (its *minimum
  offset*). Every packing can be brought into this form, so nothing is lost by searching only it.
* **Dynamic ordering.** At each node the candidates are the unplaced buffers ordered by
  (minimum offset, static rank); a candidate must come after the buffer placed by its parent in
  that order, which rules out the permutations that reach the same packing.
* **Dominance.** A candidate at or above the top of another unplaced buffer (placed at its
  minimum offset) would leave a gap that buffer could fill: it is skipped, and so is every later
  candidate, since the order is by offset.
* **Cross-section inference.** Time is cut into sections between lifetime events. In each
  section, the unplaced buffers alive there are stacked above the section's floor (the top of
  the placed buffers there, at least the lowest minimum offset of the unplaced ones, at least the
  offset just placed), so floor + their total size must fit the capacity, or the node is pruned.
* **Dynamic decomposition.** When no unplaced buffer crosses a section boundary any more, the
  buffers on either side no longer interact: each piece is solved on its own (with a fresh
  canonical order), and when one piece has no packing the search backs up past the whole split
  instead of retrying the other pieces' alternatives, which cannot help.

The search is iterative with explicit undo trails, and all of its state lives in
:class:`SearchState`'s arrays: :meth:`SearchState.run` stops after a budget of steps and resumes
exactly where it left off. The driver (``srbench.planners.exact``) uses that to interleave
searches at several capacities and static orders under one wall-clock time limit.

Without numba (an optional extra) the same functions run as plain Python: correct, much slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - exercised only where the optional extra is missing

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda function: function


FOUND = 1
EXHAUSTED = 2
BUDGET_SPENT = 3
TRAIL_FULL = 4

_ENTER, _ADVANCE = 0, 1
_NO_KEY = -1
_INFINITY = np.iinfo(np.int64).max // 4

# Static orders tried round-robin, as MiniMalloc does: each letter is a descending sort key.
# W: lifetime width, A: area (width x size), T: the largest section total the buffer is part of.
PREORDERINGS = ("WAT", "TAW", "TWA")


@dataclass(frozen=True)
class Partition:
    """Buffers whose lifetimes chain together; buffers of different partitions never overlap in
    time, so each partition is searched on its own. Arrays are indexed by local buffer index."""

    buffer_ids: tuple[int, ...]  # indices into the caller's buffer list
    size: np.ndarray  # bytes
    width: np.ndarray  # lifetime length in steps
    section_lo: np.ndarray  # first section the buffer is alive in
    section_hi: np.ndarray  # one past the last
    neighbour_ptr: np.ndarray  # CSR of buffers overlapping in time
    neighbour_idx: np.ndarray
    member_ptr: np.ndarray  # CSR of buffers alive in each section
    member_idx: np.ndarray
    section_total: np.ndarray  # bytes alive in each section
    by_start: np.ndarray  # buffers sorted by first section, so a section range is one slice
    start_ptr: np.ndarray  # by_start[start_ptr[s]:start_ptr[t]] start in sections [s, t)

    @property
    def num_sections(self) -> int:
        return int(self.section_total.shape[0])

    @property
    def lower_bound(self) -> int:
        return int(self.section_total.max()) if self.section_total.size else 0

    @cached_property
    def largest_total(self) -> np.ndarray:
        """The largest section total each buffer is part of."""
        return np.array(
            [self.section_total[lo:hi].max() for lo, hi in zip(self.section_lo, self.section_hi)], dtype=np.int64
        )

    def preorder_rank(self, heuristic: str) -> np.ndarray:
        """Rank of each buffer in the static order named by ``heuristic`` (ties by index)."""
        columns = {"W": self.width, "A": self.width * self.size, "T": self.largest_total}
        keys = [np.arange(self.size.shape[0])] + [-columns[letter] for letter in reversed(heuristic)]
        order = np.lexsort(keys)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        return rank.astype(np.int64)


def partitions(firsts: Sequence[int], lasts: Sequence[int], sizes: Sequence[int]) -> list[Partition]:
    """Split buffers (inclusive lifetimes) into time-connected partitions with their sections."""
    order = sorted(range(len(sizes)), key=lambda i: (firsts[i], lasts[i]))
    groups: list[list[int]] = []
    reach = None
    for index in order:
        if reach is None or firsts[index] > reach:
            groups.append([])
            reach = lasts[index]
        groups[-1].append(index)
        reach = max(reach, lasts[index])
    return [_partition(group, firsts, lasts, sizes) for group in groups]


def _partition(group: list[int], firsts: Sequence[int], lasts: Sequence[int], sizes: Sequence[int]) -> Partition:
    first = np.array([firsts[i] for i in group], dtype=np.int64)
    end = np.array([lasts[i] + 1 for i in group], dtype=np.int64)
    size = np.array([sizes[i] for i in group], dtype=np.int64)
    points = np.unique(np.concatenate([first, end]))
    section_lo = np.searchsorted(points, first).astype(np.int64)
    section_hi = np.searchsorted(points, end).astype(np.int64)
    num_sections = max(points.shape[0] - 1, 0)
    coverage = np.zeros(num_sections + 1, dtype=np.int64)
    np.add.at(coverage, section_lo, size)
    np.add.at(coverage, section_hi, -size)
    section_total = np.cumsum(coverage)[:num_sections]
    spans = section_hi - section_lo
    owner = np.repeat(np.arange(size.shape[0], dtype=np.int64), spans)
    section_of = np.arange(owner.shape[0], dtype=np.int64) - np.repeat(np.cumsum(spans) - spans - section_lo, spans)
    by_section = np.argsort(section_of, kind="stable")
    member_idx = owner[by_section]
    member_ptr = np.zeros(num_sections + 1, dtype=np.int64)
    member_ptr[1:] = np.cumsum(np.bincount(section_of, minlength=num_sections))
    neighbour_rows = [
        np.flatnonzero((first < end[local]) & (end > first[local]) & (np.arange(size.shape[0]) != local))
        for local in range(size.shape[0])
    ]
    neighbour_ptr = np.zeros(size.shape[0] + 1, dtype=np.int64)
    neighbour_ptr[1:] = np.cumsum([row.shape[0] for row in neighbour_rows])
    neighbour_idx = np.concatenate(neighbour_rows).astype(np.int64) if neighbour_rows else np.zeros(0, np.int64)
    return Partition(
        buffer_ids=tuple(group),
        size=size,
        width=end - first,
        section_lo=section_lo,
        section_hi=section_hi,
        neighbour_ptr=neighbour_ptr,
        neighbour_idx=neighbour_idx,
        member_ptr=member_ptr,
        member_idx=member_idx,
        section_total=section_total,
        by_start=np.argsort(section_lo, kind="stable").astype(np.int64),
        start_ptr=np.searchsorted(np.sort(section_lo), np.arange(num_sections + 1)).astype(np.int64),
    )


class SearchState:
    """One resumable search: a partition, a capacity, a static order, and where the search is."""

    def __init__(self, partition: Partition, capacity: int, heuristic: str, alignment: int):
        count, num_sections = partition.size.shape[0], partition.num_sections
        self.partition = partition
        self.capacity = capacity
        self.heuristic = heuristic
        self.alignment = alignment
        self.rank = partition.preorder_rank(heuristic)
        self.offset = np.full(count, -1, dtype=np.int64)
        self.min_offset = np.zeros(count, dtype=np.int64)
        self.floor = np.zeros(num_sections, dtype=np.int64)
        # Bytes of unplaced buffers per section, as the leaves of a max segment tree (leaf s at
        # half + s), so the largest total of a section range is a logarithmic query.
        half = 1 << max(num_sections - 1, 1).bit_length()
        self.total = np.zeros(2 * half, dtype=np.int64)
        self.total[half : half + num_sections] = partition.section_total
        level = half
        while level > 1:
            self.total[level // 2 : level] = np.maximum(
                self.total[level : 2 * level : 2], self.total[level + 1 : 2 * level : 2]
            )
            level //= 2
        # cuts[s]: unplaced buffers alive in both section s and s + 1; zero splits the problem.
        crossings = np.zeros(num_sections + 1, dtype=np.int64)
        np.add.at(crossings, partition.section_lo, 1)
        np.add.at(crossings, partition.section_hi - 1, -1)
        self.cuts = np.cumsum(crossings)[:num_sections]
        self.scratch = np.zeros(num_sections, dtype=np.int64)
        self.mark = np.zeros(num_sections, dtype=np.int64)
        self.level = np.zeros((_LEVEL_ROWS, count + 1), dtype=np.int64)
        self.frame = np.zeros((_FRAME_ROWS, count + 1), dtype=np.int64)
        # Pieces of the open splits nest (a laminar family over the sections): at most 2S of them.
        self.piece = np.zeros((2, 2 * num_sections + 2), dtype=np.int64)
        # Each placement raises each neighbour's minimum offset at most once: this bound is exact.
        self.offset_trail = np.zeros((2, max(partition.neighbour_idx.shape[0], 1)), dtype=np.int64)
        self.section_trail = np.zeros(
            (2, max(4 * int((partition.section_hi - partition.section_lo).sum()), 64)), np.int64
        )
        self.ctl = np.zeros(_CTL_SLOTS, dtype=np.int64)
        self.status = EXHAUSTED if partition.lower_bound > capacity else 0

    @property
    def steps(self) -> int:
        """Work done so far: nodes entered plus placements tried."""
        return int(self.ctl[_WORK])

    @property
    def done(self) -> bool:
        return self.status in (FOUND, EXHAUSTED)

    def run(self, budget: int) -> int:
        """Search for about ``budget`` more units of work; FOUND, EXHAUSTED or BUDGET_SPENT."""
        if self.done:
            return self.status
        while True:
            status = _search(
                self.partition.size,
                self.partition.section_lo,
                self.partition.section_hi,
                self.partition.neighbour_ptr,
                self.partition.neighbour_idx,
                self.partition.member_ptr,
                self.partition.member_idx,
                self.partition.by_start,
                self.partition.start_ptr,
                self.rank,
                self.capacity,
                self.alignment,
                self.offset,
                self.min_offset,
                self.floor,
                self.total,
                self.cuts,
                self.scratch,
                self.mark,
                self.level,
                self.frame,
                self.piece,
                self.offset_trail,
                self.section_trail,
                self.ctl,
                budget,
            )
            if status != TRAIL_FULL:
                self.status = status
                return status
            self.section_trail = np.concatenate([self.section_trail, np.zeros_like(self.section_trail)], axis=1)

    def offsets(self) -> np.ndarray:
        """The packing found (local buffer order); only meaningful once FOUND."""
        return self.offset.copy()


# Rows of SearchState.level (one column per depth).
_BUFFER, _KEY_OFFSET, _KEY_RANK, _MIN_HEIGHT, _OFFSET_MARK, _SECTION_MARK = range(6)
_LEVEL_ROWS = 6
# Rows of SearchState.frame (one column per open split): the depth it opened at, its pieces
# (first index into SearchState.piece and how many), the piece being solved and its first depth.
_BASE, _FIRST_PIECE, _PIECES, _CURRENT, _PIECE_START = range(5)
_FRAME_ROWS = 5
# Slots of SearchState.ctl.
_DEPTH, _PHASE, _OFFSET_TOP, _SECTION_TOP, _WORK, _STAMP, _FRAMES = range(7)
_CTL_SLOTS = 7


@njit(cache=True)
def _align_up(value, alignment):
    return -(-value // alignment) * alignment


@njit(cache=True)
def _refresh(tree, lo, hi):
    """Recompute the maxima above leaves ``lo .. hi - 1`` of a max segment tree."""
    half = tree.shape[0] // 2
    left = (half + lo) >> 1
    right = (half + hi - 1) >> 1
    while left >= 1:
        for node in range(left, right + 1):
            tree[node] = max(tree[2 * node], tree[2 * node + 1])
        left >>= 1
        right >>= 1


@njit(cache=True)
def _range_max(tree, lo, hi):
    """The largest leaf in ``lo .. hi - 1`` of a max segment tree (0 for an empty range)."""
    half = tree.shape[0] // 2
    result = 0
    left = lo + half
    right = hi + half
    while left < right:
        if left & 1:
            result = max(result, tree[left])
            left += 1
        if right & 1:
            right -= 1
            result = max(result, tree[right])
        left >>= 1
        right >>= 1
    return result


@njit(cache=True)
def _scope(frame, piece, frames, num_sections):
    """The section range being solved: the current piece of the innermost split, or everything."""
    if frames == 0:
        return 0, num_sections
    at = frame[_FIRST_PIECE, frames - 1] + frame[_CURRENT, frames - 1]
    return piece[0, at], piece[1, at]


@njit(cache=True)
def _undo(
    level,
    depth,
    size,
    section_lo,
    section_hi,
    offset,
    min_offset,
    floor,
    total,
    cuts,
    offset_trail,
    offset_top,
    section_trail,
    section_top,
):
    """Take back the placement made at ``depth``; returns the trail tops from before it."""
    buffer = level[_BUFFER, depth]
    for position in range(section_top - 1, level[_SECTION_MARK, depth] - 1, -1):
        floor[section_trail[0, position]] = section_trail[1, position]
    half = total.shape[0] // 2
    for section in range(section_lo[buffer], section_hi[buffer]):
        total[half + section] += size[buffer]
    _refresh(total, section_lo[buffer], section_hi[buffer])
    for section in range(section_lo[buffer], section_hi[buffer] - 1):
        cuts[section] += 1
    for position in range(offset_top - 1, level[_OFFSET_MARK, depth] - 1, -1):
        min_offset[offset_trail[0, position]] = offset_trail[1, position]
    offset[buffer] = -1
    level[_BUFFER, depth] = -1
    return level[_OFFSET_MARK, depth], level[_SECTION_MARK, depth]


@njit(cache=True)
def _search(
    size,
    section_lo,
    section_hi,
    neighbour_ptr,
    neighbour_idx,
    member_ptr,
    member_idx,
    by_start,
    start_ptr,
    rank,
    capacity,
    alignment,
    offset,
    min_offset,
    floor,
    total,
    cuts,
    scratch,
    mark,
    level,
    frame,
    piece,
    offset_trail,
    section_trail,
    ctl,
    budget,
):
    count = size.shape[0]
    num_sections = floor.shape[0]
    half = total.shape[0] // 2  # total[half + s]: bytes of unplaced buffers alive in section s
    depth = ctl[_DEPTH]
    phase = ctl[_PHASE]
    offset_top = ctl[_OFFSET_TOP]
    section_top = ctl[_SECTION_TOP]
    stamp = ctl[_STAMP]
    frames = ctl[_FRAMES]
    spent = 0
    status = 0
    while status == 0:
        if phase == _ENTER:
            if spent >= budget:
                status = BUDGET_SPENT
                break
            spent += 1
            if depth == count:
                status = FOUND
                break
            # Settle the scope: finish solved pieces, open a split where the problem fell apart.
            while True:
                lo, hi = _scope(frame, piece, frames, num_sections)
                min_height = _INFINITY
                for position in range(start_ptr[lo], start_ptr[hi]):
                    buffer = by_start[position]
                    if offset[buffer] < 0:
                        height = min_offset[buffer] + size[buffer]
                        if height < min_height:
                            min_height = height
                if min_height == _INFINITY:  # this piece is solved: on to the next one
                    top = frames - 1
                    frame[_CURRENT, top] += 1
                    if frame[_CURRENT, top] < frame[_PIECES, top]:
                        frame[_PIECE_START, top] = depth
                    else:
                        frames -= 1  # every piece solved: so is the scope that was split
                    continue
                # Only the boundaries the last placement crossed can have dropped to zero.
                splits = 0
                if depth > 0:
                    last = level[_BUFFER, depth - 1]
                    for section in range(max(lo, section_lo[last]), min(hi, section_hi[last]) - 1):
                        if cuts[section] == 0:
                            splits += 1
                if splits == 0:
                    break
                # No unplaced buffer crosses these boundaries: solve each piece on its own.
                first = frame[_FIRST_PIECE, frames - 1] + frame[_PIECES, frames - 1] if frames else 0
                pieces = 0
                piece_lo = lo
                for section in range(lo, hi):
                    if section == hi - 1 or cuts[section] == 0:
                        occupied = False
                        for position in range(start_ptr[piece_lo], start_ptr[section + 1]):
                            if offset[by_start[position]] < 0:
                                occupied = True
                                break
                        if occupied:
                            piece[0, first + pieces] = piece_lo
                            piece[1, first + pieces] = section + 1
                            pieces += 1
                        piece_lo = section + 1
                frame[_BASE, frames] = depth
                frame[_FIRST_PIECE, frames] = first
                frame[_PIECES, frames] = pieces
                frame[_CURRENT, frames] = 0
                frame[_PIECE_START, frames] = depth
                frames += 1
            level[_MIN_HEIGHT, depth] = min_height
            if depth == 0 or (frames > 0 and frame[_PIECE_START, frames - 1] == depth):
                level[_KEY_OFFSET, depth] = _NO_KEY
                level[_KEY_RANK, depth] = _NO_KEY
            else:
                level[_KEY_OFFSET, depth] = level[_KEY_OFFSET, depth - 1]
                level[_KEY_RANK, depth] = level[_KEY_RANK, depth - 1]
            level[_BUFFER, depth] = -1
            phase = _ADVANCE
            continue

        # _ADVANCE: place the next candidate at `depth`, in (minimum offset, rank) order.
        lo, hi = _scope(frame, piece, frames, num_sections)
        key_offset = level[_KEY_OFFSET, depth]
        key_rank = level[_KEY_RANK, depth]
        chosen = -1
        chosen_offset = _INFINITY
        chosen_rank = _INFINITY
        for position in range(start_ptr[lo], start_ptr[hi]):
            buffer = by_start[position]
            if offset[buffer] < 0:
                candidate_offset = min_offset[buffer]
                candidate_rank = rank[buffer]
                if (
                    candidate_offset > key_offset or (candidate_offset == key_offset and candidate_rank > key_rank)
                ) and (
                    candidate_offset < chosen_offset
                    or (candidate_offset == chosen_offset and candidate_rank < chosen_rank)
                ):
                    chosen = buffer
                    chosen_offset = candidate_offset
                    chosen_rank = candidate_rank
        if chosen < 0 or chosen_offset >= level[_MIN_HEIGHT, depth]:
            # Nothing left to try here: back up, past a whole split when one of its pieces failed.
            while True:
                if frames > 0 and depth == frame[_PIECE_START, frames - 1]:
                    base = frame[_BASE, frames - 1]
                    while depth > base:
                        depth -= 1
                        offset_top, section_top = _undo(
                            level,
                            depth,
                            size,
                            section_lo,
                            section_hi,
                            offset,
                            min_offset,
                            floor,
                            total,
                            cuts,
                            offset_trail,
                            offset_top,
                            section_trail,
                            section_top,
                        )
                    frames -= 1
                    continue
                if depth == 0:
                    status = EXHAUSTED
                    break
                depth -= 1
                offset_top, section_top = _undo(
                    level,
                    depth,
                    size,
                    section_lo,
                    section_hi,
                    offset,
                    min_offset,
                    floor,
                    total,
                    cuts,
                    offset_trail,
                    offset_top,
                    section_trail,
                    section_top,
                )
                break
            continue
        if section_top + (section_hi[chosen] - section_lo[chosen]) + num_sections > section_trail.shape[1]:
            status = TRAIL_FULL
            break

        spent += 1
        level[_KEY_OFFSET, depth] = chosen_offset
        level[_KEY_RANK, depth] = chosen_rank
        level[_BUFFER, depth] = chosen
        level[_OFFSET_MARK, depth] = offset_top
        level[_SECTION_MARK, depth] = section_top
        offset[chosen] = chosen_offset
        height = chosen_offset + size[chosen]
        stamp += 1
        affected = 0
        for position in range(neighbour_ptr[chosen], neighbour_ptr[chosen + 1]):
            other = neighbour_idx[position]
            if offset[other] < 0 and min_offset[other] < height:
                offset_trail[0, offset_top] = other
                offset_trail[1, offset_top] = min_offset[other]
                offset_top += 1
                raised = _align_up(height, alignment)
                min_offset[other] = raised
                # Only a section whose floor is below the raised offset can see its floor rise.
                for section in range(section_lo[other], section_hi[other]):
                    if mark[section] != stamp and floor[section] < raised:
                        mark[section] = stamp
                        scratch[affected] = section
                        affected += 1
        for section in range(section_lo[chosen], section_hi[chosen]):
            section_trail[0, section_top] = section
            section_trail[1, section_top] = floor[section]
            section_top += 1
            floor[section] = height
            total[half + section] -= size[chosen]
        _refresh(total, section_lo[chosen], section_hi[chosen])
        for section in range(section_lo[chosen], section_hi[chosen] - 1):
            cuts[section] -= 1
        # A section's floor is at least the lowest minimum offset of its unplaced buffers.
        for index in range(affected):
            section = scratch[index]
            lowest = _INFINITY
            for position in range(member_ptr[section], member_ptr[section + 1]):
                other = member_idx[position]
                if offset[other] < 0 and min_offset[other] < lowest:
                    lowest = min_offset[other]
            if lowest != _INFINITY and floor[section] < lowest:
                section_trail[0, section_top] = section
                section_trail[1, section_top] = floor[section]
                section_top += 1
                floor[section] = lowest
        # Unplaced buffers of a section stack above its floor (and above the offset just used).
        # Every section passed this test at the parent with an offset no higher; so when the
        # offset plus the largest total in scope fits, only the sections changed here can fail.
        feasible = True
        if chosen_offset + _range_max(total, lo, hi) <= capacity:
            for section in range(section_lo[chosen], section_hi[chosen]):
                if max(floor[section], chosen_offset) + total[half + section] > capacity:
                    feasible = False
                    break
            for index in range(affected):
                section = scratch[index]
                if max(floor[section], chosen_offset) + total[half + section] > capacity:
                    feasible = False
                    break
        else:
            for section in range(lo, hi):
                if max(floor[section], chosen_offset) + total[half + section] > capacity:
                    feasible = False
                    break
        if feasible:
            depth += 1
            phase = _ENTER
        else:
            offset_top, section_top = _undo(
                level,
                depth,
                size,
                section_lo,
                section_hi,
                offset,
                min_offset,
                floor,
                total,
                cuts,
                offset_trail,
                offset_top,
                section_trail,
                section_top,
            )

    ctl[_DEPTH] = depth
    ctl[_PHASE] = phase
    ctl[_OFFSET_TOP] = offset_top
    ctl[_SECTION_TOP] = section_top
    ctl[_WORK] += spent
    ctl[_STAMP] = stamp
    ctl[_FRAMES] = frames
    return status
