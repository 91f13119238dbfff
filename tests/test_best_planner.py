"""The best planner: every fast heuristic and variant, the smallest valid plan, the winner named."""

from __future__ import annotations

import pytest

from srbench.memory.records import MemoryPlan, PlanError, lower_bound, validate_plan
from srbench.memory.records import TensorUsageRecord as R
from srbench.memory.synthetic import synthetic_records
from srbench.planners import best, greedy_by_size, plan_memory, planner_names

# Equal sizes: greedy by size's default order (earliest first) needs 448 bytes, latest first 384.
TIE_BREAK_MATTERS = [
    R("t0", 6, 6, 128),
    R("t1", 3, 4, 64),
    R("t2", 4, 6, 128),
    R("t3", 3, 4, 192),
    R("t4", 0, 2, 128),
    R("t5", 6, 8, 128),
]

# One ConvNeXt stage boundary (hf_convnext, in units of 64 bytes): two 4-unit MLP activations
# beside a 1-unit residual, twice; the first residual dies as the second is born. Every fast
# greedy stacks both pairs at offset 0 and puts the second residual on top (10 units); the
# bound, 9 units, needs the second residual below its pair.
U = 64
CONVNEXT_STAGE = [
    R("residual_a", 131, 141, U),
    R("mlp_a", 136, 137, 4 * U),
    R("gelu_a", 137, 138, 4 * U),
    R("residual_b", 141, 150, U),
    R("mlp_b", 145, 146, 4 * U),
    R("gelu_b", 146, 147, 4 * U),
]


def test_candidates_are_the_fast_heuristics_with_their_variants():
    names = best.candidates()
    assert "best" in planner_names() and "exact" in planner_names()
    assert not any(name.startswith(("best", "exact")) for name in names)
    assert {"greedy_by_size[earliest_first]", "greedy_by_size[latest_first]", "naive"} <= set(names)
    assert greedy_by_size.SQUEAKY_WHEEL in names


@pytest.mark.parametrize("records", [TIE_BREAK_MATTERS, synthetic_records(500, seed=3)], ids=["tie-break", "synthetic"])
def test_keeps_the_smallest_plan_and_names_the_winner(records):
    result = plan_memory(records, "best")  # validated
    totals = {name: planner(records, alignment=64).total_bytes for name, planner in best.candidates().items()}
    assert result.plan.total_bytes == min(totals.values())
    assert result.plan.notes["totals"] == totals
    assert totals[result.plan.notes["winner"]] == result.plan.total_bytes
    assert result.plan.planner == "best"


def test_a_tie_break_variant_beats_greedy_by_size_default():
    assert greedy_by_size.plan(TIE_BREAK_MATTERS).total_bytes == 448
    plan = best.plan(TIE_BREAK_MATTERS)
    assert plan.total_bytes == 384
    assert plan.notes["winner"] == "greedy_by_size[latest_first]"


def test_squeaky_wheel_reaches_the_bound_where_every_greedy_order_misses():
    assert lower_bound(CONVNEXT_STAGE) == 9 * U
    assert greedy_by_size.plan(CONVNEXT_STAGE).total_bytes == 10 * U  # the paper's algorithm, unchanged
    squeaky = greedy_by_size.plan_squeaky_wheel(CONVNEXT_STAGE)
    validate_plan(CONVNEXT_STAGE, squeaky)
    assert squeaky.total_bytes == 9 * U
    assert squeaky.notes["squeaky_wheel_best_round"] == 1  # one reordering: residual_b placed first
    assert squeaky.offsets["residual_b"] + U <= min(squeaky.offsets["mlp_b"], squeaky.offsets["gelu_b"])
    plan = best.plan(CONVNEXT_STAGE)
    assert plan.total_bytes == 9 * U and plan.notes["winner"] == greedy_by_size.SQUEAKY_WHEEL
    assert min(total for name, total in plan.notes["totals"].items() if name != greedy_by_size.SQUEAKY_WHEEL) == 10 * U


