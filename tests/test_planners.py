"""Hand-made cases for the heuristic planners: layouts worked out on paper, alignment, zero sizes."""

from __future__ import annotations

import numpy as np
import pytest

from srbench.memory.records import PlanError, TensorUsageRecord, lower_bound, validate_plan
from srbench.planners import (
    greedy_by_breadth,
    greedy_by_size,
    linear_scan,
    naive,
    plan_memory,
    planner_names,
    storage_groups,
)
from srbench.planners._placement import place_best_fit

HEURISTICS = {
    "naive": naive.plan,
    "greedy_by_size": greedy_by_size.plan,
    "greedy_by_breadth": greedy_by_breadth.plan,
    "linear_scan": linear_scan.plan,
    "storage_groups": storage_groups.plan,
}
REUSING = [name for name in HEURISTICS if name != "naive"]


def rec(id: str, first: int, last: int, size: int) -> TensorUsageRecord:
    return TensorUsageRecord(id, first, last, size)


# A chain a -> b -> c where each tensor is read by the next operator only: two buffers suffice.
CHAIN = [rec("a", 0, 1, 128), rec("b", 1, 2, 128), rec("c", 2, 3, 128)]


@pytest.mark.parametrize("name", HEURISTICS)
def test_empty_input_gives_an_empty_plan(name):
    plan = HEURISTICS[name]([])
    assert dict(plan.offsets) == {}
    assert plan.total_bytes == 0
    assert plan.planner == name


@pytest.mark.parametrize("name", REUSING)
def test_chain_reuses_the_first_buffer(name):
    plan = HEURISTICS[name](CHAIN)
    validate_plan(CHAIN, plan)
    assert plan.total_bytes == lower_bound(CHAIN) == 256
    assert plan.offsets["a"] == plan.offsets["c"]
    assert plan.offsets["a"] != plan.offsets["b"]


def test_naive_never_reuses():
    plan = naive.plan(CHAIN)
    assert plan.total_bytes == 3 * 128
    # laid out in order of first use
    assert dict(plan.offsets) == {"a": 0, "b": 128, "c": 256}


def test_greedy_by_size_places_the_largest_first_and_fills_the_gap_it_leaves():
    # big lives over steps 1-2; small1 (steps 0-1) and small2 (steps 2-3) fit beside it in the
    # same bytes, and tiny (step 3) fits into the space big leaves free after step 2.
    records = [rec("small1", 0, 1, 128), rec("big", 1, 2, 256), rec("small2", 2, 3, 128), rec("tiny", 3, 3, 64)]
    plan = greedy_by_size.plan(records)
    validate_plan(records, plan)
    assert plan.offsets["big"] == 0
    assert plan.offsets["small1"] == plan.offsets["small2"] == 256
    assert plan.offsets["tiny"] == 0  # best fit: the 256-byte hole under small2, lowest offset
    assert plan.total_bytes == lower_bound(records) == 384


def test_best_fit_prefers_the_tightest_gap_over_the_lowest():
    # Placed in this order: low, hi die after step 0, leaving holes [0, 256) and [384, 448)
    # between mid and top for steps 1-2. new (64 bytes) takes the tight hole, not the low one.
    order = [
        rec("low", 0, 0, 256),
        rec("mid", 0, 2, 128),
        rec("hi", 0, 0, 64),
        rec("top", 0, 2, 64),
        rec("new", 1, 2, 64),
    ]
    assert place_best_fit(order, 64) == {"low": 0, "mid": 256, "hi": 384, "top": 448, "new": 384}


def test_no_gap_fits_so_the_tensor_goes_above_the_furthest_end():
    order = [rec("a", 0, 1, 64), rec("b", 0, 0, 256), rec("c", 1, 1, 128)]
    # c overlaps a [0, 64) only; the space above a is open, so c starts at 64
    assert place_best_fit(order, 64) == {"a": 0, "b": 64, "c": 64}


def test_tie_break_changes_the_greedy_plan():
    # Worked by hand: earliest_first places a, c, b then d and reaches the lower bound (256);
    # latest_first places b, c, a, after which d finds no gap and goes on top (320).
    records = [rec("a", 0, 2, 128), rec("b", 4, 6, 128), rec("c", 1, 1, 128), rec("d", 2, 4, 64)]
    assert lower_bound(records) == 256
    assert greedy_by_size.plan(records, tie_break="earliest_first").total_bytes == 256
    assert greedy_by_size.plan(records, tie_break="latest_first").total_bytes == 320
    totals = {name: variant(records).total_bytes for name, variant in greedy_by_size.VARIANTS.items()}
    assert totals["greedy_by_size[earliest_first]"] == 256
    assert totals["greedy_by_size[latest_first]"] == 320


