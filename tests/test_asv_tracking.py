"""asv tracking without running benchmarks: atomic result files, the offline page rewrite, the
nightly's choice of commits, and its regression exit status on a synthetic pair of results."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from srbench.asv_tracking import atomic_json
from srbench.asv_tracking.nightly import baseline_and_newest, commits_to_measure
from srbench.asv_tracking.offline_html import CDN_ASSETS, OfflineAssetError, rewrite_page
from srbench.asv_tracking.suite_selection import selected_cases
from srbench.cli import main as srbench_main
from srbench.suites import SuiteError

REPO_ROOT = Path(__file__).resolve().parents[1]
ASV_WWW = Path(__import__("asv").__file__).parent / "www"


# --- (c) results are written atomically -------------------------------------------------------


class Unserialisable:
    """json.dump raises on this only after it has written everything before it."""


def test_asv_plain_writer_leaves_half_a_file_and_the_atomic_one_keeps_the_old_file(tmp_path):
    from asv import util

    original = getattr(util.write_json, "_srbench_original_write_json", util.write_json)
    data = {"a_results": ["x" * 10_000], "z_broken": Unserialisable()}

    plain = tmp_path / "plain.json"
    plain.write_text('{"old": true}')
    with pytest.raises(TypeError):
        original(str(plain), data)
    with pytest.raises(json.JSONDecodeError):  # what asv alone leaves behind when interrupted
        json.loads(plain.read_text())

    atomic = tmp_path / "atomic.json"
    atomic.write_text('{"old": true}')
    with pytest.raises(TypeError):
        atomic_json.atomic_write_json(original)(str(atomic), data)
    assert json.loads(atomic.read_text()) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atomic.json", "plain.json"]  # no temp files left

    atomic_json.atomic_write_json(original)(str(atomic), {"new": 1}, api_version=2)
    assert json.loads(atomic.read_text()) == {"new": 1, "version": 2}


def test_asv_loads_the_atomic_writer_from_the_shipped_config():
    """The same loading asv's commands do (``Command.run_from_args``), in a fresh interpreter."""
    script = textwrap.dedent(
        """
        from asv import util
        from asv.config import Config
        from asv.plugin_manager import plugin_manager
        conf = Config.load("asv.conf.json")
        for plugin in conf.plugins:
            plugin_manager.import_plugin(plugin)
        assert hasattr(util.write_json, "_srbench_original_write_json"), conf.plugins
        print("atomic")
        """
    )
    completed = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "atomic"


# --- offline HTML ------------------------------------------------------------------------------


def test_every_cdn_tag_of_asvs_page_gets_a_local_copy_and_loses_its_cdn_attributes():
    page = (ASV_WWW / "index.html").read_text()
    local = {asset.url: f"vendor/{asset.package.name}/{asset.path}" for asset in CDN_ASSETS}
    offline = rewrite_page(page, local)
    assert "https://cdn" not in offline and "code.jquery.com" not in offline
    assert "integrity=" not in offline
    for path in local.values():
        assert f'"{path}"' in offline
    assert 'href="https://github.com/airspeed-velocity/asv/"' in offline  # links are left alone


def test_a_cdn_file_without_local_copy_is_an_error_naming_it():
    page = '<script src="https://cdn.example.org/new-lib.min.js"></script>'
    with pytest.raises(OfflineAssetError, match=r"new-lib\.min\.js"):
        rewrite_page(page, {})


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
        from srbench.asv_tracking.nightly import NightlyOptions, environment_names
        from srbench.asv_tracking.regressions import load_config

        conf = load_config(config)
        env_name = environment_names(NightlyOptions(config=config))[0]
        _write_results(conf, "synthetic", env_name, before, before_values)
        _write_results(conf, "synthetic", env_name, after, after_values)
        return srbench_main(
            ["nightly", "--config", str(config), "--no-publish", "--machine", "synthetic", "--factor", factor]
        )

    run.config = config
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


def test_nightly_rejects_a_factor_that_is_not_a_ratio(measured_pair, capsys):
    assert srbench_main(["nightly", "--factor", "0.9", "--no-publish"]) == 2
    assert "--factor must be greater than 1" in capsys.readouterr().out


def test_nightly_in_an_existing_environment_refuses_to_file_numbers_of_another_tree(measured_pair, capsys):
    """``--python`` measures what the interpreter imports: here srbench from this checkout, not
    from the synthetic repository, so its numbers would be filed under the wrong commit."""
    status = srbench_main(
        ["nightly", "--config", str(measured_pair.config), "--python", "--no-publish", "--machine", "synthetic"]
    )
    assert status == 2
    assert f"not from {measured_pair.config.parent}" in capsys.readouterr().err


def test_an_asv_run_keeps_the_code_version_its_first_import_pinned(tmp_path):
    """Later imports of the same run read the pinned version's measurements (no measuring here:
    the case would fail to measure, as its runtime does not exist)."""
    import dataclasses

    from srbench.asv_tracking.case_measurements import CaseMetrics, case_file_name, load_or_measure

    (tmp_path / "one.yaml").write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [eager]\n")
    case = dataclasses.replace(selected_cases(tmp_path, {"SRBENCH_ASV_SUITES": "one"})["mlp-eager-t1"], runtime="none")
    cache = tmp_path / "cache"
    (cache / "pinned-version").mkdir(parents=True)
    (cache / "pinned-version" / case_file_name(case)).write_text(
        json.dumps(dataclasses.asdict(CaseMetrics(case.id, planned_bytes=7)))
    )
    (cache / "runs").mkdir()
    (cache / "runs" / "4242-99").write_text("pinned-version")
    assert load_or_measure([case], cache, run_key="4242-99")[case.id].planned_bytes == 7
