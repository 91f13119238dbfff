"""The suite summary and where it is kept: ratios computed from what the cases reported, every
run in its own folder, a merged view per case that only complete runs update, a terminal table
that fits 120 columns, names escaped in Markdown."""

from __future__ import annotations

import datetime
import json

import markdown_it
import pytest
from markdown_it.common.utils import escapeHtml

from srbench.pytest_plugin.results import MERGED_NAME, RunStatus, SessionRun, write_run
from srbench.pytest_plugin.summary import METRICS, CaseOutcome, render_markdown, summary_rows, terminal_summary

STARTED = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def _case(runtime: str, model: str = "m", suite: str = "s", case_id: str | None = None) -> dict:
    return {
        "id": case_id or f"{model}-{runtime}",
        "suite": suite,
        "model": model,
        "runtime": runtime,
        "planner": None,
        "threads": 1,
        "device": "cpu",
        "batch": None,
    }


def _result(*, latency, peak, planned=None, lower=None, graph_lower=None, ops=None):
    memory = {
        "planned_bytes": planned,
        "lower_bound": lower,
        "graph_lower_bound": graph_lower,
        "peak_bytes": peak,
        "allocations": 1,
        "page_faults_per_run": 0.0,
    }
    return {
        "latency": {"median": latency},
        "memory": memory,
        "equivalence": {"max_abs_diff": 0.0},
        "op_profile_ms": ops or {"aten::addmm": 0.6, "aten::relu": 0.3, "aten::t": 0.1},
    }


def passed(runtime: str, model: str = "m", **measured) -> CaseOutcome:
    measured.setdefault("latency", 1e-3)
    measured.setdefault("peak", 1024)
    case = _case(runtime, model)
    return CaseOutcome(f"s.yaml::case[{case['id']}]", "passed", case, _result(**measured))


def session(*outcomes: CaseOutcome, status: RunStatus = RunStatus.COMPLETE, started=STARTED) -> SessionRun:
    reason = "" if status is RunStatus.COMPLETE else "interrupted"
    return SessionRun(list(outcomes), status, started, ["pytest", "suites/s.yaml", "--benchmark"], True, reason)


def test_ratios_are_to_eager_and_to_the_lower_bounds():
    outcomes = [
        passed("eager", latency=2e-3, peak=30720),
        passed("srbench", latency=1e-3, peak=15360, planned=12288, lower=10240, graph_lower=10240),
        CaseOutcome("s.yaml::case[m-torchscript]", "xfailed", _case("torchscript"), None, "UnsupportedRuntime: no"),
    ]
    eager, srbench, torchscript = summary_rows(outcomes)
    assert srbench["latency_to_eager"] == 0.5 and srbench["planned_to_lower_bound"] == 1.2
    assert srbench["peak_to_graph_lower_bound"] == 1.5
    assert eager["peak_to_graph_lower_bound"] == 3.0  # the graph's lower bound, from srbench's case
    assert torchscript["outcome"] == "xfailed" and torchscript["latency_median_s"] is None
    assert srbench["top_ops_ms"] == {"aten::addmm": 0.6, "aten::relu": 0.3, "aten::t": 0.1}
    markdown = render_markdown("title", [], summary_rows(outcomes))
    assert (
        "| m-srbench | passed | 1,000.0 | 0.50x | 12 KiB | 10 KiB | 1.20x | 15 KiB | n/a | 10 KiB | 1.50x | 1 | 0 | 0 |"
        in (markdown)
    )
    assert "- srbench: aten::addmm 60%, aten::relu 30%, aten::t 10%" in markdown  # the top ops per model
    assert "- s/m-torchscript: xfailed: UnsupportedRuntime: no" in markdown


def test_every_metric_reaches_the_json_and_the_markdown():
    (row,) = summary_rows([passed("srbench", planned=2048, lower=1024, graph_lower=1024)])
    assert all(metric.key in row for metric in METRICS)
    header = render_markdown("t", [], [row]).splitlines()[6]
    assert all(metric.header in header for metric in METRICS)


