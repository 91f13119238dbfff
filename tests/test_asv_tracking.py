"""asv tracking without running asv: the benchmarks declared without measuring, the buckets of
node kinds, results written whole through a staged copy, the offline page rewrite, the nightly's
choice of commits, and its exit status on a synthetic pair of results."""

from __future__ import annotations

import json
import math
import re
import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest

from srbench.asv_tracking import tracked_metrics
from srbench.asv_tracking.nightly import baseline_and_newest, commits_to_measure
from srbench.asv_tracking.offline_html import LOCAL_PATHS, OfflineAssetError, rewrite_page
from srbench.asv_tracking.staging import load_config, staged_results
from srbench.asv_tracking.suite_selection import selected_cases
from srbench.asv_tracking.tracked_metrics import (
    OP_TIME_BUCKETS,
    TRACKED_METRICS,
    CaseMeasurement,
    NotApplicable,
    bucket_of,
    op_time_buckets,
)
from srbench.cli import main as srbench_main
from srbench.suites import SuiteError, load_suite

REPO_ROOT = Path(__file__).resolve().parents[1]
ASV_WWW = Path(str(__import__("asv").__file__)).parent / "www"


# --- the benchmarks, declared from the suite files ---------------------------------------------


def load_benchmarks(monkeypatch, suites: str) -> dict[str, Any]:
    """``benchmarks/suites_asv.py`` run as asv imports it, with every way to measure made to fail."""

    def no_measuring(*arguments: object) -> None:
        raise AssertionError("importing the benchmarks measured something")

    monkeypatch.setattr(tracked_metrics, "measure_all", no_measuring)
    monkeypatch.setattr(tracked_metrics, "prepare", no_measuring)
    monkeypatch.setenv("SRBENCH_ASV_SUITES", suites)
    monkeypatch.delenv("SRBENCH_ASV_CASES", raising=False)
    return runpy.run_path(str(REPO_ROOT / "benchmarks" / "suites_asv.py"))


def test_the_benchmarks_declare_every_quick_case_and_the_fixed_buckets_without_measuring(monkeypatch):
    benchmarks = load_benchmarks(monkeypatch, "quick")
    quick = [case.id for case in load_suite(REPO_ROOT / "suites" / "quick.yaml").cases]
    assert benchmarks["EndToEnd"].params == [quick]
    assert benchmarks["OpTime"].params == [quick, OP_TIME_BUCKETS]
    memory = benchmarks["Memory"]
    assert sorted(name for name in vars(memory) if name.startswith("track_")) == sorted(
        f"track_{metric.name}" for metric in TRACKED_METRICS
    )
    for metric in TRACKED_METRICS:
        assert getattr(memory, f"track_{metric.name}").unit == metric.unit
    # asv keys setup_cache by its source line: one measurement of every case serves both classes,
    # under a timeout that grows with the number of cases.
    assert memory.setup_cache is benchmarks["OpTime"].setup_cache
    assert memory.setup_cache.timeout == benchmarks["SECONDS_PER_CASE"] * len(quick)


def test_track_benchmarks_read_the_measurement_and_show_a_case_that_does_not_apply_as_na(monkeypatch):
    benchmarks = load_benchmarks(monkeypatch, "quick")
    measured = {
        "a": CaseMeasurement({"planned_bytes": 7, "allocations": None}, {"matmul": 0.5, "total": 0.5}),
        "b": CaseMeasurement(not_applicable="needs cuda"),
        "c": CaseMeasurement(failure="Traceback: boom"),
    }
    memory, op_time = benchmarks["Memory"](), benchmarks["OpTime"]()
    memory.setup(measured, "a")
    assert memory.track_planned_bytes(measured, "a") == 7
    assert math.isnan(memory.track_allocations_per_run(measured, "a"))  # n/a: the case has no such number
    op_time.setup(measured, "a", "matmul")
    assert op_time.track_op_time(measured, "a", "matmul") == 0.5
    assert math.isnan(op_time.track_op_time(measured, "a", "convolution"))
    with pytest.raises(NotImplementedError, match="needs cuda"):  # asv: skipped, n/a
        memory.setup(measured, "b")
    with pytest.raises(RuntimeError, match="measuring case c failed:\nTraceback: boom"):  # asv: failed
        op_time.setup(measured, "c", "total")


def test_measuring_keeps_a_cases_error_as_its_failure_and_why_it_does_not_apply(monkeypatch, tmp_path):
    (tmp_path / "one.yaml").write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [eager]\n")
    spec = selected_cases(tmp_path, {"SRBENCH_ASV_SUITES": "one"})["mlp-eager-t1"]

    def failing(_: object) -> None:
        raise ValueError("boom")

    def not_applicable(_: object) -> None:
        raise NotApplicable("no such device")

    monkeypatch.setattr(tracked_metrics, "prepare", failing)
    failed = tracked_metrics.measure_all([spec])[spec.id]
    assert failed.failure is not None and "ValueError: boom" in failed.failure
    monkeypatch.setattr(tracked_metrics, "prepare", not_applicable)
    assert tracked_metrics.measure(spec) == CaseMeasurement(not_applicable="no such device")