def test_squeaky_wheel_stops_after_one_placement_at_the_bound():
    plan = greedy_by_size.plan_squeaky_wheel(TIE_BREAK_MATTERS, tie_break="latest_first")
    assert plan.total_bytes == lower_bound(TIE_BREAK_MATTERS) == 384
    assert plan.notes["squeaky_wheel_rounds"] == 1


def test_a_broken_or_invalid_heuristic_is_left_out_and_named(monkeypatch):
    def raises(records, *, alignment):
        raise RuntimeError("plugin bug")

    def overlaps(records, *, alignment):  # everything at 0: tiny, and wrong
        return MemoryPlan("overlaps", {r.id: 0 for r in records}, max(r.size for r in records))

    good = best.candidates()
    monkeypatch.setattr(best, "candidates", lambda: {"raises": raises, "overlaps": overlaps, **good})
    plan = best.plan(TIE_BREAK_MATTERS)
    validate_plan(TIE_BREAK_MATTERS, plan)
    assert plan.total_bytes == 384
    assert set(plan.notes["failed"]) == {"raises", "overlaps"}
    assert "plugin bug" in plan.notes["failed"]["raises"]
    assert "share bytes" in plan.notes["failed"]["overlaps"]


def test_no_valid_plan_at_all_is_an_error(monkeypatch):
    def raises(records, *, alignment):
        raise RuntimeError("plugin bug")

    monkeypatch.setattr(best, "candidates", lambda: {"raises": raises})
    with pytest.raises(PlanError, match=r"no heuristic produced a valid plan.*plugin bug"):
        best.plan(TIE_BREAK_MATTERS)


def test_under_a_deadline_the_quick_fallback_runs_first_and_always():
    """A limit shorter than any heuristic: the one that runs is the quickest (linear scan, 0.08 s
    at 100,000 records where the greedy ones take 0.4-0.8 s), not the first in name order (once
    greedy by breadth, so exact's tiny limits overran by a greedy's time: 2 s at 100,000)."""
    ticks = iter(range(1000))
    plan = best.run_candidates(
        TIE_BREAK_MATTERS, alignment=64, planner="exact", deadline=0.5, clock=lambda: next(ticks)
    )
    assert best.FALLBACK in best.candidates()
    assert plan.notes["winner"] == best.FALLBACK and list(plan.notes["totals"]) == [best.FALLBACK]
    assert sorted(plan.notes["skipped"]) == sorted(set(best.candidates()) - {best.FALLBACK})
    validate_plan(TIE_BREAK_MATTERS, plan, 64)


def test_a_candidate_not_yet_run_is_expected_to_take_longer_than_the_fallback():
    """Each reading of the clock one second: the fallback plans in one, so another is expected
    to take SLOWEST_TO_FALLBACK (and its validation as long): skipped below that deadline, run
    above it."""
    for deadline, runs_more in ((2 * best.SLOWEST_TO_FALLBACK, False), (3 * best.SLOWEST_TO_FALLBACK + 10, True)):
        ticks = iter(range(1000))
        plan = best.run_candidates(
            TIE_BREAK_MATTERS, alignment=64, planner="exact", deadline=deadline, clock=ticks.__next__
        )
        assert (len(plan.notes["totals"]) > 1) is runs_more


def test_among_equal_totals_the_first_run_wins_so_skipping_the_others_keeps_the_plan():
    """Under a deadline the fallback runs first and wins ties: a call that skipped the others
    (a cold first call) and one that ran them give the same plan where none of them is smaller."""
    records = [R(f"t{i}", i, i + 1, 64) for i in range(6)]  # every candidate but naive at 128
    ran_all = best.run_candidates(records, alignment=64, planner="exact", deadline=float("inf"))
    ticks = iter(range(1000))
    ran_one = best.run_candidates(records, alignment=64, planner="exact", deadline=0.5, clock=ticks.__next__)
    assert len(ran_all.notes["totals"]) == len(best.candidates()) and ran_one.notes["skipped"]
    assert ran_all.notes["winner"] == ran_one.notes["winner"] == best.FALLBACK
    assert dict(ran_all.offsets) == dict(ran_one.offsets)
    assert best.plan(records).notes["winner"] == min(best.candidates())  # no deadline: name order