def test_unknown_tie_break_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown tie_break 'random'.*earliest_first"):
        greedy_by_size.plan(CHAIN, tie_break="random")
    with pytest.raises(ValueError, match=r"unknown fit 'worst'.*best, first"):
        linear_scan.plan(CHAIN, fit="worst")
    with pytest.raises(ValueError, match=r"unknown reuse 'fifo'.*lifo, best_fit"):
        storage_groups.plan(CHAIN, reuse="fifo")


@pytest.mark.parametrize("name", HEURISTICS)
@pytest.mark.parametrize("alignment", [64, 128])
def test_offsets_are_aligned_for_odd_sizes(name, alignment):
    records = [rec("x", 0, 2, 1), rec("y", 1, 3, 63), rec("z", 2, 4, 65)]
    plan = HEURISTICS[name](records, alignment=alignment)
    validate_plan(records, plan, alignment)
    assert all(offset % alignment == 0 for offset in plan.offsets.values())
    # x, y and z are all alive at step 2, each takes at least one aligned block
    assert plan.total_bytes >= 2 * alignment + (65 if alignment == 64 else 1)


def test_naive_total_is_the_padded_sum():
    records = [rec("x", 0, 0, 1), rec("y", 1, 1, 100)]
    plan = naive.plan(records)
    assert dict(plan.offsets) == {"x": 0, "y": 64}
    assert plan.total_bytes == 64 + 100  # the last tensor needs no padding after it


@pytest.mark.parametrize("name", HEURISTICS)
def test_zero_size_tensors_take_no_bytes(name):
    with_empty = [*CHAIN, rec("empty", 0, 3, 0), rec("empty2", 1, 1, 0)]
    plan = HEURISTICS[name](with_empty)
    validate_plan(with_empty, plan)
    assert plan.offsets["empty"] == plan.offsets["empty2"] == 0
    assert plan.total_bytes == HEURISTICS[name](CHAIN).total_bytes


def test_greedy_by_breadth_ranks_operators_by_live_bytes():
    # step 0: a (64); step 1: a + b (64 + 512); step 2: b + c (512 + 128); step 3: c (128)
    records = [rec("a", 0, 1, 64), rec("b", 1, 2, 512), rec("c", 2, 3, 128)]
    ranks = greedy_by_breadth.widest_operator_rank(records).tolist()
    # breadths 64, 576, 640, 128 -> ranks 3, 1, 0, 2; a's widest step is 1, b's and c's step 2
    assert ranks == [1, 0, 0]
    plan = greedy_by_breadth.plan(records)
    validate_plan(records, plan)
    # step 2's tensors go first, largest first: b at 0, c above it; a (step 1) then fits above b
    assert plan.offsets["b"] == 0
    assert plan.offsets["c"] == 512
    assert plan.offsets["a"] == 512
    assert plan.total_bytes == lower_bound(records) == 640


def test_place_best_fit_follows_the_given_order():
    records = [rec("first", 0, 0, 64), rec("second", 0, 0, 64)]
    assert place_best_fit(records, 64) == {"first": 0, "second": 64}
    assert place_best_fit(records[::-1], 64) == {"second": 0, "first": 64}


def test_free_list_merges_neighbours_and_grows_over_a_free_top():
    starts, ends = np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int64)
    blocks, top, offsets = 0, 0, []
    for _ in range(3):
        offset, blocks, top = linear_scan.allocate(starts, ends, blocks, top, 64, True)
        offsets.append(offset)
    assert offsets == [0, 64, 128] and top == 192
    blocks = linear_scan.release(starts, ends, blocks, 0, 64)
    blocks = linear_scan.release(starts, ends, blocks, 128, 192)
    assert (starts[:blocks].tolist(), ends[:blocks].tolist()) == ([0, 128], [64, 192])
    blocks = linear_scan.release(starts, ends, blocks, 64, 128)
    assert (starts[:blocks].tolist(), ends[:blocks].tolist()) == ([0], [192])
    # 256 bytes do not fit in the free 192 at the top: the slab grows over it
    offset, blocks, top = linear_scan.allocate(starts, ends, blocks, top, 256, True)
    assert (offset, blocks, top) == (0, 0, 256)


def test_linear_scan_best_fit_and_first_fit_differ():
    # Step 0 places big at 0, then the 64-byte tensors by id: keep at 256, small at 320. At step
    # 2 the free list holds [0, 256) and [320, 384): best fit takes the exact 64-byte block,
    # first fit the lowest one.
    records = [rec("big", 0, 1, 256), rec("small", 0, 1, 64), rec("keep", 0, 3, 64), rec("new", 2, 3, 64)]
    best = linear_scan.plan(records, fit="best")
    first = linear_scan.plan(records, fit="first")
    validate_plan(records, best)
    validate_plan(records, first)
    assert best.offsets["new"] == 320
    assert first.offsets["new"] == 0


def test_linear_scan_does_not_reuse_a_block_on_its_last_step():
    # b's last use is step 1, where c is produced: c must not take b's bytes (inclusive lifetimes).
    records = [rec("b", 0, 1, 64), rec("c", 1, 2, 64)]
    plan = linear_scan.plan(records)
    assert plan.offsets["b"] != plan.offsets["c"]


