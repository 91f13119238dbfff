"""``srbench compare``: figures per model and planner, a summary, and reports a person can open."""

from __future__ import annotations

import json
import math
import re

import pytest

from srbench.cli import main
from srbench.compare import PlanRow, Source, SourceError, compare, summarize
from srbench.compare.output import write_report
from srbench.memory.minimalloc_csv import write_records
from srbench.memory.records import TensorUsageRecord as R

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("results")
    code = main(
        [
            "compare",
            "--models",
            "mlp,lstm_lm",
            "--planners",
            "greedy_by_size,naive,exact",
            "--time-limit",
            "2",
            "--out",
            str(out),
            "--layout",
            "mlp:naive",
        ]
    )
    return code, out


def test_writes_json_markdown_html_and_pictures(report, capsys):
    code, out = report
    assert code == 0
    document = json.loads((out / "compare.json").read_text())
    rows = {(row["source"], row["planner"]): row for row in document["rows"]}
    assert set(rows) == {(m, p) for m in ("mlp", "lstm_lm") for p in ("greedy_by_size", "naive", "exact")}
    for row in rows.values():
        assert row["zoo"] == "builtin"
        assert row["ratio"] == pytest.approx(row["total_bytes"] / row["lower_bound"])
        assert row["num_tensors"] > 0 and row["seconds"] >= 0
    assert rows[("mlp", "exact")]["proven_optimal"]
    assert rows[("mlp", "naive")]["ratio"] > 1  # naive never reuses memory
    assert document["planner_options"] == {"exact": {"time_limit": 2.0}}
    summary = {s["planner"]: s for s in document["summary"]}
    assert summary["exact"]["at_lower_bound"] == 2 and summary["exact"]["geomean_ratio"] == pytest.approx(1.0)
    assert set(document["summary_by_zoo"]) == {"builtin"}

    pictures = sorted(p.name for p in (out / "compare-figures").iterdir())
    assert pictures == ["layout-mlp-naive.png", "ratio-builtin.png"]
    assert all((out / "compare-figures" / name).read_bytes().startswith(PNG_SIGNATURE) for name in pictures)
    markdown = (out / "compare.md").read_text()
    assert "| PLANNER | SOURCES | GEOMEAN RATIO" in markdown and "](compare-figures/layout-mlp-naive.png)" in markdown


def test_html_is_self_contained(report):
    _, out = report
    page = (out / "compare.html").read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched from anywhere
    assert "<script" not in page
    assert "lstm_lm" in page and "greedy_by_size" in page


def test_prints_aligned_tables(tmp_path, capsys):
    assert main(["compare", "--models", "mlp", "--planners", "naive", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    table = printed.split("\n\n")[0].splitlines()
    assert table[0].split() == ["MODEL", "ZOO", "PLANNER", "TENSORS", "TOTAL", "LOWER", "BOUND", "RATIO", "TIME"]
    assert len({len(line) for line in table}) == 1  # every row padded to the same width
    assert "GEOMEAN RATIO" in printed


def test_records_files_are_compared_too(tmp_path, capsys):
    csv = tmp_path / "tiny.csv"
    write_records([R("a", 0, 1, 64), R("b", 1, 2, 64), R("c", 2, 3, 64)], csv)
    assert main(["compare", "--records", str(csv), "--planners", "naive,greedy_by_size", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "compare.json").read_text())["rows"]
    assert {(r["source"], r["zoo"], r["planner"], r["total_bytes"]) for r in rows} == {
        ("tiny", "records", "naive", 192),
        ("tiny", "records", "greedy_by_size", 128),
    }


def test_several_records_files_after_one_flag_or_repeated(tmp_path, capsys):
    paths = [tmp_path / f"{name}.csv" for name in ("one", "two", "three")]
    for path in paths:
        write_records([R("a", 0, 1, 64)], path)
    argv = ["--records", str(paths[0]), str(paths[1]), "--records", str(paths[2])]
    assert main(["compare", *argv, "--planners", "naive", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "compare.json").read_text())["rows"]
    assert [row["source"] for row in rows] == ["one", "two", "three"]


def test_a_source_that_fails_is_reported_and_the_rest_continue(tmp_path):
    def broken():
        raise SourceError("cannot capture model 'broken': no out variant")

    sources = [Source("broken", "builtin", broken), Source("fine", "builtin", lambda: [R("x", 0, 0, 64)])]
    comparison = compare(sources, ["naive"], alignment=64, progress=False)
    assert comparison.failures == ["cannot capture model 'broken': no out variant"]
    assert [row.source for row in comparison.rows] == ["fine"]
    written = write_report(comparison, tmp_path)
    assert "no out variant" in written["html"].read_text()


def test_unknown_names_are_refused_with_suggestions(tmp_path, capsys):
    assert main(["compare", "--planners", "greedy_by_sise", "--out", str(tmp_path)]) == 2
    assert "did you mean 'greedy_by_size'" in capsys.readouterr().err
    assert main(["compare", "--zoo", "bultin", "--out", str(tmp_path)]) == 2
    assert "did you mean 'builtin'" in capsys.readouterr().err


def test_a_layout_of_a_plan_that_does_not_exist_is_a_clear_error(tmp_path, capsys):
    code = main(["compare", "--models", "mlp", "--planners", "naive", "--layout", "mlp:exact", "--out", str(tmp_path)])
    assert code == 2
    assert "no plan of model 'mlp' by planner 'exact'" in capsys.readouterr().err


def test_summary_uses_the_geometric_mean_and_counts_the_lower_bound():
    def row(source, ratio, total):
        return PlanRow(source, "zoo", "p", 1, total, 100, ratio, 0.5, False)

    (summary,) = summarize([row("a", 2.0, 200), row("b", 0.5, 50), row("c", 1.0, 100)], ["p"])
    assert summary.geomean_ratio == pytest.approx(1.0)
    assert math.isclose(summary.worst_ratio, 2.0) and summary.worst_source == "a"
    assert summary.at_lower_bound == 2 and summary.sources == 3 and summary.seconds == 1.5
    (perfect,) = summarize([row("a", 1.0, 100)], ["p"])
    assert perfect.worst_source == ""  # nothing to point at when the bound is reached everywhere