@pytest.mark.parametrize(
    ("kind", "bucket"),
    [
        ("aten::mkldnn_convolution", "convolution"),  # eager's profiler
        ("aten::conv2d", "convolution"),  # srbench and the C++ Static Runtime
        ("aten::linear", "matmul"),
        ("aten.addmm.default", "matmul"),
        ("aten::bmm", "matmul"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("aten::mkldnn_rnn_layer", "recurrent"),
        ("aten::lstm", "recurrent"),
        ("aten::native_layer_norm", "normalization"),
        ("aten::_batch_norm_impl_index", "normalization"),
        ("aten::max_pool2d_with_indices", "pooling"),
        ("aten::_embedding_bag", "embedding"),
        ("aten::clamp_min", "activation"),
        ("aten::gelu", "activation"),
        ("aten::t", "data_movement"),
        ("aten::copy_", "data_movement"),
        ("prim::VarConcat", "data_movement"),
        ("getitem", "data_movement"),
        ("aten::add_", "other"),
        ("prim::If", "other"),
        ("aten::empty", "other"),
    ],
)
def test_the_node_kinds_of_every_runtime_fall_into_fixed_buckets(kind, bucket):
    assert bucket_of(kind) == bucket


def test_op_time_buckets_fold_what_takes_under_2_percent_into_other():
    seconds = {"aten::addmm": 0.002, "aten::mm": 0.001, "aten::relu": 0.0005, "aten::t": 0.00001, "aten::add": 0.0001}
    buckets = op_time_buckets(seconds)
    assert buckets.keys() == {"matmul", "activation", "other", "total"}
    assert buckets["matmul"] == pytest.approx(0.003)
    assert buckets["other"] == pytest.approx(0.00011)  # add, and t's bucket (data_movement) under 2%
    assert buckets["total"] == pytest.approx(sum(seconds.values()))
    assert op_time_buckets({}) == {}


# --- results written whole, without patching asv -----------------------------------------------


def test_a_file_asv_left_half_written_keeps_its_previous_version_and_finished_ones_land(tmp_path, capsys):
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps({"version": 1, "repo": ".", "results_dir": "results"}))
    results = tmp_path / "results"
    (results / "machine").mkdir(parents=True)
    (results / "machine" / "old.json").write_text('{"old": 1}')
    (results / "benchmarks.json").write_text('{"b": 1}')
    with pytest.raises(KeyboardInterrupt), staged_results(config) as staged_config:
        staged = Path(load_config(staged_config).results_dir)
        assert json.loads((staged / "machine" / "old.json").read_text()) == {"old": 1}  # asv sees earlier results
        (staged / "machine" / "new.json").write_text('{"new": 1}')
        (staged / "benchmarks.json").write_text('{"b": ')  # asv interrupted while writing it
        raise KeyboardInterrupt
    assert json.loads((results / "machine" / "new.json").read_text()) == {"new": 1}
    assert json.loads((results / "benchmarks.json").read_text()) == {"b": 1}
    assert sorted(p.name for p in results.rglob("*")) == ["benchmarks.json", "machine", "new.json", "old.json"]
    assert "benchmarks.json" in capsys.readouterr().err


def test_the_staged_configuration_only_moves_the_results_and_asv_is_not_patched():
    import asv.util

    shipped = load_config(REPO_ROOT / "asv.conf.json")
    with staged_results(REPO_ROOT / "asv.conf.json") as staged_config:
        conf = load_config(staged_config)
        assert conf.results_dir == str(staged_config.parent / "results") != shipped.results_dir
    assert (conf.repo, conf.benchmark_dir, conf.env_dir) == (shipped.repo, shipped.benchmark_dir, shipped.env_dir)
    assert conf.plugins == [] and shipped.plugins == []
    assert asv.util.write_json.__module__ == "asv.util"


def test_nightly_help_is_plain_text(capsys):
    with pytest.raises(SystemExit):
        srbench_main(["nightly", "--help"])
    help_text = capsys.readouterr().out
    assert "exit status: 0 no regression, 1 a benchmark got worse" in help_text
    assert not re.search(r"``|:mod:|:func:|:class:", help_text), help_text


# --- offline HTML ------------------------------------------------------------------------------


