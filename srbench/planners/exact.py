"""The exact planner: the smallest slab for a set of records, proven when time allows.

It starts from the best plan of the fast heuristics (``best``: greedy by size with every
tie-break, and the rest), so it never returns a larger plan than any of them, then searches for
smaller ones with the depth-first search of :mod:`srbench.planners._exact_search` (MiniMalloc's
method, compiled with numba). That search answers a decision question, "does everything fit within C
bytes?", and prunes well only when C is tight, so this driver asks it at the lower bound first
and steps up from there: capacities on a ladder between the best proven bound and the best plan
so far, each searched with MiniMalloc's three static orders and with two families of randomised
orders restarted on the Luby schedule (see :class:`_Restarts` and :data:`RESTART_FAMILIES`; at
tight capacities one family backjumps, which finds packings sooner and proves nothing, and
neighbourhoods of the deepest partial packing it reaches are searched again, see
:class:`_Neighbourhoods`), all
interleaved under one time limit, the proven bound getting as much work as the rest together. A
complete search that finishes without a packing proves that no total up to its capacity exists; one that
finds a packing lowers the best plan. At an alignment, only the totals a plan can have (a multiple
of it plus one of the sizes' remainders, :class:`Totals`) are searched and proven. Given a
``capacity``, the driver asks the search that one question instead (see :func:`plan`).

``proven_optimal`` is True only when the best plan's total equals a proven bound (the lower
bound, or one more than a capacity proven infeasible). Otherwise ``notes`` say how far apart
the plan and the proven bound are (``gap``), so a time-limited answer is never mistaken for an
optimum. ``notes`` also carry ``lower_bound``, ``proven_lower_bound``, ``start_total`` and
``start_planner`` (the heuristic it started from), ``progress`` (seconds since the call and the
best total, at each improvement), ``search_steps`` (nodes entered plus placements tried),
``seconds``, ``stopped`` ("optimal", "capacity met", "time limit" or "too large to search"), and
with a ``capacity``, ``capacity`` and ``capacity_met``.

The time limit counts from the call to the return, the starting plan included: the heuristics
get half of it (all of it when nothing will be searched), the first always running and each
later one only if it is expected to finish in time (``notes["skipped_heuristics"]`` names the
others). Memory stays bounded: a partition whose neighbour and section lists would pass
:data:`MAX_SEARCH_ENTRIES` entries is not searched (its heuristic offsets stay, and ``stopped``
says "too large to search" when it is what keeps the plan from being proven); at 100,000
inference-like tensors that is the whole graph, and a search there could not finish anyway.
The first call in a process compiles the numba cores (several seconds on a cold cache, then
loaded from numba's cache on disk) before its clock starts: that one-time cost is outside the limit.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners import best as fast_heuristics
from srbench.planners._exact_search import (
    EXHAUSTED,
    FOUND,
    GAVE_UP,
    PREORDERINGS,
    SWEEP_ORDERS,
    Partition,
    SearchState,
    build_partition,
    conflict_entries,
    search_entries,
    time_groups,
)
from srbench.planners._placement import aligned_peak, as_table, live_peak, plan_from_offsets

NAME = "exact"
DEFAULT_TIME_LIMIT = 60.0
# Where the capacities of one ladder sit between the proven bound and the best plan, in 1/32nds
# of the gap: the bound itself (most graphs have a packing there, and only tight capacities
# prune well), a few just above it, and a few just below the best plan (easy improvements).
LADDER_STEPS = (0, 1, 4, 8, 16, 24, 28)
LADDER_DENOMINATOR = 32
# Restarted searches: the first restart's work (later ones follow the Luby sequence), and how far
# the random factors on a static order's keys reach.
RESTART_WORK = 2000
JITTER = 0.3
# The families of orders restarted, each its own stream of restarts, the work each stream gets
# per unit given to one static order, and whether it backjumps: MiniMalloc's orders (its three
# static ones do best on its own instances, restarted ones add a little), and the ones filling
# each offset from one end of time to the other (see SWEEP_ORDERS), which alone find packings of
# generated instances packed near the capacity, and only when restarted: they get half of all the
# work, as much as MiniMalloc's orders together, and backjump at the capacity asked and at the
# proven bound (see _Minimizer.advance). Backjumping in MiniMalloc's orders found one of nine
# failing seeds in 2M steps where the sweeping orders found three; at 2/3 of the work instead of
# half, the sweeping orders fit none more of ten in 10 s; split into a chronological stream and a
# backjumping one (same orders and random factors), 39 of seeds 0-49 fit instead of 40.
RESTART_FAMILIES = ((PREORDERINGS, 0.5, False), (SWEEP_ORDERS, len(PREORDERINGS) + 0.5, True))
# Neighbourhoods of the deepest partial packing (see _Neighbourhoods), searched where the sweeping
# orders backjump, with as much work as they get: the share of the time-window each frees (of
# the partition's sections), and the work each neighbourhood gets before another is drawn.
NEIGHBOURHOOD_SHARE = len(PREORDERINGS) + 0.5
NEIGHBOURHOOD_WINDOW = 0.1
NEIGHBOURHOOD_WORK = 10 * RESTART_WORK
# Work (nodes entered plus placements tried) each capacity and order gets in the first round;
# doubled every round. Tight capacities cost more per unit, loose ones find packings quickly.
FIRST_ROUND_WORK = 4096
# The compiled search works in int64: slabs beyond this (only hand-made records get there) are
# left as the heuristics planned them, unproven.
SEARCH_LIMIT_BYTES = 2**60
# Wall-clock seconds one call into the compiled search aims at, so the time limit is kept.
SLICE_SECONDS = 0.02
# The share of the time limit the starting heuristics may take when a search follows.
START_SHARE = 0.5
# Entries (8 bytes each) of a backjumping search's conflict sets, one bit per depth at each
# depth, so quadratic in the buffers: beyond this (about 8,100 buffers, 8 MB) a partition's
# restarted searches stay chronological.
MAX_CONFLICT_ENTRIES = 1 << 20
# Neighbour plus section-list entries of one partition (8 bytes each) beyond which it is not
# searched: 8M entries are 64 MB, 10,000 inference-like tensors need under 1M.
MAX_SEARCH_ENTRIES = 8_000_000


@dataclass
class _Incumbent:
    """The best packing known for one partition (from the heuristics, then from the search)."""

    total: int
    offsets: np.ndarray


class _Restarts:
    """Searches in randomised static orders, each restarted after a budget from the Luby sequence
    (Luby, Sinclair and Zuckerman 1993), for the heavy tail of backtracking search (Gomes, Selman
    and Kautz 1998): on these instances a search either finds a packing within a few thousand
    steps or wanders for millions, and which one depends on the order. Each restart uses one of
    ``orders`` in turn with its keys scaled by random factors in [1 - JITTER, 1 + JITTER], from a
    generator seeded per partition, capacity and family of orders, so a plan depends on the
    records only. A backjumping search that runs out of alternatives (GAVE_UP) proves nothing
    and is restarted at once."""

    def __init__(
        self,
        part: Partition,
        capacity: int,
        orders: tuple[str, ...],
        share: float,
        backjump: bool,
        starts: np.ndarray | None = None,
    ):
        self.part, self.capacity, self.orders = part, capacity, orders
        self.backjump = backjump
        self.starts = starts  # lowest offsets (units) where a packing of other buffers lies below
        self.share = share  # work per unit given to one static order
        family = [ord(letter) for letter in "".join(orders)]
        self.rng = np.random.default_rng([capacity, part.size.shape[0], int(part.size.sum()), *family])
        self.restarts = 0
        self.state = self._next()
        self.left = RESTART_WORK
        self.steps = 0
        self.status = self.state.status
        self.depth = 0  # the deepest node any restart entered, and its partial packing (units)
        self.partial = np.full(part.size.shape[0], -1, dtype=np.int64)

    def _next(self) -> SearchState:
        order = self.orders[self.restarts % len(self.orders)]
        jitter = self.rng.uniform(1 - JITTER, 1 + JITTER, size=int(self.part.size.shape[0]))
        return SearchState(self.part, self.capacity, order, jitter, self.backjump, self.starts)

    @property
    def done(self) -> bool:
        return self.status in (FOUND, EXHAUSTED)

    def run(self, budget: int) -> int:
        before = self.state.steps
        self.status = self.state.run(min(budget, self.left))
        spent = self.state.steps - before
        self.steps += spent
        self.left -= spent
        if self.state.depth > self.depth:
            self.depth, self.partial = self.state.depth, self.state.deepest()
        if not self.done and (self.left <= 0 or self.status == GAVE_UP):
            self.restarts += 1
            self.state = self._next()
            self.left = RESTART_WORK * _luby(self.restarts + 1)
        return self.status

    def offsets(self) -> np.ndarray:
        return self.state.offsets()


class _Neighbourhoods:
    """Large neighbourhood search (Shaw, "Using constraint programming and local search methods
    to solve vehicle routing problems", CP 1998) from the deepest partial packing the restarted
    sweeping searches (``source``) have reached, or the deepest a neighbourhood has reached once
    it holds more buffers (an improved solution is kept and searched on): a random window of time,
    a tenth of the partition's sections, is freed with every buffer placed on a freed one, the rest of that
    partial packing is kept where it is, and the buffers left (those freed and those never placed)
    are searched with restarts of the sweeping orders, each no lower than the kept buffers below it
    (``SearchState``'s ``starts``), for NEIGHBOURHOOD_WORK steps; then another window is drawn.
    The restarts from scratch go wrong low and find out high; here most of the low part is kept
    and the search near the failure starts over. A packing found is the kept placements and the
    neighbourhood's together: no buffer overlaps a kept one below it, so it is valid (the driver's
    plan is checked as every plan is); a neighbourhood proves nothing."""

    def __init__(self, part: Partition, capacity: int, source: _Restarts):
        self.part, self.capacity, self.source = part, capacity, source
        self.share = NEIGHBOURHOOD_SHARE
        self.rng = np.random.default_rng([capacity, part.size.shape[0], int(part.size.sum()), 0x4C4E53])
        self.searches: list[tuple[np.ndarray, _Restarts]] = []  # (its buffers, its search) per piece left
        self.kept = np.full(part.size.shape[0], -1, dtype=np.int64)
        self.found = np.full(part.size.shape[0], -1, dtype=np.int64)
        # The deepest partial packing a neighbourhood reached, its kept placements included (units,
        # -1 where unplaced), and how many buffers it holds.
        self.partial = np.full(part.size.shape[0], -1, dtype=np.int64)
        self.depth = 0
        self.left = 0
        self.steps = 0
        self.status = 0

    @property
    def done(self) -> bool:
        return self.status == FOUND

    def _deepest(self) -> tuple[int, np.ndarray]:
        """The current neighbourhood's deepest partial packing (units): the kept placements, the
        pieces that fit, and the deepest partial packing of each piece left; and how many it holds."""
        partial = self.found.copy()
        for buffers, search in self.searches:
            partial[buffers] = search.partial
        return int((partial >= 0).sum()), partial

    def _draw(self) -> None:
        """Free a window of the deepest partial packing and set up the searches of what is left.
        The partial packing is the deepest known: the sweeping searches', or one a neighbourhood
        reached (LNS keeps an improved solution and searches its neighbourhoods next)."""
        reached, partial = self._deepest()
        if reached > self.depth:
            self.depth, self.partial = reached, partial
        part = self.part
        partial = self.partial if self.depth > self.source.depth else self.source.partial
        width = max(1, int(part.num_sections * NEIGHBOURHOOD_WINDOW))
        lo = int(self.rng.integers(0, part.num_sections - width + 1))
        placed = partial >= 0
        freed = placed & (part.section_lo < lo + width) & (part.section_hi > lo)
        tops = partial + part.size
        grown = freed
        while grown.any():  # what sits on a freed buffer would float: it is freed too
            above = np.zeros_like(freed)
            for buffer in np.flatnonzero(grown):
                together = (part.section_lo < part.section_hi[buffer]) & (part.section_hi > part.section_lo[buffer])
                above |= together & (partial >= tops[buffer])
            grown = above & placed & ~freed
            freed |= grown
        kept = placed & ~freed
        self.kept = np.where(kept, partial, -1)
        left = np.flatnonzero(~kept)
        starts = np.zeros(left.shape[0], dtype=np.int64)
        for index, buffer in enumerate(left):
            below = kept & (part.section_lo < part.section_hi[buffer]) & (part.section_hi > part.section_lo[buffer])
            starts[index] = tops[below].max(initial=0)
        first, last = part.section_lo[left], part.section_hi[left] - 1
        sizes = part.size_bytes[left]
        self.searches = []
        for group in time_groups(first, last):
            piece = build_partition(group, first, last, sizes, part.alignment)
            search = _Restarts(piece, self.capacity, SWEEP_ORDERS, self.share, True, starts[group])
            self.searches.append((left[group], search))
        self.found = self.kept.copy()
        self.left = NEIGHBOURHOOD_WORK

    def run(self, budget: int) -> int:
        """Search the current neighbourhood for up to ``budget`` steps (none before the sweeping
        searches have placed anything): FOUND once every piece of it fits."""
        if self.done or self.source.depth == 0:
            return self.status
        if self.left <= 0 or not self.searches:
            self._draw()
        while self.searches and budget > 0 and self.left > 0:
            buffers, search = self.searches[0]
            before = search.steps
            status = search.run(min(budget, self.left))
            spent = max(search.steps - before, 1)
            self.steps += spent
            budget -= spent
            self.left -= spent
            if status == EXHAUSTED:  # no packing above what is kept: draw another window
                self.left = 0
            elif status == FOUND:
                self.found[buffers] = search.state.progress.offset
                self.searches.pop(0)
        if not self.searches:
            self.status = FOUND
        return self.status

    def offsets(self) -> np.ndarray:
        return self.found * self.part.alignment


def _luby(index: int) -> int:
    """The ``index``-th term (from 1) of the Luby sequence 1, 1, 2, 1, 1, 2, 4, 1, ..."""
    while True:
        k = index.bit_length()  # 2**(k-1) <= index < 2**k
        if index == (1 << k) - 1:
            return 1 << (k - 1)
        index -= (1 << (k - 1)) - 1


@dataclass(frozen=True)
class Totals:
    """The totals a plan can have at an alignment: a plan ends where one of its buffers does, at
    ``k a + s`` for a buffer of ``s`` bytes, so its total is one of the buffers' ``s mod a``
    (``a`` where that is 0) above a multiple of ``a``. The minimiser searches only capacities
    that are such totals (a search within any other decides the question of the one just below
    it: Partition.tops depends on which buffers' remainders fit, nothing more), and a capacity
    proven out of reach raises the proven bound to the next such total, not a byte at a time (at
    alignment 1, every number is a total and nothing changes)."""

    alignment: int
    remainders: np.ndarray  # the distinct s mod a of the buffers (a for 0), ascending

    @classmethod
    def of(cls, sizes: np.ndarray, alignment: int) -> Totals:
        """The totals of plans of buffers of ``sizes`` bytes (all positive)."""
        return cls(alignment, np.unique((sizes - 1) % alignment + 1))

    def at_least(self, total: int) -> int:
        """The smallest total a plan can have from ``total`` up."""
        if not self.remainders.size:
            return total
        step = self.alignment
        return int((-(-(total - self.remainders) // step) * step + self.remainders).min())

    def at_most(self, total: int) -> int:
        """The largest total a plan can have up to ``total``."""
        if not self.remainders.size:
            return total
        step = self.alignment
        return int(((total - self.remainders) // step * step + self.remainders).max())


@dataclass
class _Attempt:
    """The search for a packing within ``capacity``: per partition, one resumable search per
    static order and one of restarted, randomised ones."""

    capacity: int
    states: dict[int, list[SearchState | _Restarts | _Neighbourhoods]] = field(default_factory=dict)


class _Minimizer:
    def __init__(
        self,
        parts: list[Partition],
        incumbents: list[_Incumbent],
        fixed: int,
        bound: int,
        totals: Totals,
        clock: Callable[[], float],
        started: float,
        deadline: float,
        target: int | None = None,
    ):
        self.parts = parts
        self.target = target  # stop at the first plan within it; None: minimise
        self.incumbents = incumbents
        self.fixed = fixed  # the largest total among the partitions not searched
        self.totals = totals
        self.proven = totals.at_least(bound)  # no packing smaller than this exists
        self.clock = clock
        self.deadline = deadline
        self.steps = 0
        self.slice_steps = 1024
        self.started = started
        self.progress: list[tuple[float, int]] = []  # (seconds since the call, best total) on each improvement

    @property
    def best(self) -> int:
        return max([self.fixed, *(incumbent.total for incumbent in self.incumbents)])

    @property
    def floor(self) -> int:
        """The lowest capacity worth searching: the proven bound, or what the unsearched keep."""
        return max(self.proven, self.fixed)

    def out_of_time(self) -> bool:
        return self.clock() >= self.deadline

    @property
    def reached_target(self) -> bool:
        return self.target is not None and self.best <= self.target

    def ladder(self) -> list[int]:
        """Capacities to search between the floor and the best plan, lowest first: only the
        target while it may still be met (every unit of work then goes to the question asked)."""
        if self.target is not None and self.floor <= self.target < self.best:
            return [self.target]
        gap = self.best - self.floor
        capacities = {
            self.totals.at_most(self.floor + gap * numerator // LADDER_DENOMINATOR) for numerator in LADDER_STEPS
        }
        return sorted(capacity for capacity in capacities if capacity < self.best)

    def solve(self) -> None:
        attempts: dict[int, _Attempt] = {}
        built_for = None
        round_work = FIRST_ROUND_WORK
        while self.best > self.floor and not self.reached_target and not self.out_of_time():
            if built_for != (self.floor, self.best):
                # When the bounds move, searches at capacities still between them keep their
                # progress; the ladder's new capacities join them.
                attempts = {c: a for c, a in attempts.items() if self.floor <= c < self.best}
                for capacity in self.ladder():
                    attempts.setdefault(capacity, _Attempt(capacity))
                built_for = (self.floor, self.best)
            others = sum(self.floor < capacity < self.best for capacity in attempts)
            for capacity in sorted(attempts):
                attempt = attempts[capacity]
                if not self.floor <= capacity < self.best:
                    continue
                # The proven bound gets as much work as all the others together: most inputs
                # have a packing there, and only that search can prove a plan optimal.
                budget = round_work * max(others, 1) if capacity == self.floor else round_work
                if self.advance(attempt, budget) == EXHAUSTED:
                    self.proven = max(self.proven, self.totals.at_least(capacity + 1))
                if self.best <= self.floor or self.reached_target or self.out_of_time():
                    return
            round_work *= 2

    def advance(self, attempt: _Attempt, budget: int) -> int | None:
        """Search ``attempt`` a little further; EXHAUSTED if it proved the capacity infeasible,
        FOUND once every partition fits, None while undecided."""
        for index, part in enumerate(self.parts):
            if self.incumbents[index].total <= attempt.capacity:
                continue
            if index not in attempt.states:
                # Backjumping where the capacity is tight: the one asked, or the proven bound (most
                # inputs have a packing there). At looser capacities of the ladder the chronological
                # searches found packings it missed: minimising MiniMalloc's D (bound 0.94 of its
                # capacity), backjumping everywhere ended at 1.065 of the capacity instead of 1.004.
                tight = attempt.capacity in (self.target, self.floor) and conflict_entries(part) <= MAX_CONFLICT_ENTRIES
                restarts = [
                    _Restarts(part, attempt.capacity, orders, share, backjump and tight)
                    for orders, share, backjump in RESTART_FAMILIES
                ]
                states: list[SearchState | _Restarts | _Neighbourhoods] = [
                    *(SearchState(part, attempt.capacity, order) for order in PREORDERINGS),
                    *restarts,
                ]
                if tight:  # from the deepest partial packing of the sweeping orders (the last family)
                    states.append(_Neighbourhoods(part, attempt.capacity, restarts[-1]))
                attempt.states[index] = states
            for state in attempt.states[index]:
                status = self.run(state, budget if isinstance(state, SearchState) else int(budget * state.share))
                if status == EXHAUSTED:
                    return EXHAUSTED
                if status == FOUND:
                    offsets = state.offsets()
                    self.incumbents[index] = _Incumbent(int((offsets + part.size_bytes).max()), offsets)
                    if not self.progress or self.best < self.progress[-1][1]:
                        self.progress.append((round(self.clock() - self.started, 3), self.best))
                    break
                if self.out_of_time():
                    return None
            if self.incumbents[index].total > attempt.capacity:
                return None
        return FOUND

    def run(self, state: SearchState | _Restarts | _Neighbourhoods, budget: int) -> int:
        """Run ``state`` for ``budget`` steps in slices short enough to keep the deadline."""
        status = state.status
        while budget > 0 and not state.done and not self.out_of_time():
            steps = min(budget, self.slice_steps)
            before, started = state.steps, self.clock()
            status = state.run(steps)
            elapsed = self.clock() - started
            # What was spent, not what was asked: a restarted search stops early at each restart,
            # and counting the whole slice there once gave the restarts a fraction of their share.
            spent = state.steps - before
            if spent == 0:
                break  # a neighbourhood search with no partial packing to start from yet
            budget -= spent
            self.steps += spent
            if elapsed > 0 and spent > 0:
                self.slice_steps = int(min(max(spent * SLICE_SECONDS / elapsed, 64), 1 << 22))
        return status


@cache
def compile_search() -> None:
    """Compile (or load from numba's cache) the search and the starting heuristics, once per
    process: :func:`plan` calls it before its clock starts (on a cold cache, compiling inside the
    first call took 27 s of a 10 s limit and left MiniMalloc's instance A at the heuristics'
    1.28x, where a warm call fits it in 0.5 s), and benchmarks call it first so that no
    measurement pays it. A plan
    of small records would not do: the search is never entered when the heuristics already plan
    them optimally, and a heuristic is skipped when the ones before it (compiling) used up the
    time, which left linear scan's cores to be compiled inside the first measured call (3 s of
    the 4 s seed 0 took on a cold cache, instead of 0.9 s)."""
    # Three tensors alive together, the lower bound at 3, asked to fit 3 bytes: a decision.
    first, last, size = (np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64), np.ones(3, dtype=np.int64))
    part = build_partition(np.arange(3), first, last, size)
    SearchState(part, 3, PREORDERINGS[0], np.ones(3)).run(100)
    records = [TensorUsageRecord(f"t{index}", index % 3, index % 3 + 2, 64 * (index + 1)) for index in range(8)]
    fast_heuristics.run_candidates(records, alignment=DEFAULT_ALIGNMENT, planner=NAME)  # every one, no deadline


def seconds_to_reach(notes: Mapping[str, Any], total: int) -> float | None:
    """When an exact plan's best total first came within ``total`` bytes, in seconds since the
    call (0 when its starting plan already did); None if it never did."""
    if notes["start_total"] <= total:
        return 0.0
    return next((seconds for seconds, best in notes["progress"] if best <= total), None)


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    time_limit: float = DEFAULT_TIME_LIMIT,
    capacity: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> MemoryPlan:
    """The smallest total found within ``time_limit`` seconds, never more than any fast heuristic's.

    ``capacity`` (bytes) asks the decision question instead, as MiniMalloc is asked: a plan
    within it, returned as soon as one is found (the heuristics' plan when it already fits).
    Every unit of search goes to that capacity while it may be met; once it is proven out of
    reach (the lower bound is above it, or the search exhausted it), the rest of the time
    minimises as without it. ``notes["capacity_met"]`` says whether the plan fits it.

    ``clock`` is what the limit and the times in ``notes`` are measured on: wall-clock time by
    default; ``time.process_time`` makes the limit one of CPU time, which is what compares
    searches on a machine shared with other work (the benchmarks use it there)."""
    # Finite: an infinite limit would let a search at a capacity it cannot meet run forever, and
    # would reach notes (and JSON reports) as inf; a long search is asked for in seconds.
    if not isinstance(time_limit, (int, float)) or isinstance(time_limit, bool) or not 0 < time_limit < math.inf:
        raise ValueError(f"time_limit must be a positive, finite number of seconds, got {time_limit!r}")
    if capacity is not None and (
        not isinstance(capacity, (int, np.integer)) or isinstance(capacity, bool) or capacity <= 0
    ):
        raise ValueError(f"capacity must be a positive number of bytes, got {capacity!r}")
    compile_search()
    started = clock()
    deadline = started + time_limit
    table = as_table(records)
    footprints = table.footprint(alignment)  # refuses records beyond an int64 slab
    placed = np.flatnonzero(table.size > 0)
    first, last, size = table.first[placed], table.last[placed], table.size[placed]
    groups = time_groups(first, last) if placed.shape[0] else []
    searchable = [
        int(footprints[placed[group]].sum()) < SEARCH_LIMIT_BYTES
        and search_entries(first[group], last[group]) <= MAX_SEARCH_ENTRIES
        for group in groups
    ]
    start = fast_heuristics.run_candidates(
        table,
        alignment=alignment,
        planner=NAME,
        deadline=started + time_limit * (START_SHARE if any(searchable) else 1.0),
        clock=clock,
    )
    offsets = np.array([start.offsets[name] for name in table.ids], dtype=np.int64)
    fixed = max((int((offsets[placed[g]] + size[g]).max()) for g, s in zip(groups, searchable) if not s), default=0)
    parts = [build_partition(group, first, last, size, alignment) for group, s in zip(groups, searchable) if s]
    incumbents = [
        _Incumbent(int((offsets[placed[p.buffer_ids]] + p.size_bytes).max()), offsets[placed[p.buffer_ids]])
        for p in parts
    ]
    bound = live_peak(table, table.size)
    totals = Totals.of(size, alignment)
    minimizer = _Minimizer(parts, incumbents, fixed, aligned_peak(table, alignment), totals, clock, started, deadline,
                           capacity)  # fmt: skip
    minimizer.solve()
    for part, incumbent in zip(parts, minimizer.incumbents):
        offsets[placed[part.buffer_ids]] = incumbent.offsets
    best, proven = minimizer.best, minimizer.proven
    if best <= proven:
        stopped = "optimal"
    elif minimizer.reached_target:
        stopped = "capacity met"
    else:
        stopped = "too large to search" if best <= fixed else "time limit"
    notes: dict[str, object] = {
        "lower_bound": bound,
        "proven_lower_bound": min(proven, best),
        "gap": (best - proven) / proven if proven and best > proven else 0.0,
        "start_total": start.total_bytes,
        "start_planner": start.notes["winner"],
        "search_steps": minimizer.steps,
        "progress": minimizer.progress,
        "seconds": round(clock() - started, 3),
        "stopped": stopped,
        "time_limit": time_limit,
    }
    if capacity is not None:
        notes["capacity"] = int(capacity)
        notes["capacity_met"] = best <= capacity
    if "skipped" in start.notes:
        notes["skipped_heuristics"] = start.notes["skipped"]
    return dataclasses.replace(plan_from_offsets(NAME, table, offsets, **notes), proven_optimal=best <= proven)
