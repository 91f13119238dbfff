"""What several streams cost in memory and gain in time, as ``srbench compare --streams`` reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from srbench.compare.streams import latency_gains, stream_bytes, streams_table
from srbench.graph import capture
from srbench.memory.lifetimes import analyze_lifetimes
from srbench.schedulers import costs
from srbench.schedulers.costs import CostModel, measured_parallelism, parallelism, with_measured_machine


def test_bytes_on_several_streams_against_one(two_branch_model):
    captured = capture(two_branch_model(), (torch.randn(8, 32),))
    rows = stream_bytes("two", captured.graph, analyze_lifetimes(captured.graph), ["greedy_by_size"], [2, 4])
    by = {(row.scheduler, row.streams): row for row in rows}
    steps = by[("parallel_steps", 2)]
    assert steps.streams_used == 2
    assert steps.total_bytes > steps.one_stream_bytes > 0  # the branches' tensors no longer share bytes
    assert steps.lower_bound <= steps.total_bytes and steps.ratio == steps.total_bytes / steps.one_stream_bytes
    for row in rows:
        if row.streams_used == 1:  # a schedule on one stream runs the one-stream program: no cost
            assert row.total_bytes == row.one_stream_bytes and row.estimated_speedup == 1.0
    table = streams_table(rows)
    assert "two" in table and "parallel_steps" in table and "2 streams (used, est. speed-up)" in table


def test_measured_gains_pair_each_case_with_its_one_stream_twin():
    rows = [
        {"suite": "streams", "id": "dlrm-srbench-greedy_by_size-t1", "model": "dlrm", "streams": 1,
         "scheduler": "critical_path", "latency_median_s": 2e-3},
        {"suite": "streams", "id": "dlrm-srbench-greedy_by_size-s2-t1", "model": "dlrm", "streams": 2,
         "scheduler": "critical_path", "latency_median_s": 1e-3},
        {"suite": "streams", "id": "dlrm-srbench-greedy_by_size-s4-parallel_steps-t1", "model": "dlrm",
         "streams": 4, "scheduler": "parallel_steps", "latency_median_s": 4e-3},
        {"suite": "other", "id": "mlp-srbench-greedy_by_size-s2-t1", "model": "mlp", "streams": 2,
         "scheduler": "critical_path", "latency_median_s": 1e-3},  # no one-stream twin measured
        {"suite": "streams", "id": "dlrm-eager-t1", "model": "dlrm", "streams": None, "latency_median_s": 1e-3},
    ]  # fmt: skip
    gains = {(gain.streams, gain.scheduler): gain.gain for gain in latency_gains(rows)}
    assert gains == {(2, "critical_path"): 2.0, (4, "parallel_steps"): 0.5}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "expected a suite summary, a JSON object whose 'models' maps each model to its case rows; got list"),
        ({"cases": []}, "expected a suite summary, a JSON object whose 'models' maps each model to its case rows"),
        ({"models": {"mlp": [1]}}, "models.mlp[0]: expected a case row (an object with 'id' and 'model'), got 1"),
    ],
)
def test_a_file_that_is_not_a_suite_summary_is_one_failure_saying_what_was_expected(tmp_path, document, message):
    """Another JSON file said only "'models'" (a KeyError's text), and a row that was not an
    object stopped the comparison with a traceback."""
    from srbench.compare.streams import _summary_rows

    path = tmp_path / "other.json"
    path.write_text(json.dumps(document))
    failures: list[str] = []
    assert _summary_rows(path, failures) == []
    (failure,) = failures
    assert failure.startswith(f"cannot read suite results {path}: {message}")


def test_rows_without_a_scheduler_or_with_values_of_another_type_are_no_gains():
    """A hand-written row without ``scheduler`` was a KeyError's traceback; ``streams: "2"`` a TypeError's."""
    rows = [
        {"id": "mlp-srbench-t1", "model": "mlp", "streams": 1, "latency_median_s": 1.0},
        {"id": "mlp-srbench-s2-t1", "model": "mlp", "streams": 2, "latency_median_s": 0.5},
        {"id": "mlp-srbench-s4-t1", "model": "mlp", "streams": "4", "latency_median_s": 0.5},
        {"id": "mlp-srbench-s8-t1", "model": "mlp", "streams": 8, "latency_median_s": "fast"},
    ]
    assert [(gain.streams, gain.gain) for gain in latency_gains(rows)] == [(2, 2.0)]


def test_compare_streams_on_the_command_line(tmp_path):
    out = tmp_path / "out"
    summary = tmp_path / "suites-summary.json"
    summary.write_text(json.dumps({"models": {"mlp": []}}))
    done = subprocess.run(
        [sys.executable, "-m", "srbench", "compare", "--models", "mlp", "--planners", "greedy_by_size",
         "--streams", "2", "--out", str(out), "--suite-results", str(summary)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "bytes on several streams against one" in done.stdout
    document = json.loads((out / "compare-streams.json").read_text())
    assert {row["scheduler"] for row in document["bytes"]} == {"critical_path", "parallel_steps"}
    assert document["gains"] == []


@pytest.mark.parametrize("value", ["1", "two", "2,0"])
def test_bad_stream_counts_are_a_usage_error(value):
    done = subprocess.run(
        [sys.executable, "-m", "srbench", "compare", "--models", "mlp", "--streams", value],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "expected stream counts of 2 or more" in done.stderr


@pytest.mark.parametrize(
    ("alone", "together", "expected"),
    [(1.0, 1.0, 2.0), (1.0, 1.25, 1.6), (1.0, 2.0, 1.0), (1.0, 4.0, 1.0), (1.0, 0.5, 2.0)],
    ids=["at-once", "partly", "in-turn", "worse-than-in-turn", "faster-than-possible"],
)
def test_parallelism_is_work_done_at_once_between_one_thread_and_all(alone, together, expected):
    assert parallelism(2, alone, together) == pytest.approx(expected)


def test_the_machine_is_measured_for_the_scheduler(monkeypatch):
    assert measured_parallelism(1) == 1.0  # one thread: nothing to measure
    monkeypatch.setattr(costs, "measured_parallelism", lambda threads: 1.37)
    monkeypatch.setattr(costs, "measured_contention", lambda: 4e-6)
    monkeypatch.setattr(costs, "handoff_seconds", lambda rounds: 3e-6)
    measured = with_measured_machine(CostModel(wait_seconds=0.0, stream_seconds=1e-5), 2)
    assert measured.cores == 1.37 and measured.contention_seconds == 4e-6
    assert measured.wait_seconds == 6e-6  # at least a hand-off there and back
    assert measured.stream_seconds == 1e-5  # the model's own figure where it is larger
