"""The best planner: every fast heuristic and variant, the smallest valid plan, the winner named."""

from __future__ import annotations

import pytest

from srbench.memory.records import MemoryPlan, PlanError, validate_plan
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


def test_candidates_are_the_fast_heuristics_with_their_variants():
    names = best.candidates()
    assert "best" in planner_names() and "exact" in planner_names()
    assert not any(name.startswith(("best", "exact")) for name in names)
    assert {"greedy_by_size[earliest_first]", "greedy_by_size[latest_first]", "naive"} <= set(names)


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
    with pytest.raises(PlanError, match="no heuristic produced a valid plan.*plugin bug"):
        best.plan(TIE_BREAK_MATTERS)