def test_each_run_has_its_folder_with_summary_and_per_op_profiles(tmp_path):
    written = write_run(tmp_path, session(passed("eager"), passed("srbench")))
    assert written.run_dir == tmp_path / "runs" / "20260102T030405Z"
    summary = json.loads((written.run_dir / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["counts"] == {"passed": 2}
    (_, srbench) = summary["models"]["m"]
    assert srbench["profile"] == "runs/20260102T030405Z/profiles/s/m-srbench.json"
    profile = json.loads((tmp_path / srbench["profile"]).read_text())
    assert profile["op_profile_ms"] == {"aten::addmm": 0.6, "aten::relu": 0.3, "aten::t": 0.1}
    assert profile["case"]["runtime"] == "srbench"
    assert (written.run_dir / "summary.md").read_text().startswith("# srbench suite run 20260102T030405Z")


def test_the_merged_view_keeps_the_latest_complete_result_of_every_case(tmp_path):
    first = write_run(tmp_path, session(passed("eager", latency=2e-3), passed("srbench", latency=1e-3)))
    merged_path = tmp_path / f"{MERGED_NAME}.json"
    merged_before = merged_path.read_bytes()

    # An interrupted run (here with a slower srbench) has its own folder, marked partial, and
    # leaves the merged view as it was.
    partial = write_run(tmp_path, session(passed("srbench", latency=9e-3), status=RunStatus.PARTIAL))
    assert partial.merged is None and merged_path.read_bytes() == merged_before
    assert json.loads((partial.run_dir / "summary.json").read_text())["status"] == "partial"
    assert "**Partial run** (interrupted)" in (partial.run_dir / "summary.md").read_text()

    # A complete run of one case (pytest -k) replaces that case only; the other keeps its run.
    later = STARTED + datetime.timedelta(hours=1)
    third = write_run(tmp_path, session(passed("srbench", latency=5e-4), started=later))
    merged = json.loads(merged_path.read_text())
    rows = {row["runtime"]: row for row in merged["models"]["m"]}
    assert rows["eager"]["run"] == first.run_id and rows["srbench"]["run"] == third.run_id
    assert rows["srbench"]["latency_median_s"] == 5e-4
    assert merged["runs"] == [first.run_id, third.run_id] and merged["counts"] == {"passed": 2}
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [first.run_id, partial.run_id, third.run_id]
    assert partial.run_id == "20260102T030405Z-2"  # same start second as the first: never overwritten


def test_a_merged_view_that_cannot_be_read_is_set_aside_not_overwritten(tmp_path):
    (tmp_path / f"{MERGED_NAME}.json").write_text("{not json")
    written = write_run(tmp_path, session(passed("eager")))
    assert written.set_aside is not None and written.set_aside.read_text() == "{not json"
    assert json.loads((tmp_path / f"{MERGED_NAME}.json").read_text())["counts"] == {"passed": 1}


def test_a_summary_of_an_earlier_version_is_merged_not_lost(tmp_path):
    legacy = {
        "created": "earlier",
        "timed": True,
        "models": {"old": [{**_case("eager", "old"), "latency_median_s": 1}]},
    }
    (tmp_path / f"{MERGED_NAME}.json").write_text(json.dumps(legacy))
    write_run(tmp_path, session(passed("eager")))
    models = json.loads((tmp_path / f"{MERGED_NAME}.json").read_text())["models"]
    assert set(models) == {"old", "m"} and models["old"][0]["outcome"] == "passed"


def test_the_terminal_summary_of_a_large_sweep_is_grouped_per_model_and_fits_120_columns():
    flags = ["cleanup-out", "nocleanup-out", "cleanup-noout", "cleanup-out-managed"]  # as the shipped suites' ids
    outcomes = []
    for model in ("transformer_encoder", "resnet18", "hf_t5_encoder"):
        outcomes.append(passed("eager", model))
        for planner in ("greedy_by_size", "greedy_by_breadth", "linear_scan", "storage_groups"):
            for flag in flags:
                for device in ("", "-cuda"):
                    case_id = f"{model}-srbench-{planner}-{flag}-t1{device}"
                    case = _case("srbench", model, case_id=case_id)
                    outcomes.append(CaseOutcome(case_id, "passed", case, _result(latency=1e-3, peak=2**20)))
    lines = terminal_summary(summary_rows(outcomes))
    assert len(outcomes) == 99 and max(len(line) for line in lines) <= 120
    assert [line for line in lines if line and not line.startswith(" ")] == [
        "LB: lower bound (plan/LB: of the planned tensors; gLB: of the whole graph); allocs: per run",
        "transformer_encoder (33 passed)",
        "resnet18 (33 passed)",
        "hf_t5_encoder (33 passed)",
    ]
    assert any("srbench-greedy_by_breadth-cleanup-out-managed-t1-cuda" in line for line in lines)  # ids kept whole
    assert any(line.startswith("  top ops, srbench: aten::addmm 60%") for line in lines)


@pytest.mark.parametrize("name", ["<b>net</b>", "a|b", "$x_1$", "*star*"])
def test_names_are_escaped_in_markdown(name):
    case = _case("eager", model=name, case_id=f"{name}-eager")
    markdown = render_markdown("t", [], summary_rows([CaseOutcome("x", "passed", case, _result(latency=1, peak=1))]))
    page = markdown_it.MarkdownIt("commonmark").enable("table").render(markdown)
    assert f"<h2>{escapeHtml(name)}</h2>" in page
    assert f"<td>{escapeHtml(name)}-eager</td><td>passed</td>" in page.replace("\n", "")
