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


def test_a_records_file_with_gaps_is_compared_over_its_hull_saying_so(tmp_path, capsys):
    """As ``srbench plan`` does: the gaps read as alive, one line on stderr."""
    csv = tmp_path / "gapped.csv"
    csv.write_text("id,lower,upper,size,gaps\na,0,4,64,1-3\nb,1,3,64,\n")
    assert main(["compare", "--records", str(csv), "--planners", "greedy_by_size", "--out", str(tmp_path)]) == 0
    (row,) = json.loads((tmp_path / "compare.json").read_text())["rows"]
    assert row["total_bytes"] == 128
    assert f"srbench compare: {csv}: the gaps of 1 buffer(s) ('a') were read as alive" in capsys.readouterr().err


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
    assert "no out variant" in written.html.read_text()


def test_unknown_names_are_refused_with_suggestions(tmp_path, capsys):
    assert main(["compare", "--planners", "greedy_by_sise", "--out", str(tmp_path)]) == 2
    assert "did you mean 'greedy_by_size'" in capsys.readouterr().err
    assert main(["compare", "--zoo", "bultin", "--out", str(tmp_path)]) == 2
    assert "did you mean 'builtin'" in capsys.readouterr().err


def test_a_layout_of_a_plan_that_is_not_made_is_a_usage_error_before_planning(tmp_path, capsys):
    code = main(["compare", "--models", "mlp", "--planners", "naive", "--layout", "mlp:exact", "--out", str(tmp_path)])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.err == "srbench compare: --layout mlp:exact: unknown compared planner 'exact' (known: naive)\n"
    assert captured.out == "" and list(tmp_path.iterdir()) == []
    code = main(["compare", "--models", "mlp", "--planners", "naive", "--layout", "mpl:naive", "--out", str(tmp_path)])
    assert code == 2
    assert "unknown compared model 'mpl'; did you mean 'mlp'?" in capsys.readouterr().err


def csv_file(tmp_path, name: str):
    path = tmp_path / f"{name}.csv"
    write_records([R("a", 0, 1, 64), R("b", 1, 2, 128), R("c", 2, 3, 64)], path)
    return path


