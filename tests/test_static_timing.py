"""The prepare-time comparison's decision rule (:mod:`srbench.static.timing`) on stand-in timings:
per-round ratios and their confidence interval against a threshold, the early stop once decided,
the budget where it cannot tell. No test here times anything: the series are given, or a fake
clock advanced by the calls themselves makes them exact."""

from __future__ import annotations

import statistics
import types

import pytest

from srbench.inputs import Inputs
from srbench.static import timing
from srbench.static.timing import MIN_ROUNDS, Comparison, Side

# Load on a shared machine stretches random calls by about 30%: here it hit the first candidate in
# 11 rounds of 20 and the second in 9, in the same round 5 times. The two run equally fast.
LOADED_FIRST = frozenset({0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 19})
LOADED_SECOND = frozenset({0, 1, 4, 5, 8, 9, 12, 13, 16})


def _loaded(loaded: frozenset[int], seconds: float = 0.010) -> tuple[float, ...]:
    return tuple(seconds * (1.3 if round_ in loaded else 1.0) for round_ in range(20))


def test_equal_programs_with_load_on_one_more_often_are_not_told_apart():
    """The ratio of the medians (the rule before) reads 1.3x, past a 10% margin (measured twice,
    twice alike: the lean attention dropped); the per-round ratios' median is 1.0 and their
    interval (0.77-1.3x) straddles 1.1: undecided, the default stays."""
    comparison = Comparison(_loaded(LOADED_FIRST), _loaded(LOADED_SECOND))
    first, second = comparison.medians
    assert first / second == pytest.approx(1.3)
    assert statistics.median(comparison.ratios) == pytest.approx(1.0)
    assert comparison.ratio_bounds() == pytest.approx((1 / 1.3, 1.3))
    assert comparison.side_of(1.1) is Side.UNDECIDED
    assert comparison.side_of(0.95) is Side.UNDECIDED


def test_a_real_difference_is_found_through_the_same_load():
    """The first program really 20% slower, the load as above: every round that both or neither
    were hit says 1.2x, and the interval's low end is still above 1.1."""
    loaded_alike = LOADED_FIRST & LOADED_SECOND
    comparison = Comparison(_loaded(loaded_alike, 0.012), _loaded(loaded_alike, 0.010))
    assert comparison.side_of(1.1) is Side.ABOVE
    assert comparison.side_of(1.3) is Side.BELOW


def test_outliers_in_a_few_rounds_do_not_move_the_decision():
    """Two rounds in twenty where the second program lost its core for 20 ms: the ratios there
    are 0.33x, the interval's high end is still the steady rounds' 1.0x."""
    second = tuple(0.030 if round_ in (3, 11) else 0.010 for round_ in range(20))
    comparison = Comparison((0.010,) * 20, second)
    assert comparison.side_of(1.1) is Side.BELOW


def test_fewer_rounds_than_the_least_a_decision_needs_are_undecided():
    few = Comparison((2.0,) * (MIN_ROUNDS - 1), (1.0,) * (MIN_ROUNDS - 1))
    assert few.side_of(1.1) is Side.UNDECIDED
    assert Comparison((2.0,) * MIN_ROUNDS, (1.0,) * MIN_ROUNDS).side_of(1.1) is Side.ABOVE


def test_at_the_fewest_rounds_every_ratio_must_agree():
    """At :data:`MIN_ROUNDS` the 99% interval is the ratios' whole range: one round on the other
    side of the threshold leaves the comparison undecided."""
    first = (1.2,) * (MIN_ROUNDS - 1) + (1.05,)
    assert Comparison(first, (1.0,) * MIN_ROUNDS).side_of(1.1) is Side.UNDECIDED


def _fake_clock(monkeypatch) -> list[float]:
    now = [0.0]
    clock = types.SimpleNamespace(perf_counter=lambda: now[0], thread_time=lambda: now[0])
    monkeypatch.setattr(timing, "time", clock)
    return now


def test_a_comparison_stops_as_soon_as_it_is_decided(monkeypatch):
    now = _fake_clock(monkeypatch)

    def slow() -> None:
        now[0] += 0.012

    def fast() -> None:
        now[0] += 0.010

    comparison = timing.compare_calls([slow, fast], Inputs((), {}), 1.1)
    assert len(comparison.first) == MIN_ROUNDS and comparison.side_of(1.1) is Side.ABOVE
    assert comparison.medians == pytest.approx((0.012, 0.010))


def test_a_comparison_that_cannot_tell_runs_to_its_budget(monkeypatch):
    """Every other call of the first program is 30% slower: the ratios straddle 1.1 however many
    rounds run, so the rounds go on until the budget is spent, and it stays undecided."""
    now = _fake_clock(monkeypatch)
    calls = [0]

    def uneven() -> None:
        calls[0] += 1
        now[0] += 0.013 if calls[0] % 2 else 0.010

    def steady() -> None:
        now[0] += 0.010

    comparison = timing.compare_calls([uneven, steady], Inputs((), {}), 1.1)
    rounds = len(comparison.first)
    assert MIN_ROUNDS < rounds < timing.MAX_ROUNDS
    assert rounds == pytest.approx(timing.BUDGET_SECONDS / 0.0215, abs=2)
    assert comparison.side_of(1.1) is Side.UNDECIDED