def test_every_cdn_tag_of_asvs_page_gets_a_local_copy_and_loses_its_cdn_attributes():
    offline = rewrite_page((ASV_WWW / "index.html").read_text())
    assert "https://cdn" not in offline and "code.jquery.com" not in offline
    assert "integrity=" not in offline
    for path in LOCAL_PATHS.values():
        assert f'"{path}"' in offline
    assert 'href="https://github.com/airspeed-velocity/asv/"' in offline  # links are left alone


def test_a_cdn_file_without_local_copy_is_an_error_naming_it():
    page = '<script src="https://cdn.example.org/new-lib.min.js"></script>'
    with pytest.raises(OfflineAssetError, match=r"new-lib\.min\.js"):
        rewrite_page(page)


# --- which suites and commits ------------------------------------------------------------------


def test_selection_reads_the_named_suite_files_and_filters_case_ids(tmp_path):
    (tmp_path / "one.yaml").write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [eager, torchscript]\n")
    environ = {"SRBENCH_ASV_SUITES": "one", "SRBENCH_ASV_CASES": "torchscript"}
    assert list(selected_cases(tmp_path, environ)) == ["mlp-torchscript-t1"]
    assert selected_cases(tmp_path, {"SRBENCH_ASV_SUITES": "none"}) == {}
    with pytest.raises(SuiteError, match=r"SRBENCH_ASV_SUITES.*expected a path or one of one"):
        selected_cases(tmp_path, {"SRBENCH_ASV_SUITES": "missing"})
    with pytest.raises(SuiteError, match=r"SRBENCH_ASV_CASES.*regular expression"):
        selected_cases(tmp_path, {"SRBENCH_ASV_SUITES": "one", "SRBENCH_ASV_CASES": "("})
    with pytest.raises(SuiteError, match=r"have no case matching SRBENCH_ASV_CASES"):
        selected_cases(tmp_path, {"SRBENCH_ASV_SUITES": "one", "SRBENCH_ASV_CASES": "resnet"})


def test_commits_to_measure_are_those_after_the_newest_measured_oldest_first():
    history = ["e", "d", "c", "b", "a"]  # newest first
    assert commits_to_measure(history, {"b", "a"}, max_commits=10) == ["c", "d", "e"]
    assert commits_to_measure(history, {"b"}, max_commits=2) == ["d", "e"]
    assert commits_to_measure(history, set(), max_commits=10) == ["e"]  # first night: the tip only
    assert commits_to_measure(history, {"e"}, max_commits=10) == []


def test_the_newest_commit_is_compared_with_the_baseline_measured_before_the_batch():
    history = ["e", "d", "c", "b", "a"]
    assert baseline_and_newest(history, {"a", "b", "d", "e"}, batch=["d", "e"]) == ("b", "e")
    assert baseline_and_newest(history, {"a", "b"}, batch=[]) == ("a", "b")
    assert baseline_and_newest(history, {"e"}, batch=["e"]) is None


# --- (e) the nightly's exit status on a synthetic pair of results ------------------------------


def _git(repo: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *arguments],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _write_results(conf, machine: str, env_name: str, commit: str, values: dict[str, list]) -> None:
    """asv results of ``commit`` (one parametrized benchmark per entry), through asv's own API."""
    from asv import util
    from asv.results import Results
    from asv.runner import BenchmarkResult

    results_dir = conf.results_dir
    util.write_json(f"{results_dir}/{machine}/machine.json", {"machine": machine}, api_version=1)
    result = Results({"machine": machine, "python": "3"}, {}, commit, 0, "3", env_name, {})
    benchmarks = {}
    for name, numbers in values.items():
        benchmark = {
            "name": name,
            "type": "time" if ".time_" in name else "track",
            "unit": "seconds",
            "params": [["'a'", "'b'"]],
            "param_names": ["case"],
            "version": "1",
            "code": "",
        }
        benchmarks[name] = benchmark
        failed = any(n is None for n in numbers)
        result.add_result(
            benchmark,
            BenchmarkResult(
                result=numbers,
                samples=[None] * len(numbers),
                number=[None] * len(numbers),
                errcode=1 if failed else 0,
                stderr="",
                profile=None,
            ),
        )
    result.save(results_dir)
    util.write_json(f"{results_dir}/benchmarks.json", benchmarks, api_version=2)