def test_when_nothing_can_be_planned_it_is_one_line_exit_2_and_no_report(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compare", "--records", str(tmp_path / "missing.csv"), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not out.exists()
    missing = tmp_path / "missing.csv"
    assert captured.err.splitlines() == [
        f"srbench compare: {missing}: cannot read MiniMalloc CSV: No such file or directory",
        f"srbench compare: nothing could be planned; no report written to {out}",
    ]


def test_a_failed_source_is_said_once_on_stderr_and_kept_in_the_reports(tmp_path, capsys):
    out = tmp_path / "out"
    good = csv_file(tmp_path, "good")
    assert (
        main(
            ["compare", "--records", str(good), str(tmp_path / "missing.csv"), "--planners", "naive", "--out", str(out)]
        )
        == 1
    )
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("srbench compare: ") and "missing.csv" in line and "missing.csv" not in captured.out
    assert "missing.csv" in (out / "compare.md").read_text()
    assert json.loads((out / "compare.json").read_text())["failures"] == [line.removeprefix("srbench compare: ")]


def test_names_are_text_in_pictures_markdown_and_html(tmp_path, capsys):
    """A name with TeX, Markdown and HTML in it: matplotlib must not parse it as maths (an
    unbalanced ``$`` made it fail), Markdown must not format it, HTML must not run it."""
    out = tmp_path / "out"
    nasty = csv_file(tmp_path, "$a^$ <b>x *y*")
    assert main(["compare", "--records", str(nasty), "--planners", "naive,greedy_by_size", "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
    assert sorted(p.name for p in (out / "compare-figures").iterdir()) == [
        "layout-_a_b_x_y_-greedy_by_size.png",
        "ratio-records.png",
    ]
    markdown = (out / "compare.md").read_text()
    assert "| \\$a^\\$ \\<b\\>x \\*y\\* | records | naive |" in markdown
    page = (out / "compare.html").read_text()
    assert "<b>" not in page and "$a^$ &lt;b&gt;x *y*" in page


def test_a_picture_that_cannot_be_drawn_costs_only_that_picture(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ValueError("no font (test)")

    monkeypatch.setattr("srbench.compare.output.ratio_chart_png", broken)
    out = tmp_path / "out"
    assert (
        main(["compare", "--records", str(csv_file(tmp_path, "good")), "--planners", "naive", "--out", str(out)]) == 1
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line
        == "srbench compare: cannot draw the picture 'records: ratio to the lower bound': ValueError: no font (test)"
    )
    document = json.loads((out / "compare.json").read_text())
    assert document["rows"] and "no font (test)" in document["failures"][0]
    assert "no font (test)" in (out / "compare.md").read_text()
    assert [p.name for p in (out / "compare-figures").iterdir()] == ["layout-good-naive.png"]


def test_pictures_of_an_earlier_comparison_do_not_stay_beside_the_new_ones(tmp_path, capsys):
    out = tmp_path / "out"
    first, second = csv_file(tmp_path, "first"), csv_file(tmp_path, "second")
    assert main(["compare", "--records", str(first), "--planners", "naive", "--out", str(out)]) == 0
    assert main(["compare", "--records", str(second), "--planners", "naive", "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "compare-figures").iterdir()) == [
        "layout-second-naive.png",
        "ratio-records.png",
    ]
    assert sorted(p.name for p in out.iterdir()) == ["compare-figures", "compare.html", "compare.json", "compare.md"]


def test_the_ratio_chart_tells_a_few_percent_apart_and_shows_bars_at_the_bound():
    from srbench.compare.pictures import BASELINE, CLIP_RATIO, ratio_chart

    def row(source, planner, ratio):
        return PlanRow(source, "zoo", planner, 1, int(100 * ratio), 100, ratio, 0.0, False)

    rows = [row("m", "exact", 1.0), row("m", "greedy", 1.02), row("m", "scan", 1.10), row("m", "naive", 15.6)]
    figure = ratio_chart("zoo", rows, ["exact", "greedy", "scan", "naive"])
    (axes,) = figure.axes
    assert axes.get_yscale() == "linear"
    bottom, top = axes.get_ylim()
    assert bottom == BASELINE < 1.0 and top < CLIP_RATIO * 1.1  # 15.6 does not squash the rest
    heights = [patch.get_height() for patch in axes.patches]
    assert heights[0] == pytest.approx(1.0 - BASELINE) and heights[0] > 0  # a plan at the bound shows
    assert heights[1] < heights[2] and heights[2] / heights[1] > 2  # 2% and 10% look different
    assert heights[3] == pytest.approx(CLIP_RATIO - BASELINE)  # cut off, with its value written
    assert [text.get_text() for text in axes.texts] == ["15.6x"]
    figure.canvas.draw()
    labels = [label.get_text() for label in axes.get_yticklabels() if label.get_text()]
    assert len(labels) == len(set(labels)) >= 5  # no two ticks print the same number


def test_summary_uses_the_geometric_mean_and_counts_the_lower_bound():
    def row(source, ratio, total):
        return PlanRow(source, "zoo", "p", 1, total, 100, ratio, 0.5, False)

    (summary,) = summarize([row("a", 2.0, 200), row("b", 0.5, 50), row("c", 1.0, 100)], ["p"])
    assert summary.geomean_ratio == pytest.approx(1.0)
    assert math.isclose(summary.worst_ratio, 2.0) and summary.worst_source == "a"
    assert summary.at_lower_bound == 2 and summary.sources == 3 and summary.seconds == 1.5
    (perfect,) = summarize([row("a", 1.0, 100)], ["p"])
    assert perfect.worst_source == ""  # nothing to point at when the bound is reached everywhere


def test_two_sources_of_one_name_are_a_usage_error_before_planning(tmp_path, capsys):
    """``a/x.csv`` and ``b/x.csv`` made two rows named ``x`` no one could tell apart, and their
    pictures and layouts were drawn from whichever came last."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = csv_file(tmp_path / "a", "x"), csv_file(tmp_path / "b", "x")
    out = tmp_path / "out"
    assert main(["compare", "--records", str(first), str(second), "--planners", "naive", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"srbench compare: two sources are named 'x': {first} and {second}; expected distinct names "
        "(results and saved records are filed by name)"
    ]
    assert main(["compare", "--models", "mlp,mlp", "--planners", "naive", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "srbench compare: model 'mlp' given twice; expected each source once"
    ]
    assert not out.exists()


def test_an_out_path_that_is_a_file_is_one_line(tmp_path, capsys):
    """``--out FILE`` ended in FileExistsError's traceback."""
    taken = tmp_path / "a-file"
    taken.write_text("")
    assert main(["compare", "--models", "mlp", "--planners", "naive", "--out", str(taken)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"srbench compare: {taken}: File exists"
