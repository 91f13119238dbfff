"""pytest-benchmark JSON filed as asv results: the numbers land under suites_asv's benchmark
names, ``asv publish`` reads them, and the nightly's comparison sees a regression between two
converted commits."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from srbench.asv_tracking.pytest_benchmark_convert import ConversionError, convert
from srbench.asv_tracking.regressions import compare_commits
from srbench.asv_tracking.tracked_metrics import OP_TIME_BUCKETS

MACHINE = "converter"


def pytest_benchmark_json(path: Path, commit: str, median: float, planned: int | None, dirty: bool = False) -> Path:
    """A file shaped as pytest-benchmark 5 writes it, for one srbench case and one other test."""

    def entry(case: str, scale: float, planned_bytes: int | None) -> dict:
        samples = [median * scale * factor for factor in (0.9, 1.0, 1.0, 1.1, 1.2)]
        return {
            "group": None,
            "name": f"test_case[{case}]",
            "fullname": f"suites/quick.yaml::case[{case}]",
            "params": {"spec": case},
            "param": case,
            "extra_info": {
                "srbench_case": case,
                "planned_bytes": planned_bytes,
                "lower_bound": 1000 if planned_bytes else None,
                "planned_to_lower_bound": planned_bytes / 1000 if planned_bytes else None,
                "peak_bytes": 4096,
                "allocations": 3,
                "allocated_bytes": 4096,
                "page_faults_per_run": 0.0,
                "op_profile_ms": {"aten::addmm": 2.0 * scale, "aten::relu": 0.5 * scale, "aten::t": 0.01 * scale},
                "prepare_seconds": 0.1,
            },
            "options": {
                "disable_gc": False,
                "timer": "perf_counter",
                "min_rounds": 5,
                "max_time": 1.0,
                "min_time": 5e-06,
                "warmup": False,
            },
            "stats": {
                "min": min(samples),
                "max": max(samples),
                "mean": sum(samples) / 5,
                "stddev": 0.0,
                "rounds": 5,
                "median": median * scale,
                "iqr": 0.0,
                "q1": samples[1],
                "q3": samples[3],
                "iqr_outliers": 0,
                "stddev_outliers": 0,
                "outliers": "0;0",
                "ld15iqr": samples[0],
                "hd15iqr": samples[-1],
                "ops": 1 / (median * scale),
                "total": sum(samples),
                "data": samples,
                "iterations": 1,
            },
        }

    unrelated = {"name": "test_other", "extra_info": {}, "stats": {"median": 1.0}}
    path.write_text(
        json.dumps(
            {
                "machine_info": {"node": "ci"},
                "datetime": "2026-11-21T09:00:00+00:00",
                "version": "5.3.1",
                "commit_info": {"id": commit, "time": "2026-11-21T08:00:00+00:00", "dirty": dirty, "branch": "main"},
                "benchmarks": [
                    entry("mlp-srbench-greedy_by_size-cleanup-out-t1", 1.0, planned),
                    entry("mlp-eager-t1", 2.0, None),
                    unrelated,
                ],
            }
        )
    )
    return path


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".asv-machine.json").write_text(
        json.dumps({MACHINE: {"machine": MACHINE, "os": "linux"}, "version": 1})
    )
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for message in ("one", "two"):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    commits = subprocess.run(
        [*git, "rev-list", "--reverse", "main"], check=True, capture_output=True, text=True
    ).stdout.split()
    config = repo / "asv.conf.json"
    config.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "p",
                "repo": ".",
                "branches": ["main"],
                "results_dir": "results",
                "html_dir": "html",
                "environment_type": "virtualenv",
            }
        )
    )
    return config, commits


def load_results(path: Path):
    from asv.results import Results

    return Results.load(str(path), machine_name=MACHINE)


def test_each_case_becomes_results_of_the_suites_asv_benchmarks(project, tmp_path):
    config, (commit, _) = project
    source = pytest_benchmark_json(tmp_path / "bench.json", commit, median=0.002, planned=1500)
    written = convert(source, config, machine=MACHINE)
    results = load_results(written)
    ids = ["'mlp-srbench-greedy_by_size-cleanup-out-t1'", "'mlp-eager-t1'"]

    times = results.get_result_value("suites_asv.EndToEnd.time_run", [ids])
    assert times == pytest.approx([0.002, 0.004])
    assert results.get_result_stats("suites_asv.EndToEnd.time_run", [ids])[0]["ci_99_a"] is not None
    planned = results.get_result_value("suites_asv.Memory.track_planned_bytes", [ids])
    assert planned[0] == 1500 and math.isnan(planned[1])  # eager plans nothing: n/a, not a failure
    assert results.get_result_value("suites_asv.Memory.track_lower_bound_ratio", [ids])[0] == pytest.approx(1.5)
    buckets = [repr(bucket) for bucket in OP_TIME_BUCKETS]
    op_time = results.get_result_value("suites_asv.OpTime.track_op_time", [ids, buckets])
    by_bucket = dict(zip(OP_TIME_BUCKETS, op_time[: len(OP_TIME_BUCKETS)]))
    # addmm is matmul, relu activation; aten::t (data movement) takes under 2% of the time: "other"
    assert (by_bucket["matmul"], by_bucket["activation"]) == pytest.approx((0.002, 0.0005))
    assert (by_bucket["other"], by_bucket["total"]) == pytest.approx((0.00001, 0.00251))
    assert math.isnan(by_bucket["convolution"]) and math.isnan(by_bucket["data_movement"])
    assert op_time[len(OP_TIME_BUCKETS) :][-1] == pytest.approx(0.00502)  # the second case's total

    benchmarks = json.loads((config.parent / "results" / "benchmarks.json").read_text())
    assert benchmarks["suites_asv.OpTime.track_op_time"]["params"] == [ids, buckets]
    assert "test_other" not in json.dumps(benchmarks)


def test_converted_results_publish_and_a_slower_commit_is_a_regression(project, tmp_path):
    config, (before, after) = project
    convert(pytest_benchmark_json(tmp_path / "a.json", before, median=0.002, planned=1500), config, machine=MACHINE)
    convert(pytest_benchmark_json(tmp_path / "b.json", after, median=0.004, planned=1500), config, machine=MACHINE)

    comparison = compare_commits(config, before, after, factor=1.2, machine=MACHINE)
    assert comparison.worsened and not comparison.improved
    assert "suites_asv.EndToEnd.time_run" in comparison.table

    publish = subprocess.run(
        [sys.executable, "-m", "asv", "publish", "--config", str(config)],
        cwd=config.parent,
        capture_output=True,
        text=True,
    )
    assert publish.returncode == 0, publish.stderr
    graphs = list((config.parent / "html" / "graphs").rglob("suites_asv.EndToEnd.time_run.json"))
    assert graphs, "asv publish wrote no graph for the converted timings"


def test_a_dirty_tree_or_a_file_without_srbench_cases_is_refused(project, tmp_path):
    config, (commit, _) = project
    dirty = pytest_benchmark_json(tmp_path / "dirty.json", commit, median=0.002, planned=1, dirty=True)
    with pytest.raises(ConversionError, match="uncommitted changes"):
        convert(dirty, config, machine=MACHINE)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"commit_info": {"id": commit}, "benchmarks": [{"name": "t", "stats": {"median": 1}}]}))
    with pytest.raises(ConversionError, match="no srbench case"):
        convert(other, config, machine=MACHINE)