@pytest.fixture
def measured_pair(tmp_path, monkeypatch):
    """A git repository with two commits and an asv configuration; returns a function that writes
    results for both commits and runs ``srbench nightly`` (nothing new to measure: it compares)."""
    monkeypatch.setenv("HOME", str(tmp_path))  # asv's machine file lives in ~
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    config = repo / "asv.conf.json"
    config.write_text(
        json.dumps(
            {
                "version": 1,
                "project": "synthetic",
                "repo": ".",
                "branches": ["main"],
                "environment_type": "virtualenv",
                "results_dir": "results",
                "html_dir": "html",
            }
        )
    )
    for message in ("first", "second"):
        _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    before, after = _git(repo, "rev-list", "--reverse", "main").split()
    (tmp_path / ".asv-machine.json").write_text(json.dumps({"synthetic": {"machine": "synthetic"}, "version": 1}))

    def run(before_values: dict[str, list], after_values: dict[str, list], factor: str = "1.2") -> int:
        from srbench.asv_tracking.nightly import NightlyOptions, environments

        conf = load_config(config)
        env_name = environments(NightlyOptions(config=config))[0].name
        _write_results(conf, "synthetic", env_name, before, before_values)
        _write_results(conf, "synthetic", env_name, after, after_values)
        return srbench_main(
            ["nightly", "--config", str(config), "--no-publish", "--machine", "synthetic", "--factor", factor]
        )

    run.__dict__["config"] = config  # for the test that runs the nightly itself
    return run


def test_nightly_exits_1_when_a_benchmark_got_worse_beyond_the_factor(measured_pair, capsys):
    status = measured_pair({"b.S.time_run": [1.0, 2.0]}, {"b.S.time_run": [1.5, 2.0]})
    assert status == 1
    output = capsys.readouterr().out
    assert "REGRESSION" in output and "b.S.time_run" in output, output


def test_nightly_exits_0_within_the_factor_and_on_improvements(measured_pair):
    assert measured_pair({"b.S.time_run": [1.0, 2.0]}, {"b.S.time_run": [1.1, 1.0]}) == 0


def test_nightly_counts_a_newly_failing_case_as_a_regression(measured_pair):
    assert measured_pair({"b.S.track_bytes": [10.0, 20.0]}, {"b.S.track_bytes": [10.0, None]}) == 1


@pytest.mark.parametrize("factor", ["0.9", "nan", "inf"])
def test_nightly_rejects_a_factor_that_is_not_a_ratio(measured_pair, capsys, factor):
    """``nan`` and ``inf`` passed the check (nan is not <= 1) and flagged no regression ever."""
    assert srbench_main(["nightly", "--factor", factor, "--no-publish"]) == 2
    assert "--factor must be a finite number greater than 1" in capsys.readouterr().err


def test_nightly_refuses_a_bench_pattern_that_is_not_a_regular_expression_before_asv_starts(capsys):
    assert srbench_main(["nightly", "-b", "time_(", "--no-publish"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("srbench nightly: --bench 'time_(': not a valid regular expression (missing ), ")


def test_nightly_with_a_configuration_that_is_not_json_is_one_line(tmp_path, monkeypatch, capsys):
    """json5's parse error came through asv as a traceback naming no file."""
    monkeypatch.setenv("HOME", str(tmp_path))  # asv's machine file lives in ~
    config = tmp_path / "asv.conf.json"
    config.write_text("not json\n")
    assert srbench_main(["nightly", "--config", str(config), "--no-publish", "--machine", "here"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {config}: not an asv configuration (JSON): ")


def test_nightly_refuses_suites_that_cannot_run_before_asv_starts(tmp_path, capsys):
    """``--suites nosuch`` built asv's environment first and failed in its benchmark discovery."""
    broken = tmp_path / "broken.yaml"
    broken.write_text("axes: {models: {names: [mlp]}, runtimes: [eager], threads: [2.0]}\n")
    assert srbench_main(["nightly", "--suites", "nosuch", "--no-publish"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("srbench nightly: --suites nosuch: nosuch: SRBENCH_ASV_SUITES: no such suite file;")
    assert srbench_main(["nightly", "--suites", f"quick,{broken}", "--no-publish"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"srbench nightly: --suites quick,{broken}: {broken}: axes.threads[0]: expected integer, got float 2.0"
    ]


def test_nightly_in_an_existing_environment_refuses_to_file_numbers_of_another_tree(measured_pair, capsys):
    """``--python`` measures what the interpreter imports: here srbench from this checkout, not
    from the synthetic repository, so its numbers would be filed under the wrong commit."""
    status = srbench_main(
        ["nightly", "--config", str(measured_pair.config), "--python", "--no-publish", "--machine", "synthetic"]
    )
    assert status == 2
    assert f"not from {measured_pair.config.parent}" in capsys.readouterr().err


def test_nightly_in_an_existing_environment_refuses_a_tree_with_uncommitted_changes(measured_pair, capsys):
    repo = measured_pair.config.parent
    _git(repo, "add", "asv.conf.json")
    _git(repo, "commit", "-q", "-m", "config")
    measured_pair.config.write_text(measured_pair.config.read_text() + "\n")  # a tracked file changed
    status = srbench_main(
        ["nightly", "--config", str(measured_pair.config), "--python", "--no-publish", "--machine", "synthetic"]
    )
    assert status == 2
    assert "uncommitted changes" in capsys.readouterr().err
