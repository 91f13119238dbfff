"""The interval structures behind the heuristics (srbench.planners._intervals), checked against
brute force: the lifetime index against a scan of every pair, the occupancy structure against
the union of the placed intervals, and best fit against the quadratic scan it replaced."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srbench.memory.records import RecordError, align_up
from srbench.memory.records import TensorUsageRecord as R
from srbench.planners import greedy_by_breadth, greedy_by_size, linear_scan, naive
from srbench.planners._intervals import (
    build_lifetime_index,
    coordinates,
    occupy,
    taken_offsets,
    tightest_gap,
)
from srbench.planners._placement import RecordTable, place_best_fit

EXAMPLES = settings(max_examples=60, deadline=None)


@st.composite
def lifetimes(draw, max_records=30):
    count = draw(st.integers(1, max_records))
    first = [draw(st.integers(0, 20)) for _ in range(count)]
    last = [start + draw(st.integers(0, 8)) for start in first]
    return np.array(first, dtype=np.int64), np.array(last, dtype=np.int64)


def overlap(first, last, i, j):
    return first[i] <= last[j] and first[j] <= last[i]


@EXAMPLES
@given(spans=lifetimes(), data=st.data())
def test_the_lifetime_index_lists_exactly_the_wanted_overlapping_records(spans, data):
    first, last = spans
    index = build_lifetime_index(first, last)
    wanted = np.array(data.draw(st.lists(st.booleans(), min_size=len(first), max_size=len(first))))
    for record in range(len(first)):
        found = index.overlapping(record, wanted).tolist()
        assert len(found) == len(set(found))  # nobody twice
        expected = {j for j in range(len(first)) if wanted[j] and overlap(first, last, record, j)}
        assert set(found) == expected


def union(intervals):
    """Sorted disjoint union of [start, end) intervals, touching ones merged."""
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [tuple(piece) for piece in merged]


@EXAMPLES
@given(spans=lifetimes(), data=st.data())
def test_the_occupancy_structure_returns_the_union_of_the_overlapping_placed_intervals(spans, data):
    first, last = spans
    count = len(first)
    lo, hi, half = coordinates(first, last)
    base, taken, capacity = (np.zeros(4 * half, dtype=np.int64) for _ in range(3))
    pool = np.empty((2, 8), dtype=np.int64)  # tiny: the pool has to grow
    used = np.zeros(1, dtype=np.int64)
    starts, ends = (np.empty(2 * count, dtype=np.int64) for _ in range(2))
    runs = np.empty(4 * 64 + 2, dtype=np.int64)
    placed: dict[int, tuple[int, int]] = {}
    for record in data.draw(st.permutations(range(count))):
        pieces, _ = taken_offsets(lo, hi, half, base, taken, pool, record, starts, ends, runs)
        expected = union(interval for j, interval in placed.items() if overlap(first, last, record, j))
        assert union(zip(starts[:pieces].tolist(), ends[:pieces].tolist())) == expected
        start = data.draw(st.integers(0, 200))
        end = start + data.draw(st.integers(1, 50))
        while not occupy(lo, hi, half, base, taken, capacity, pool, used, record, start, end):
            bigger = np.empty((2, 2 * pool.shape[1]), dtype=np.int64)
            bigger[:, : used[0]] = pool[:, : used[0]]
            pool = bigger
        placed[record] = (start, end)


def gaps_by_brute_force(pieces, size):
    reach, best = 0, None
    for start, end in sorted(pieces):
        if start - reach >= size and (best is None or start - reach < best[0]):
            best = (start - reach, reach)
        reach = max(reach, end)
    return reach if best is None else best[1]


@EXAMPLES
@given(
    runs=st.lists(st.lists(st.tuples(st.integers(0, 100), st.integers(1, 30)), max_size=6), max_size=6),
    size=st.integers(1, 40),
)
def test_the_tightest_gap_is_the_smallest_fitting_one_lowest_first(runs, size):
    # Each run is a sorted list of disjoint pieces, as the occupancy sets are.
    starts, ends, bounds = [], [], [0]
    for run in runs:
        for start, end in union((start, start + length) for start, length in run):
            starts.append(start)
            ends.append(end)
        bounds.append(len(starts))
    pieces = list(zip(starts, ends))
    count = max(len(starts), 1)
    result = tightest_gap(
        np.array([*starts, 0], dtype=np.int64)[:count],
        np.array([*ends, 0], dtype=np.int64)[:count],
        np.empty((2, count), dtype=np.int64),
        np.array(bounds, dtype=np.int64),
        len(bounds) - 1,
        size,
    )
    assert result == gaps_by_brute_force(pieces, size)


def scan_best_fit(ordered, alignment):
    """The placement srbench used before the interval structures: for each record, sort every
    placed record overlapping it by offset and walk the gaps (quadratic)."""
    placed: list[tuple[R, int, int]] = []
    offsets = {}
    for record in ordered:
        if not record.size:
            continue
        size = align_up(record.size, alignment)
        reach, best = 0, None
        for start, end in sorted((o, e) for other, o, e in placed if other.overlaps_in_time(record)):
            if start - reach >= size and (best is None or start - reach < best[0]):
                best = (start - reach, reach)
            reach = max(reach, end)
        offset = reach if best is None else best[1]
        placed.append((record, offset, offset + size))
        offsets[record.id] = offset
    return offsets


@st.composite
def ordered_records(draw, max_records=40):
    count = draw(st.integers(0, max_records))
    records = []
    for i in range(count):
        first = draw(st.integers(0, 25))
        size = draw(st.one_of(st.sampled_from([0, 1, 64, 128, 192, 256]), st.integers(0, 3000)))
        records.append(R(f"t{i}", first, first + draw(st.integers(0, 10)), size))
    return records


@settings(max_examples=150, deadline=None)
@given(records=ordered_records(), alignment=st.sampled_from([1, 64]))
def test_best_fit_places_exactly_as_the_quadratic_scan_did(records, alignment):
    assert place_best_fit(records, alignment) == scan_best_fit(records, alignment)


@pytest.mark.parametrize("planner", [greedy_by_size.plan, greedy_by_breadth.plan, linear_scan.plan, naive.plan])
def test_planners_called_directly_refuse_records_beyond_an_int64_slab(planner):
    records = [R("a", 0, 0, 2**62), R("b", 1, 1, 2**62)]
    with pytest.raises(RecordError, match=r"'a' \(4611686018427387904 bytes\)"):
        planner(records)


def test_the_table_ranks_steps_beyond_int64_keeping_their_order():
    table = RecordTable([R("a", 2**70, 2**70 + 5, 8), R("b", 3, 2**70, 8)])
    assert table.first.tolist() == [1, 0] and table.last.tolist() == [2, 1]