def test_storage_group_is_as_large_as_its_largest_member():
    records = [rec("small", 0, 0, 64), rec("large", 1, 1, 256), rec("alive", 0, 1, 128)]
    groups = storage_groups.assign_groups(records)
    assert [[m.id for m in g] for g in groups] == [["alive"], ["small", "large"]]
    plan = storage_groups.plan(records)
    validate_plan(records, plan)
    assert plan.offsets["small"] == plan.offsets["large"] == 128
    assert plan.offsets["alive"] == 0
    assert plan.total_bytes == 128 + 256
    assert plan.notes["groups"] == 2


def test_storage_groups_lifo_takes_the_latest_freed_group_and_best_fit_the_tightest():
    # Groups of 512 (g0) and 64 (g1) both free up before step 2; g1 was freed last.
    records = [rec("g0", 0, 0, 512), rec("g1", 0, 1, 64), rec("x", 2, 2, 512)]
    lifo = storage_groups.assign_groups(records, "lifo")
    fit = storage_groups.assign_groups(records, "best_fit")
    assert [[m.id for m in g] for g in lifo] == [["g0"], ["g1", "x"]]
    assert [[m.id for m in g] for g in fit] == [["g0", "x"], ["g1"]]
    assert storage_groups.plan(records, reuse="lifo").total_bytes == 1024
    assert storage_groups.plan(records, reuse="best_fit").total_bytes == 576


@pytest.mark.parametrize("name", HEURISTICS)
def test_plan_memory_runs_every_heuristic_through_the_validator(name):
    result = plan_memory(CHAIN, name)
    assert result.num_tensors == 3
    assert result.lower_bound == 256
    assert result.plan.total_bytes / 256 == pytest.approx(result.ratio_to_lower_bound)
    assert result.seconds >= 0


@pytest.mark.parametrize("name", HEURISTICS)
def test_steps_beyond_int64_are_planned(name):
    # Record files may number steps with arbitrarily large integers; nothing may wrap around.
    base = 2**70
    records = [rec("a", base, base + 1, 64), rec("b", base + 1, base + 2, 64), rec("c", base + 2, base + 3, 64)]
    plan = HEURISTICS[name](records)
    validate_plan(records, plan)
    assert plan.total_bytes == (192 if name == "naive" else 128)


@pytest.mark.parametrize("alignment", [0, -64, 1.5, "64", True, None])
@pytest.mark.parametrize("name", planner_names())
def test_an_alignment_that_is_not_a_positive_whole_number_is_refused_before_planning(name, alignment):
    records = [TensorUsageRecord("a", 0, 1, 100), TensorUsageRecord("b", 1, 2, 50)]
    with pytest.raises(ValueError, match=rf"alignment must be a positive whole number of bytes, got {alignment!r}"):
        plan_memory(records, name, alignment=alignment)


@pytest.mark.parametrize("name", planner_names())
def test_a_numpy_integer_alignment_plans_as_its_value(name):
    """Storage groups kept numpy scalars from a numpy alignment, and the validator refused its
    total as not a byte count."""
    records = [TensorUsageRecord("a", 0, 1, 100), TensorUsageRecord("b", 1, 2, 50), TensorUsageRecord("c", 3, 4, 8)]
    options = {"time_limit": 1.0} if name == "exact" else {}
    result = plan_memory(records, name, alignment=np.int64(64), **options)
    assert result.plan == plan_memory(records, name, alignment=64, **options).plan or name == "exact"
    assert type(result.plan.total_bytes) is int
    assert all(type(offset) is int for offset in result.plan.offsets.values())


@pytest.mark.parametrize(
    ("returns", "message"),
    [
        (lambda records: 1 // 0, r"^ZeroDivisionError in the planner: integer division or modulo by zero$"),
        (lambda records: None, r"^expected a MemoryPlan, got NoneType None$"),
    ],
)
def test_a_planner_plugin_that_fails_is_a_plan_error(monkeypatch, returns, message):
    """A plugin's own error, or a None for a plan (an AttributeError in the validator), ended
    every caller planning with several planners in a traceback."""
    from srbench.planners import PLANNERS

    def broken(records, *, alignment=64):
        return returns(records)

    known = PLANNERS.entry_points()
    planted = type("EntryPoint", (), {"load": staticmethod(lambda: broken)})()
    monkeypatch.setattr(PLANNERS, "entry_points", lambda: {**known, "broken": planted})
    with pytest.raises(PlanError, match=message) as caught:
        plan_memory(CHAIN, "broken")
    assert isinstance(caught.value.__cause__, ZeroDivisionError) or caught.value.__cause__ is None
    with pytest.raises(TypeError, match="unexpected keyword argument 'time_limit'"):  # the caller's error
        plan_memory(CHAIN, "broken", time_limit=1.0)
