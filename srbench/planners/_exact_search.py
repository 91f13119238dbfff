"""The compiled core of the exact planner: a resumable depth-first search in MiniMalloc's manner.

The question answered here is the decision version of memory planning: can these buffers be
placed within ``capacity`` bytes? The search follows the ideas published with MiniMalloc
(Moffitt, ASPLOS 2024, google/minimalloc); this is an independent implementation over numpy
arrays so that numba can compile it:

* **Units of the alignment.** Offsets are multiples of the alignment a, so below another buffer
  a buffer of s bytes takes ceil(s / a) units whatever its bytes, and only the capacity sees its
  bytes: it must end by its own top, q or q + 1 units for a capacity of q a + c bytes, by its
  remainder (:meth:`Partition.tops`, with the proof). The search runs in units with those tops,
  exactly: every check below sees what each buffer really takes (sections hold their units, up
  to the highest top among their buffers; schedule inference knows only the topmost buffer of a
  stack can end at q + 1). It ran on bytes before, with offsets aligned as placed: every check
  counted raw sizes, so at alignment 64 a section of ten 1-byte buffers seemed to need 10 bytes,
  not 577, and proofs above the bound were left to exhausting capacities a byte at a time (odd
  sizes of 1-4,096 bytes at alignment 64: 3 of 10 proven at 300 buffers, 0 of 10 at 1,000, in
  5 s; README). At alignment 1 units are bytes and every top the capacity: nothing changes.
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
  instead of retrying the other pieces' alternatives, which cannot help. Each piece gets its
  own static order, its keys computed over what is left unplaced (a buffer's T counts only
  unplaced bytes), as MiniMalloc preorders each sub-partition it solves. On MiniMalloc's
  instances H and I this alone turned searches that found nothing in 10 s into ones that finish
  in a fraction of a second.
* **Alone-placement pruning.** A placement that raises no unplaced neighbour's minimum offset
  (they all start above it already) could be kept in any completion of the node: if no packing
  follows it, none follows any later candidate at that node either, which are skipped. This
  generalises the "hatless pruning" of MiniMalloc's later versions (a placed buffer with no
  unplaced neighbour at all).
* **Shared refusals.** A candidate refused by section or schedule inference at a section that its
  placement left as it was (not one of its own, holding no buffer it raised) was refused on the
  node and the key alone: on the buffers the canonical order leaves behind there. Every later
  candidate at the node comes after a higher key, which leaves the same buffers behind or more,
  each starting as late or later, and both checks only fail more as starts rise (the offset
  just placed too): the same section fails under every one of them, so the node backs up at
  once, as after an alone placement, instead of trying them one by one. This is backjumping's
  argument (a failure explained without the current choice fails every alternative to it;
  Prosser 1993, below) applied to the key. In a chronological search of seed 17's partition of
  196 buffers, 100,000 steps entered 5,531 nodes instead of 3,589. On 220 generated instances
  175 fit in 10 s against 173 (README): fewer steps per node, about the same share.
* **Stacked symmetry.** Two buffers of the same lifetime stacked directly on one another can
  trade places and the packing stays valid, so only the order with the one first in the static
  order below is searched (the classic symmetry breaking of identical items in packing).
* **Schedule inference.** Within one section every pair of buffers overlaps in time, so the
  unplaced ones there stack one above another, each no lower than it may still start: its
  minimum offset, or, when the canonical order has left it behind, the last placement's offset
  plus its smallest neighbour (it must be raised by a later placement, which comes at that
  offset or above, by a neighbour's size at least). That is a one-machine schedule with release dates
  and a common deadline, the capacity, and stacking them in order of release date is optimal
  (Jackson's rule), so the check is exact for each section on its own. It counts the bytes left
  empty below buffers that cannot start lower, which section inference (their total above the
  lowest start) does not, and the bytes the canonical order can no longer fill. It replaced a
  weaker "corner" inference: on seven generated instances near the capacity, restarted searches
  in start-led orders found a packing in 7 of 7 within 1.5M steps with it, in 4 of 7 without.
* **Cover inference.** A section with no byte to spare (its floor plus its unplaced bytes make
  the capacity) needs a buffer starting exactly at its floor; in a run of sections at one floor
  such buffers cannot overlap in time, so the tight sections of the run must be covered by
  disjoint candidates that may start there: an interval cover on a line, decided left to right
  (:mod:`srbench.planners._section_inference`). The same holds for sections with less to spare
  than the smallest buffer, with candidates that may start within that slack. On the generated
  instances, 207 of 250 fit in 10 s with it at the floors only, against 197 without; with the
  slack, 900-949 (held out) 40 of 50 instead of 39. This is the first check here that couples
  sections: each section alone can have a candidate while no disjoint set covers them all. It is the
  horizontal counterpart of the per-section checks, after the redundant "cumulative in the
  other dimension" that exact rectangle-packing searches add (Simonis and O'Sullivan, "Search
  strategies for rectangle packing", CP 2008), taken at the floors, the levels where the
  canonical order must place next.
* **Start propagation.** Per section the checks above are exact, and what they miss is how a
  buffer spanning several sections must sit at one offset in all of them. In a section whose
  unplaced buffers total T bytes, a buffer at offset o has every other one wholly below o or
  above it, and one that cannot end by o (its lowest start plus its size passes o) must be
  above: so o + T, less the sizes of those that can end by o, must fit the capacity. The least
  such o raises the buffer's lowest start in every section it lives in, where schedule
  inference may then fail (:func:`srbench.planners._section_inference.unpropagatable_section`;
  bounds propagation between one-machine schedules, as edge finding propagates bounds between
  a job's resources). It follows the raised buffers from the sections a placement changed,
  visiting about as many sections as are in scope. Seed 17's part of 196 buffers in its known
  packing's order: 333,515 steps instead of 402,889; 10,000 inference-like tensors: 20,008
  steps instead of 44,587 (1.55 s instead of 2.5 s); on 100 fresh generated instances 81 fit
  in 10 s instead of 79 (README). What it proves is kept for the subtree (each raised buffer's
  minimum offset, on the trail, as a constraint solver keeps a narrowed domain), so bounds
  build up along a path instead of being found again, or not, at each placement (README: "Kept
  starts").

* **Conflict-directed backjumping** (Prosser, "Hybrid algorithms for the constraint satisfaction
  problem", Computational Intelligence 1993; after Gaschnig's backjumping), in randomised searches
  only. Placements go in offset order across all of time, so a search that failed in one part of
  time retried, at every depth in between, the alternatives placed meanwhile in other parts,
  which cannot help: on generated instances packed near the capacity a search spent millions of
  steps between depths 59 and 63 of 297, the band holding placements from five unrelated
  stretches of time. Here each refused placement is blamed on the placements that set the floor
  of the section that failed (or, refused by symmetry, on its placed neighbours); a depth whose
  candidates are all spent backs up to the deepest placement blamed, handing it the blame, and
  only to the one before it when nothing was blamed. The blame leaves out what the canonical
  order itself excludes, so a jump may pass over a packing: such a search proves nothing
  (GAVE_UP where a complete one would say EXHAUSTED) and is restarted; the static searches stay
  chronological, and complete. One search of seed 9 went from depth 63 to 205 in 1M steps with it.

Schedule and cover inference look only at the sections a placement changed (in partitions of
more than :data:`SCAN_SECTIONS` sections; smaller ones are scanned whole, which costs less there):
every other section is as it was when the parent passed them, so the answer is a scan's, section
for section. At 10,000 inference-like tensors that took the search from 3.4 to 2.2 s (the same
44,585 steps; see :mod:`srbench.planners._section_inference`).

Static orders are MiniMalloc's (:data:`PREORDERINGS`) or lead with the earliest start or the
latest end (:data:`SWEEP_ORDERS`), and may be randomised (each key but those two scaled by a
factor near 1):
the driver restarts such searches on a schedule, see ``srbench.planners.exact``.

The search is iterative with explicit undo trails, and all of its state lives in
:class:`SearchState`'s arrays: :meth:`SearchState.run` stops after a budget of steps and resumes
exactly where it left off. The driver (``srbench.planners.exact``) uses that to interleave
searches at several capacities and static orders under one wall-clock time limit.

Without numba (an optional extra) the same functions run as plain Python: correct, much slower.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from srbench.planners._compiled import njit
from srbench.planners._intervals import overlap_degrees, overlap_lists
from srbench.planners._placement import range_min
from srbench.planners._section_inference import (
    INFINITY,
    changed_sections,
    cover_seeds,
    set_open_floor,
    uncoverable_near,
    uncoverable_section,
    unpropagatable_section,
    unschedulable_section,
)

FOUND = 1
EXHAUSTED = 2
BUDGET_SPENT = 3
TRAIL_FULL = 4
GAVE_UP = 5  # a backjumping search ran out of alternatives: it proves nothing

_ENTER, _ADVANCE = 0, 1
_NO_KEY = -1

# Static orders tried round-robin, as MiniMalloc does: each letter is a descending sort key.
# W: lifetime width, A: area (width x size), T: the largest section total the buffer is part of,
# Z: size; S and E (below) sort by the first section, ascending, and by the end, descending.
PREORDERINGS = ("WAT", "TAW", "TWA")
# Orders led by S, the earliest start, or by E, the latest end (neither randomised): among
# buffers that can go equally low, the one starting first (ending last) in time goes first, so
# the search fills each offset from left to right (right to left) in time, as bottom-left fill
# does in rectangle packing, and a section left uncovered below the others is seen (schedule
# inference) as soon as the search has passed it, instead of after every other buffer that could
# go there was tried. On generated instances packed near the capacity, restarted searches in
# these orders find packings where MiniMalloc's find none in 3M steps; MiniMalloc's orders stay
# the better ones on its own instances, so the driver runs both families. Which direction finds
# a packing first varies from instance to instance: the two alternate.
SWEEP_ORDERS = ("SWA", "EWA", "STA", "ETA", "SAT", "EAT", "SWT", "EWT")
_LETTERS = "WATZSE"  # the keys a static order may use, by code
_INFINITY_SIZE = 1 << 61  # beyond any capacity the search is given (SEARCH_LIMIT_BYTES), and summable
# Partitions of more sections than this keep a tree of the floors (Progress.open_floor) so that
# schedule and cover inference look only at the sections a placement changed; in smaller ones a
# scan of the scope costs less than keeping the tree (on generated instances of 150-500 buffers,
# up to 1,000 sections, steps were 5% slower with the tree; at 10,000 tensors, 20,000 sections,
# the scans of the scope took a third of the search).
SCAN_SECTIONS = 2048
# Sections start propagation may visit per placement, per section in scope: it follows each
# raised buffer to its other sections, which may raise more; one visit per section on average
# refuted about as much as four (seed 17's part of 196 in its known packing's order: 333,515
# steps, 332,762 at four visits, 402,889 without propagation), at less cost per step.
PROPAGATION_VISITS = 1


@dataclass(frozen=True)
class Partition:
    """Buffers whose lifetimes chain together; buffers of different partitions never overlap in
    time, so each partition is searched on its own. Arrays are indexed by local buffer index."""

    buffer_ids: np.ndarray  # indices into the caller's buffer arrays
    size: np.ndarray  # units of the alignment a buffer takes below any other: its bytes, rounded up
    remainder: np.ndarray  # bytes of its top unit it takes, 1 .. alignment
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
    alignment: int  # bytes per unit: every offset is a multiple of it

    @property
    def num_sections(self) -> int:
        return int(self.section_total.shape[0])

    @property
    def lower_bound(self) -> int:
        """The most units alive in one section (bytes at alignment 1)."""
        return int(self.section_total.max()) if self.section_total.size else 0

    @property
    def size_bytes(self) -> np.ndarray:
        return (self.size - 1) * self.alignment + self.remainder

    def tops(self, capacity: int) -> np.ndarray:
        """The unit each buffer must end by, within ``capacity`` bytes: ``floor((capacity - s) /
        a) + r`` for a buffer of ``s`` bytes, ``r`` units, at alignment ``a``; with ``capacity = q
        a + c`` (``0 <= c < a``), q + 1 for a buffer taking ``t = s - (r - 1) a <= c`` bytes of its
        top unit, else q.

        Why units are exact: every offset is ``k a``. Two buffers overlapping in time, one below
        the other, need ``k_lo a + s_lo <= k_hi a``, that is ``k_lo + s_lo / a <= k_hi``, and as
        ``k_hi`` is whole, ``k_lo + ceil(s_lo / a) = k_lo + r_lo <= k_hi``: below another buffer
        a buffer takes r units, whatever its bytes. Only the capacity sees its bytes: ``k a + s <=
        capacity`` iff ``k <= (capacity - s) / a`` iff (k whole) ``k <= floor((capacity - s) /
        a)``, iff ``k + r <=`` this top. With ``s = (r - 1) a + t``, ``1 <= t <= a``: ``capacity -
        s = (q - r + 1) a + (c - t)`` and ``-a <= c - t < a``, so the floor is ``q - r + 1`` when
        ``t <= c`` and ``q - r`` when not: tops of q + 1 and q. At alignment 1 every top is the
        capacity. The search works in units with these tops: a packing of units within them is
        one of bytes within the capacity (offsets times a), and back, so it decides the same
        question, and every check it makes sees what each buffer really takes."""
        return (capacity - self.size_bytes) // self.alignment + self.size

    @cached_property
    def lift(self) -> np.ndarray:
        """How far above the last placement a buffer the canonical order left behind must start,
        at least: the smallest of its neighbours' sizes (see ``lowest_start``); more than the
        capacity for a buffer with no neighbour, which nothing can raise."""
        return _row_reduce(np.minimum, self.size[self.neighbour_idx], self.neighbour_ptr, _INFINITY_SIZE)

    @cached_property
    def largest_total(self) -> np.ndarray:
        """The largest section total each buffer is part of."""
        return -range_min(-self.section_total, self.section_lo, self.section_hi - 1)

    def preorder_rank(self, heuristic: str, jitter: np.ndarray | None = None) -> np.ndarray:
        """Rank of each buffer in the static order named by ``heuristic`` (ties by index), its
        keys scaled by ``jitter`` when given (a randomised variant of the order)."""
        columns = {
            "W": self.width,
            "A": self.width * self.size,
            "T": self.largest_total,
            "Z": self.size,
            "S": -self.section_lo,
            "E": self.section_hi,
        }
        scale = np.ones(self.size.shape[0]) if jitter is None else jitter
        keys = [np.arange(self.size.shape[0])] + [
            -columns[letter] * (1 if letter in "SE" else scale) for letter in reversed(heuristic)
        ]
        order = np.lexsort(keys)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0])
        return rank.astype(np.int64)


def _row_reduce(ufunc: np.ufunc, values: np.ndarray, ptr: np.ndarray, identity: int) -> np.ndarray:
    """``ufunc`` over each row of a CSR list (row i: ``values[ptr[i]:ptr[i + 1]]``), ``identity``
    (which ``ufunc`` leaves any value as) padding the last row; an empty row gets _INFINITY_SIZE."""
    padded = np.append(values, identity)
    result = ufunc.reduceat(padded, np.minimum(ptr[:-1], values.shape[0]))
    result[ptr[:-1] == ptr[1:]] = _INFINITY_SIZE
    return result


def time_groups(first: np.ndarray, last: np.ndarray) -> list[np.ndarray]:
    """Indices of the buffers (inclusive lifetimes) whose lifetimes chain together, one array
    per group in (first, last) order: buffers of different groups never overlap in time."""
    order = np.lexsort((last, first))
    reach = np.maximum.accumulate(last[order])
    return np.split(order, np.flatnonzero(first[order][1:] > reach[:-1]) + 1)


def search_entries(first: np.ndarray, last: np.ndarray) -> int:
    """How many entries a partition of these buffers holds in its neighbour and section lists,
    the bulk of its memory: known before building it, so a huge one need not be built."""
    points = np.unique(np.concatenate([first, last + 1]))
    spans = np.searchsorted(points, last + 1) - np.searchsorted(points, first)
    return int(overlap_degrees(first, last).sum() + spans.sum())


def conflict_entries(partition: Partition) -> int:
    """How many entries a backjumping search of ``partition`` holds in its conflict sets."""
    count = int(partition.size.shape[0])
    return (count + 1) * (count // 64 + 1)


def build_partition(
    group: np.ndarray, first: np.ndarray, last: np.ndarray, size: np.ndarray, alignment: int = 1
) -> Partition:
    """The partition of the buffers ``group`` (indices into ``first``, ``last``, ``size``, in
    bytes, all positive), in units of ``alignment`` (see :meth:`Partition.tops`)."""
    first, end, size_bytes = first[group], last[group] + 1, size[group]
    size = -(-size_bytes // alignment)
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
    neighbour_ptr, neighbour_idx = overlap_lists(first, end - 1)
    return Partition(
        buffer_ids=group,
        size=size,
        remainder=size_bytes - (size - 1) * alignment,
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
        alignment=alignment,
    )


class Problem(NamedTuple):
    """What one search reads and never writes: a partition's arrays, its static order, the capacity
    (in units: the unit each buffer must end by, and each section's largest such unit)."""

    size: np.ndarray
    section_lo: np.ndarray
    section_hi: np.ndarray
    neighbour_ptr: np.ndarray
    neighbour_idx: np.ndarray
    member_ptr: np.ndarray
    member_idx: np.ndarray
    by_start: np.ndarray
    start_ptr: np.ndarray
    width: np.ndarray  # lifetime length in steps
    letters: np.ndarray  # the static order's keys, most significant first (_LETTERS codes)
    first_rank: np.ndarray  # each buffer's rank in the static order over the whole partition
    jitter: np.ndarray  # factors the order's keys are scaled by (all 1 but in randomised orders)
    lift: np.ndarray  # how far above the last placement a buffer left behind must start (Partition.lift)
    top: np.ndarray  # the unit each buffer must end by (Partition.tops)
    capacity: np.ndarray  # per section, the largest top of its buffers: no stack there ends higher
    low_capacity: np.ndarray  # per section, the smallest top of its buffers: a stack ending there fits
    least_capacity: int  # the smallest of the largest tops
    backjump: bool  # conflict-directed backjumping: faster to a packing, proves nothing


class Progress(NamedTuple):
    """Where one search is: everything it writes, so that it stops and resumes exactly.

    ``total`` holds the bytes of unplaced buffers per section as the leaves of a max segment
    tree (leaf s at ``half + s``); ``cuts[s]`` counts the unplaced buffers alive in both
    sections s and s + 1; ``level`` has one column per depth (rows ``_BUFFER`` ...), ``frame``
    one per open split (rows ``_BASE`` ...), ``piece`` the section ranges of the splits' pieces;
    the trails hold (index, old value) pairs to undo; ``ctl`` the scalars (slots ``_DEPTH`` ...).
    """

    offset: np.ndarray
    min_offset: np.ndarray
    floor: np.ndarray
    total: np.ndarray
    open_floor: np.ndarray  # min segment tree: a section's floor where it holds unplaced bytes (see SCAN_SECTIONS)
    cuts: np.ndarray
    scratch: np.ndarray
    mark: np.ndarray
    level: np.ndarray
    frame: np.ndarray
    piece: np.ndarray
    offset_trail: np.ndarray
    section_trail: np.ndarray
    rank: np.ndarray  # each buffer's position in the order of its piece (the static order at the root)
    rank_trail: np.ndarray
    placed_at: np.ndarray  # the depth each placed buffer was placed at
    deepest: np.ndarray  # the offsets at the deepest node entered (-1: unplaced), a partial packing
    conflict: np.ndarray  # per depth, a bit set of the depths its failures were blamed on
    ctl: np.ndarray


class SearchState:
    """One resumable search: a partition, a capacity, a static order, and where the search is."""

    def __init__(
        self,
        partition: Partition,
        capacity: int,
        heuristic: str,
        jitter: np.ndarray | None = None,
        backjump: bool = False,
        starts: np.ndarray | None = None,
    ):
        """``capacity`` in bytes; the search runs in the partition's units (Partition.tops).
        ``starts`` (units) is the lowest offset each buffer may take, where a packing of other
        buffers is fixed below it (a neighbourhood of a partial packing, see
        ``srbench.planners.exact._Neighbourhoods``); every check holds with it: a buffer's minimum
        offset starts there and only rises, and each section's floor starts at the lowest start
        among its buffers, below which nothing of it can go."""
        count, num_sections = partition.size.shape[0], partition.num_sections
        jitter = np.ones(count) if jitter is None else jitter
        top = partition.tops(capacity)
        tops = top[partition.member_idx]
        section_capacity = _row_reduce(np.maximum, tops, partition.member_ptr, -1)
        low_capacity = _row_reduce(np.minimum, tops, partition.member_ptr, _INFINITY_SIZE)
        self.problem = Problem(
            size=partition.size,
            section_lo=partition.section_lo,
            section_hi=partition.section_hi,
            neighbour_ptr=partition.neighbour_ptr,
            neighbour_idx=partition.neighbour_idx,
            member_ptr=partition.member_ptr,
            member_idx=partition.member_idx,
            by_start=partition.by_start,
            start_ptr=partition.start_ptr,
            width=partition.width,
            letters=np.array([_LETTERS.index(letter) for letter in heuristic], dtype=np.int64),
            first_rank=partition.preorder_rank(heuristic, jitter),
            jitter=jitter,
            lift=partition.lift,
            top=top,
            capacity=section_capacity,
            low_capacity=low_capacity,
            least_capacity=int(section_capacity.min(initial=_INFINITY_SIZE)),
            backjump=backjump,
        )
        half = 1 << max(num_sections - 1, 1).bit_length()
        total = np.zeros(2 * half, dtype=np.int64)
        total[half : half + num_sections] = partition.section_total
        level = half
        while level > 1:
            total[level // 2 : level] = np.maximum(total[level : 2 * level : 2], total[level + 1 : 2 * level : 2])
            level //= 2
        starts = np.zeros(count, dtype=np.int64) if starts is None else starts.astype(np.int64)
        floor = _row_reduce(np.minimum, starts[partition.member_idx], partition.member_ptr, _INFINITY_SIZE)
        floor[floor == _INFINITY_SIZE] = 0
        open_floor = np.zeros(1, np.int64)
        if num_sections > SCAN_SECTIONS:
            open_floor = np.full(2 * half, INFINITY, dtype=np.int64)
            open_floor[half : half + num_sections] = np.where(partition.section_total > 0, floor, INFINITY)
            level = half
            while level > 1:
                open_floor[level // 2 : level] = np.minimum(open_floor[level : 2 * level : 2],
                                                            open_floor[level + 1 : 2 * level : 2])  # fmt: skip
                level //= 2
        crossings = np.zeros(num_sections + 1, dtype=np.int64)
        np.add.at(crossings, partition.section_lo, 1)
        np.add.at(crossings, partition.section_hi - 1, -1)
        self.progress = Progress(
            offset=np.full(count, -1, dtype=np.int64),
            min_offset=starts.copy(),
            floor=floor,
            total=total,
            open_floor=open_floor,
            cuts=np.cumsum(crossings)[:num_sections],
            scratch=np.zeros(num_sections, dtype=np.int64),
            mark=np.zeros(num_sections, dtype=np.int64),
            level=np.zeros((_LEVEL_ROWS, count + 1), dtype=np.int64),
            frame=np.zeros((_FRAME_ROWS, count + 1), dtype=np.int64),
            # Pieces of the open splits nest (a laminar family over the sections): at most 2S of them.
            piece=np.zeros((2, 2 * num_sections + 2), dtype=np.int64),
            # The trails start small and double when a placement might not fit (TRAIL_FULL):
            # their worst cases (every neighbour raised, every section floor moved, at every
            # depth) are far from what a search uses, and were most of its memory.
            offset_trail=np.zeros((2, min(partition.neighbour_idx.shape[0], 4 * count) + 64), dtype=np.int64),
            section_trail=np.zeros((2, 4 * (count + num_sections) + 64), dtype=np.int64),
            rank=partition.preorder_rank(heuristic, jitter),
            rank_trail=np.zeros((2, 4 * count + 64), dtype=np.int64),
            placed_at=np.zeros(count, dtype=np.int64),
            deepest=np.full(count, -1, dtype=np.int64),
            conflict=np.zeros((count + 1, count // 64 + 1) if backjump else (1, 1), dtype=np.int64),  # conflict_entries
            ctl=np.zeros(_CTL_SLOTS, dtype=np.int64),
        )
        self.alignment = partition.alignment
        # The root's section inference: at an alignment, the aligned bound of each section.
        overflowing = (floor + partition.section_total > section_capacity).any()
        overflowing = overflowing or (starts + partition.size > top).any()
        self.status = EXHAUSTED if overflowing else 0

    @property
    def steps(self) -> int:
        """Work done so far: nodes entered plus placements tried."""
        return int(self.progress.ctl[_WORK])

    @property
    def done(self) -> bool:
        return self.status in (FOUND, EXHAUSTED)

    @property
    def depth(self) -> int:
        """How many buffers the deepest node entered so far had placed."""
        return int(self.progress.ctl[_DEEPEST])

    def deepest(self) -> np.ndarray:
        """The offsets (units, -1 where unplaced) at the deepest node entered: a partial packing
        that passed every check."""
        return self.progress.deepest.copy()

    def run(self, budget: int) -> int:
        """Search for about ``budget`` more units of work; FOUND, EXHAUSTED or BUDGET_SPENT."""
        if self.done:
            return self.status
        while True:
            before = self.steps
            status = _search(self.problem, self.progress, budget)
            budget -= self.steps - before
            if status != TRAIL_FULL:
                self.status = status
                return status
            self.progress = self.progress._replace(
                offset_trail=_doubled(self.progress.offset_trail),
                section_trail=_doubled(self.progress.section_trail),
                rank_trail=_doubled(self.progress.rank_trail),
            )

    def offsets(self) -> np.ndarray:
        """The packing found, in bytes (local buffer order); only meaningful once FOUND."""
        return self.progress.offset * self.alignment


def _doubled(trail: np.ndarray) -> np.ndarray:
    return np.concatenate([trail, np.zeros_like(trail)], axis=1)


# Rows of Progress.level (one column per depth).
_BUFFER, _KEY_OFFSET, _KEY_RANK, _MIN_HEIGHT, _OFFSET_MARK, _SECTION_MARK, _LAST_ALONE, _RANK_MARK = range(8)
_LEVEL_ROWS = 8
# Rows of Progress.frame (one column per open split): the depth it opened at, its pieces
# (first index into Progress.piece and how many), the piece being solved and its first depth.
_BASE, _FIRST_PIECE, _PIECES, _CURRENT, _PIECE_START = range(5)
_FRAME_ROWS = 5
# Slots of Progress.ctl.
_DEPTH, _PHASE, _OFFSET_TOP, _SECTION_TOP, _WORK, _STAMP, _FRAMES, _RANK_TOP, _DEEPEST = range(9)
_CTL_SLOTS = 9


# The compiled helpers take the arrays they use, never the Problem and Progress tuples: numba
# passes a tuple of arrays by value, with a reference count taken on each array, on every call,
# which kept calls from being inlined and made the search a third slower. Only _search, called
# once per slice of work, takes the tuples and unpacks them.


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
def _lowest_top(start_ptr, by_start, size, offset, min_offset, lo, hi):
    """The lowest top (minimum offset + size) of the unplaced buffers starting in sections
    ``lo .. hi - 1``; ``INFINITY`` when all are placed. No buffer may be placed at or above it,
    since it could go below that buffer instead (MiniMalloc's dominance rule)."""
    lowest = INFINITY
    for position in range(start_ptr[lo], start_ptr[hi]):
        buffer = by_start[position]
        if offset[buffer] < 0:
            height = min_offset[buffer] + size[buffer]
            if height < lowest:
                lowest = height
    return lowest


@njit(cache=True)
def _finish_piece(frame, frames, depth):
    """The current piece is solved: on to the split's next piece; returns the open splits left
    (one fewer after the last piece: the scope that was split is solved too)."""
    top = frames - 1
    frame[_CURRENT, top] += 1
    if frame[_CURRENT, top] < frame[_PIECES, top]:
        frame[_PIECE_START, top] = depth
        return frames
    return frames - 1


@njit(cache=True)
def _new_cuts(section_lo, section_hi, cuts, level, depth, lo, hi):
    """How many section boundaries in scope no unplaced buffer crosses any more since the last
    placement (only the boundaries it crossed can have dropped to zero)."""
    if depth == 0:
        return 0
    last = level[_BUFFER, depth - 1]
    found = 0
    for section in range(max(lo, section_lo[last]), min(hi, section_hi[last]) - 1):
        if cuts[section] == 0:
            found += 1
    return found


@njit(cache=True)
def _open_split(start_ptr, by_start, offset, cuts, frame, piece, frames, depth, lo, hi):
    """Split the scope at the boundaries no unplaced buffer crosses, into the pieces that still
    hold unplaced buffers, each then solved on its own (dynamic decomposition); returns the
    number of open splits."""
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
    return frames + 1


@njit(cache=True)
def _rank_pieces(start_ptr, by_start, size, width, section_lo, section_hi, letters, jitter, offset, total, piece,
                 rank, rank_trail, rank_top, first, pieces):  # fmt: skip
    """Order the unplaced buffers of each new piece by the static order's keys over what is left:
    T (the largest section total a buffer is part of) counts only unplaced bytes now, as when
    MiniMalloc solves a sub-partition with its own preordering. Old ranks go on the trail;
    returns its new top."""
    for at in range(first, first + pieces):
        members = np.empty(start_ptr[piece[1, at]] - start_ptr[piece[0, at]], dtype=np.int64)
        found = 0
        for position in range(start_ptr[piece[0, at]], start_ptr[piece[1, at]]):
            if offset[by_start[position]] < 0:
                members[found] = by_start[position]
                found += 1
        members = np.sort(members[:found])  # equal keys keep buffer order
        order = np.arange(found)
        keys = np.empty(found, dtype=np.float64)
        for letter in letters[::-1]:  # least significant key first, each sort stable
            for index in range(found):
                buffer = members[index]
                if letter == 0:
                    keys[index] = -width[buffer] * jitter[buffer]
                elif letter == 1:
                    keys[index] = -width[buffer] * size[buffer] * jitter[buffer]
                elif letter == 2:
                    keys[index] = -_range_max(total, section_lo[buffer], section_hi[buffer]) * jitter[buffer]
                elif letter == 3:
                    keys[index] = -size[buffer] * jitter[buffer]
                elif letter == 4:
                    keys[index] = section_lo[buffer]
                else:
                    keys[index] = -section_hi[buffer]
            order = order[np.argsort(keys[order], kind="mergesort")]
        for position in range(found):
            buffer = members[order[position]]
            rank_trail[0, rank_top] = buffer
            rank_trail[1, rank_top] = rank[buffer]
            rank_top += 1
            rank[buffer] = position
    return rank_top


@njit(cache=True)
def _restore_ranks(rank, rank_trail, rank_top, mark):
    for position in range(rank_top - 1, mark - 1, -1):
        rank[rank_trail[0, position]] = rank_trail[1, position]
    return mark


@njit(cache=True)
def _open_level(level, frame, frames, depth, lowest_top):
    """Start trying candidates at ``depth``: they come after the parent's choice in (minimum
    offset, rank) order, except at the root and at the first depth of a piece."""
    level[_MIN_HEIGHT, depth] = lowest_top
    if depth == 0 or (frames > 0 and frame[_PIECE_START, frames - 1] == depth):
        level[_KEY_OFFSET, depth] = _NO_KEY
        level[_KEY_RANK, depth] = _NO_KEY
    else:
        level[_KEY_OFFSET, depth] = level[_KEY_OFFSET, depth - 1]
        level[_KEY_RANK, depth] = level[_KEY_RANK, depth - 1]
    level[_BUFFER, depth] = -1
    level[_LAST_ALONE, depth] = 0


@njit(cache=True)
def _next_candidate(start_ptr, by_start, rank, offset, min_offset, level, depth, lo, hi):
    """The unplaced buffer in scope that comes next after the last one tried at ``depth``, in
    (minimum offset, rank) order: (buffer, its minimum offset, its rank); buffer -1 if none."""
    key_offset = level[_KEY_OFFSET, depth]
    key_rank = level[_KEY_RANK, depth]
    chosen = -1
    chosen_offset = INFINITY
    chosen_rank = INFINITY
    for position in range(start_ptr[lo], start_ptr[hi]):
        buffer = by_start[position]
        if offset[buffer] < 0:
            candidate_offset = min_offset[buffer]
            candidate_rank = rank[buffer]
            if (candidate_offset > key_offset or (candidate_offset == key_offset and candidate_rank > key_rank)) and (
                candidate_offset < chosen_offset or (candidate_offset == chosen_offset and candidate_rank < chosen_rank)
            ):
                chosen = buffer
                chosen_offset = candidate_offset
                chosen_rank = candidate_rank
    return chosen, chosen_offset, chosen_rank


@njit(cache=True)
def _raise_neighbours(
    size, section_lo, section_hi, neighbour_ptr, neighbour_idx, offset, min_offset, floor, scratch, mark, offset_trail,
    offset_top, stamp, chosen,
):  # fmt: skip
    """Unplaced buffers overlapping ``chosen`` in time may now start only at its top or above; the
    old minimum offsets go on the trail. Returns how many sections, listed in ``scratch`` (and
    marked with ``stamp``), hold such a buffer above their floor, so their floors may rise; and
    the new top of the offset trail."""
    height = offset[chosen] + size[chosen]
    top = offset_top
    affected = 0
    for position in range(neighbour_ptr[chosen], neighbour_ptr[chosen + 1]):
        other = neighbour_idx[position]
        if offset[other] < 0 and min_offset[other] < height:
            affected, top = _raise_start(section_lo, section_hi, min_offset, floor, scratch, mark, stamp, offset_trail,
                                         top, affected, other, height)  # fmt: skip
    return affected, top


@njit(cache=True)
def _raise_start(section_lo, section_hi, min_offset, floor, scratch, mark, stamp, offset_trail, offset_top, affected,
                 buffer, start):  # fmt: skip
    """Raise ``buffer``'s minimum offset to ``start``, the old one on the trail, and list in
    ``scratch`` (marked with ``stamp``) each of its sections not listed yet whose floor is below
    ``start``: only such a section can see its floor rise. Returns how many are listed and the
    offset trail's new top."""
    offset_trail[0, offset_top] = buffer
    offset_trail[1, offset_top] = min_offset[buffer]
    min_offset[buffer] = start
    for section in range(section_lo[buffer], section_hi[buffer]):
        if mark[section] != stamp and floor[section] < start:
            mark[section] = stamp
            scratch[affected] = section
            affected += 1
    return affected, offset_top + 1


@njit(cache=True)
def _keep_raised_starts(section_lo, section_hi, rank, min_offset, floor, raised, persist, persisted, key_offset,
                        key_rank, scratch, mark, stamp, offset_trail, offset_top):  # fmt: skip
    """Keep what start propagation proved for the subtree of a placement that passed: each buffer
    it raised (``persist[:persisted]``, raised to ``raised[buffer]``) starts there from now on, its
    old minimum offset on the trail, as a constraint solver keeps a narrowed domain until it
    backtracks. Every bound holds in every packing below the node, so nothing is lost; without
    this, the next placement started again from the minimum offsets the neighbours alone set, and
    found again only what its own sections led to. A kept start takes the buffer out of the
    candidates below it, raises the floors of its sections (listed in ``scratch``, marked with
    ``stamp``, for :func:`_lift_floors`), and is where the next propagation starts from.

    Only buffers that come after the key in (minimum offset, rank) order are kept: one the
    canonical order has left behind may be placed only once a neighbour raises it (its lowest
    start, key plus its lift, is an inference, :func:`srbench.planners._section_inference.lowest_start`);
    a minimum offset above the key would make it a candidate there. Returns how many sections
    are listed and the offset trail's new top."""
    lifted = 0
    for index in range(persisted):
        buffer = persist[index]
        start = raised[buffer]
        low = min_offset[buffer]
        if start > low and (low > key_offset or (low == key_offset and rank[buffer] > key_rank)):
            lifted, offset_top = _raise_start(section_lo, section_hi, min_offset, floor, scratch, mark, stamp,
                                              offset_trail, offset_top, lifted, buffer, start)  # fmt: skip
    return lifted, offset_top


@njit(cache=True)
def _set_floor(floor, section_trail, section_top, section, value):
    """Set ``floor[section]`` to ``value``, the old value going on the trail; returns its new top."""
    section_trail[0, section_top] = section
    section_trail[1, section_top] = floor[section]
    floor[section] = value
    return section_top + 1


@njit(cache=True)
def _cover_sections(size, section_lo, section_hi, offset, floor, total, cuts, section_trail, section_top, chosen):
    """The sections ``chosen`` lives in: their floor up to its top, its bytes off their unplaced
    totals, and one unplaced buffer fewer across their inner boundaries. Returns the section
    trail's new top."""
    lo, hi = section_lo[chosen], section_hi[chosen]
    half = total.shape[0] // 2
    for section in range(lo, hi):
        section_top = _set_floor(floor, section_trail, section_top, section, offset[chosen] + size[chosen])
        total[half + section] -= size[chosen]
    _refresh(total, lo, hi)
    for section in range(lo, hi - 1):
        cuts[section] -= 1
    return section_top


@njit(cache=True)
def _lift_floors(member_ptr, member_idx, offset, min_offset, floor, scratch, section_trail, section_top, affected):
    """A section's floor is at least the lowest minimum offset of its unplaced buffers: raise the
    floors of the ``affected`` sections listed in ``scratch`` to it. Returns the section trail's
    new top."""
    for index in range(affected):
        section = scratch[index]
        lowest = INFINITY
        for position in range(member_ptr[section], member_ptr[section + 1]):
            other = member_idx[position]
            if offset[other] < 0 and min_offset[other] < lowest:
                lowest = min_offset[other]
        if lowest != INFINITY and floor[section] < lowest:
            section_top = _set_floor(floor, section_trail, section_top, section, lowest)
    return section_top


@njit(cache=True)
def _refresh_open_floors(open_floor, floor, total, section_trail, trail_from, trail_to):
    """Bring ``open_floor`` up to date where a placement (or its undoing) changed floors: the
    sections on the section trail from ``trail_from`` to ``trail_to``, the placed buffer's (whose
    unplaced bytes changed too) among them."""
    for position in range(trail_from, trail_to):
        set_open_floor(open_floor, floor, total, section_trail[0, position])


@njit(cache=True)
def _overflows(floor, total, capacity, section, chosen_offset):
    """Section inference: the unplaced buffers of ``section`` stack above its floor (and above the
    offset just used, as placements go in offset order); does that pass the section's capacity
    (the highest top of its buffers: the stack's topmost buffer ends there at most)?"""
    return max(floor[section], chosen_offset) + total[total.shape[0] // 2 + section] > capacity[section]


@njit(cache=True)
def _overflowing_section(section_lo, section_hi, capacity, least_capacity, floor, total, scratch, chosen, chosen_offset,
                         affected, lo, hi):  # fmt: skip
    """A section in scope that fails section inference after ``chosen`` was placed at
    ``chosen_offset``, or -1 when all pass. Every section passed at the parent with an offset no
    higher; so when the offset plus the largest total in scope fits the least capacity of a
    section, only the sections changed here can fail."""
    if chosen_offset + _range_max(total, lo, hi) <= least_capacity:
        for section in range(section_lo[chosen], section_hi[chosen]):
            if _overflows(floor, total, capacity, section, chosen_offset):
                return section
        for index in range(affected):
            if _overflows(floor, total, capacity, scratch[index], chosen_offset):
                return scratch[index]
        return -1
    for section in range(lo, hi):
        if _overflows(floor, total, capacity, section, chosen_offset):
            return section
    return -1


@njit(cache=True)
def _stacked_out_of_order(section_lo, section_hi, neighbour_ptr, neighbour_idx, size, first_rank, top, offset, chosen,
                          chosen_offset):  # fmt: skip
    """Symmetry: two buffers of the same lifetime stacked directly on one another can trade
    places, and the packing stays valid when the lower one may end where the upper one ends
    (its top is as high); so only the order with the one first in the static order below is
    kept (the order the search tries first). Every packing keeps one such order: in a run of
    same-lifetime buffers stacked directly, only the topmost can end at the highest top (the
    others end a unit lower at least, within every top), so put on top the last in the static
    order among those whose top allows, and the others below it in static order; a pair there
    out of static order has a lower one whose top does not allow, a lower top."""
    for position in range(neighbour_ptr[chosen], neighbour_ptr[chosen + 1]):
        other = neighbour_idx[position]
        if (
            first_rank[other] > first_rank[chosen]
            and offset[other] >= 0
            and offset[other] + size[other] == chosen_offset
            and section_lo[other] == section_lo[chosen]
            and section_hi[other] == section_hi[chosen]
            and top[other] >= top[chosen]
        ):
            return True
    return False


@njit(cache=True)
def _untouched(section_lo, section_hi, offset_trail, trail_from, trail_to, chosen, section):
    """Whether placing ``chosen`` left ``section`` as it was: not one of its own, and no buffer
    alive there raised (the offset trail from ``trail_from`` to ``trail_to``)."""
    if section_lo[chosen] <= section < section_hi[chosen]:
        return False
    for position in range(trail_from, trail_to):
        other = offset_trail[0, position]
        if section_lo[other] <= section < section_hi[other]:
            return False
    return True


@njit(cache=True)
def _undo(size, section_lo, section_hi, offset, min_offset, floor, total, open_floor, cuts, level, offset_trail,
          offset_top, section_trail, section_top, depth):  # fmt: skip
    """Take back the placement made at ``depth``: floors, totals, cuts and minimum offsets as
    they were before it. Returns the trails' tops from before it."""
    buffer = level[_BUFFER, depth]
    for position in range(section_top - 1, level[_SECTION_MARK, depth] - 1, -1):
        floor[section_trail[0, position]] = section_trail[1, position]
    half = total.shape[0] // 2
    for section in range(section_lo[buffer], section_hi[buffer]):
        total[half + section] += size[buffer]
    _refresh(total, section_lo[buffer], section_hi[buffer])
    if open_floor.shape[0] == total.shape[0]:  # the tree is kept (see SCAN_SECTIONS)
        _refresh_open_floors(open_floor, floor, total, section_trail, level[_SECTION_MARK, depth], section_top)
    for section in range(section_lo[buffer], section_hi[buffer] - 1):
        cuts[section] += 1
    for position in range(offset_top - 1, level[_OFFSET_MARK, depth] - 1, -1):
        min_offset[offset_trail[0, position]] = offset_trail[1, position]
    offset[buffer] = -1
    level[_BUFFER, depth] = -1
    return level[_OFFSET_MARK, depth], level[_SECTION_MARK, depth]


@njit(cache=True)
def _blame(neighbour_ptr, neighbour_idx, member_ptr, member_idx, offset, placed_at, conflict, depth, chosen, failing):
    """Record, in the conflict set of ``depth``, the placements a refusal of ``chosen`` there is
    blamed on: the placed buffers of the section that failed inference (they set its floor), or
    when the symmetry rule refused it (``failing`` < 0), its placed neighbours in time (its twin
    is one of them). Blaming every placed neighbour of the refused buffer each time was tried
    too: it blames placements far off in time, and one search of seed 9 went 166 deep in 1M
    steps instead of 205."""
    if failing >= 0:
        begin, end, buffers = member_ptr[failing], member_ptr[failing + 1], member_idx
    else:
        begin, end, buffers = neighbour_ptr[chosen], neighbour_ptr[chosen + 1], neighbour_idx
    for position in range(begin, end):
        other = buffers[position]
        if offset[other] >= 0 and other != chosen:
            at = placed_at[other]
            conflict[depth, at >> 6] |= np.int64(1) << (at & 63)


@njit(cache=True)
def _latest_blamed(conflict, depth):
    """The deepest placement in the conflict set of ``depth`` (which holds shallower ones
    only), or -1 for an empty set."""
    for word in range((depth - 1) >> 6, -1, -1):  # none at depth 0
        bits = conflict[depth, word]
        if bits != 0:
            for bit in range(63, -1, -1):
                if (bits >> bit) & 1:
                    return word * 64 + bit
    return -1


@njit(cache=True)
def _merge_conflicts(conflict, failed, landed):
    """Conflict-directed backjumping: the placements a failure at ``failed`` was blamed on, those
    shallower than ``landed``, are blamed for the failures at ``landed`` too."""
    top = landed >> 6
    for word in range(top):
        conflict[landed, word] |= conflict[failed, word]
    conflict[landed, top] |= conflict[failed, top] & ((np.int64(1) << (landed & 63)) - 1)


@njit(cache=True)
def _search(problem, state, budget):
    """Run the depth-first search for up to ``budget`` units of work (nodes entered plus
    placements tried) from where ``state`` left off: FOUND, EXHAUSTED, BUDGET_SPENT, or
    TRAIL_FULL (a trail needs more room before the next placement)."""
    (size, section_lo, section_hi, neighbour_ptr, neighbour_idx, member_ptr, member_idx, by_start, start_ptr, width,
     letters, first_rank, jitter, lift, top, capacity, low_capacity, least_capacity, backjump) = problem  # fmt: skip
    (offset, min_offset, floor, total, open_floor, cuts, scratch, mark, level, frame, piece, offset_trail,
     section_trail, rank, rank_trail, placed_at, deepest, conflict, ctl) = state  # fmt: skip
    count = size.shape[0]
    num_sections = floor.shape[0]
    depth = ctl[_DEPTH]
    phase = ctl[_PHASE]
    frames = ctl[_FRAMES]
    offset_top = ctl[_OFFSET_TOP]
    section_top = ctl[_SECTION_TOP]
    stamp = ctl[_STAMP]
    rank_top = ctl[_RANK_TOP]
    release = np.empty(count, dtype=np.int64)  # scratch for schedule inference
    length = np.empty(count, dtype=np.int64)
    reach = np.empty(num_sections + 1, dtype=np.bool_)  # scratch for cover inference
    listed = np.empty(num_sections, dtype=np.int64)  # sections a placement may have changed (changed_sections)
    spare = np.empty(num_sections, dtype=np.int64)
    changed = np.empty(num_sections, dtype=np.int64)
    seen = np.zeros(num_sections, dtype=np.int64)  # marks of cover_seeds (stamps start at 1)
    raised = np.empty(count, dtype=np.int64)  # scratch for start propagation
    finish = np.empty(count, dtype=np.int64)
    fresh = np.zeros(count, dtype=np.int64)  # stamps start at 1
    jobs = np.empty(count, dtype=np.int64)
    by_finish = np.empty(count, dtype=np.int64)
    queue = np.empty(num_sections + 1, dtype=np.int64)
    queued = np.zeros(num_sections + 1, dtype=np.bool_)
    noted = np.zeros(count, dtype=np.int64)  # stamps start at 1
    persist = np.empty(count, dtype=np.int64)
    incremental = open_floor.shape[0] == total.shape[0]  # see SCAN_SECTIONS
    smallest = size.min() if count else 1  # below this slack a section's lowest buffer is alone there
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
            if rank_top + count > rank_trail.shape[1]:
                spent -= 1
                status = TRAIL_FULL
                break
            level[_RANK_MARK, depth] = rank_top
            # Settle the scope: finish solved pieces, open a split where the problem fell apart.
            while True:
                lo, hi = _scope(frame, piece, frames, num_sections)
                lowest_top = _lowest_top(start_ptr, by_start, size, offset, min_offset, lo, hi)
                if lowest_top == INFINITY:  # this piece is solved: on to the next one
                    frames = _finish_piece(frame, frames, depth)
                elif _new_cuts(section_lo, section_hi, cuts, level, depth, lo, hi) > 0:
                    frames = _open_split(start_ptr, by_start, offset, cuts, frame, piece, frames, depth, lo, hi)
                    rank_top = _rank_pieces(start_ptr, by_start, size, width, section_lo, section_hi, letters, jitter,
                                            offset, total, piece, rank, rank_trail, rank_top,
                                            frame[_FIRST_PIECE, frames - 1], frame[_PIECES, frames - 1])  # fmt: skip
                else:
                    break
            _open_level(level, frame, frames, depth, lowest_top)
            if backjump:
                conflict[depth, :] = 0
            phase = _ADVANCE
            continue

        # _ADVANCE: place the next candidate at `depth`, in (minimum offset, rank) order.
        lo, hi = _scope(frame, piece, frames, num_sections)
        chosen, chosen_offset, chosen_rank = _next_candidate(
            start_ptr, by_start, rank, offset, min_offset, level, depth, lo, hi
        )
        if chosen < 0 or chosen_offset >= level[_MIN_HEIGHT, depth] or level[_LAST_ALONE, depth]:
            # Nothing left to try here: back up, past a whole split when one of its pieces failed
            # (the other pieces' alternatives cannot help it), and when backjumping, past every
            # placement that no failure below was blamed on.
            failed = depth
            target = depth - 1
            if backjump:
                blamed = _latest_blamed(conflict, depth)
                if blamed >= 0:
                    target = blamed
            while True:
                while frames > 0 and depth == frame[_PIECE_START, frames - 1]:
                    while depth > frame[_BASE, frames - 1]:
                        depth -= 1
                        offset_top, section_top = _undo(size, section_lo, section_hi, offset, min_offset, floor,
                                                        total, open_floor, cuts, level, offset_trail, offset_top,
                                                        section_trail, section_top, depth)  # fmt: skip
                    frames -= 1
                if depth == 0:
                    status = GAVE_UP if backjump else EXHAUSTED
                    break
                depth -= 1
                offset_top, section_top = _undo(size, section_lo, section_hi, offset, min_offset, floor, total,
                                                open_floor, cuts, level, offset_trail, offset_top, section_trail,
                                                section_top, depth)  # fmt: skip
                # The orders given to pieces opened below this depth go with them.
                rank_top = _restore_ranks(rank, rank_trail, rank_top, level[_RANK_MARK, depth + 1])
                if depth <= target:
                    break
            if backjump and status == 0:
                _merge_conflicts(conflict, failed, depth)
            continue
        if (
            section_top + (section_hi[chosen] - section_lo[chosen]) + 2 * num_sections > section_trail.shape[1]
            or offset_top + neighbour_ptr[chosen + 1] - neighbour_ptr[chosen] + count > offset_trail.shape[1]
        ):
            status = TRAIL_FULL  # the caller makes room; the placement is tried again then
            break

        spent += 1
        level[_KEY_OFFSET, depth] = chosen_offset
        level[_KEY_RANK, depth] = chosen_rank
        level[_BUFFER, depth] = chosen
        level[_OFFSET_MARK, depth] = offset_top
        level[_SECTION_MARK, depth] = section_top
        offset[chosen] = chosen_offset
        stamp += 1
        affected, offset_top = _raise_neighbours(size, section_lo, section_hi, neighbour_ptr, neighbour_idx, offset,
                                                 min_offset, floor, scratch, mark, offset_trail, offset_top, stamp,
                                                 chosen)  # fmt: skip
        section_top = _cover_sections(size, section_lo, section_hi, offset, floor, total, cuts, section_trail,
                                      section_top, chosen)  # fmt: skip
        section_top = _lift_floors(member_ptr, member_idx, offset, min_offset, floor, scratch, section_trail,
                                   section_top, affected)  # fmt: skip
        if incremental:
            _refresh_open_floors(open_floor, floor, total, section_trail, level[_SECTION_MARK, depth], section_top)
        # Raised nobody: every unplaced neighbour already starts above it, so in any completion it
        # could sit where it is now; if no packing follows, none follows any later candidate here.
        level[_LAST_ALONE, depth] = offset_top == level[_OFFSET_MARK, depth]
        failing = -2  # -2: the symmetry rule or its top refused it; a section: inference failed there; -1: none
        shared = False  # section or schedule inference refused it (see _untouched below)
        if not _stacked_out_of_order(section_lo, section_hi, neighbour_ptr, neighbour_idx, size, first_rank, top,
                                     offset, chosen, chosen_offset):  # fmt: skip
            failing = _overflowing_section(section_lo, section_hi, capacity, least_capacity, floor, total, scratch,
                                           chosen, chosen_offset, affected, lo, hi)  # fmt: skip
            shared = failing >= 0
            if failing < 0 and chosen_offset + size[chosen] > top[chosen]:
                # Ends above its own top, below its sections' capacity (at an alignment only):
                # refused on its own, as by symmetry, and blamed on what raised it.
                failing = -2
            elif failing < 0:
                checked, listed_count = changed_sections(open_floor, incremental, floor, mark, stamp, scratch, affected,
                                                         lo, hi, chosen_offset, listed, spare, changed)  # fmt: skip
                failing = unschedulable_section(member_ptr, member_idx, size, lift, top, capacity, low_capacity, offset,
                                                min_offset, floor, rank, chosen_offset, chosen_rank, release, length,
                                                changed, checked)  # fmt: skip
                shared = failing >= 0
            if failing == -1 and (
                not incremental or depth == 0 or (frames > 0 and frame[_PIECE_START, frames - 1] == depth)
            ):
                # A new scope: its runs of sections may differ from the parent's, so all are checked.
                failing = uncoverable_section(section_hi, member_ptr, member_idx, by_start, start_ptr, lift,
                                              smallest, offset, min_offset, floor, total, rank, capacity,
                                              chosen_offset, chosen_rank, reach, lo, hi)  # fmt: skip
            elif failing == -1:
                seeds = cover_seeds(section_trail, level[_SECTION_MARK, depth], section_top, scratch, affected, listed,
                                    listed_count, floor, level[_KEY_OFFSET, depth - 1], smallest, lo, hi, seen, stamp,
                                    spare)  # fmt: skip
                failing = uncoverable_near(section_hi, member_ptr, member_idx, by_start, start_ptr, lift, smallest,
                                           offset, min_offset, floor, total, rank, capacity, chosen_offset,
                                           chosen_rank, reach, spare, seeds, lo, hi)  # fmt: skip
        if failing == -1:
            # Start propagation from the sections whose starts may have changed (all of a new scope).
            seed_count = checked
            if depth == 0 or (frames > 0 and frame[_PIECE_START, frames - 1] == depth):
                seed_count = hi - lo
                changed[:seed_count] = np.arange(lo, hi)
            failing, persisted = unpropagatable_section(member_ptr, member_idx, section_lo, section_hi, by_start,
                                                        start_ptr, size, lift, top, capacity, offset, min_offset, floor,
                                                        total, rank, chosen_offset, chosen_rank, raised, finish, fresh,
                                                        stamp, jobs, by_finish, queue, queued, changed, seed_count, lo,
                                                        hi, PROPAGATION_VISITS * (hi - lo), noted, persist)  # fmt: skip
            if failing == -1 and persisted > 0:
                stamp += 1
                lifted, offset_top = _keep_raised_starts(section_lo, section_hi, rank, min_offset, floor, raised,
                                                         persist, persisted, chosen_offset, chosen_rank, scratch,
                                                         mark, stamp, offset_trail, offset_top)  # fmt: skip
                before = section_top
                section_top = _lift_floors(member_ptr, member_idx, offset, min_offset, floor, scratch, section_trail,
                                           section_top, lifted)  # fmt: skip
                if incremental:
                    _refresh_open_floors(open_floor, floor, total, section_trail, before, section_top)
        if failing == -1:
            placed_at[chosen] = depth
            depth += 1
            if depth > ctl[_DEEPEST]:
                ctl[_DEEPEST] = depth
                deepest[:] = offset
            phase = _ENTER
        else:
            if backjump:
                _blame(neighbour_ptr, neighbour_idx, member_ptr, member_idx, offset, placed_at, conflict, depth,
                       chosen, failing)  # fmt: skip
            if shared and _untouched(section_lo, section_hi, offset_trail, level[_OFFSET_MARK, depth], offset_top,
                                     chosen, failing):  # fmt: skip
                level[_LAST_ALONE, depth] = 1  # every later candidate here fails there too
            offset_top, section_top = _undo(size, section_lo, section_hi, offset, min_offset, floor, total,
                                            open_floor, cuts, level, offset_trail, offset_top, section_trail,
                                            section_top, depth)  # fmt: skip

    ctl[_DEPTH] = depth
    ctl[_PHASE] = phase
    ctl[_FRAMES] = frames
    ctl[_OFFSET_TOP] = offset_top
    ctl[_SECTION_TOP] = section_top
    ctl[_STAMP] = stamp
    ctl[_RANK_TOP] = rank_top
    ctl[_WORK] += spent
    return status
