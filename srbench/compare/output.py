"""Write a comparison to a folder: JSON for machines, Markdown and HTML for people, PNG pictures.

Every file is written to a temporary name and renamed into place, and the pictures' folder is
replaced as a whole, so an interrupted run leaves the previous report whole rather than half of a
new one, and the folder never holds pictures of two comparisons.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from srbench.compare.html import html_report
from srbench.compare.pictures import layout_png, ratio_chart_png
from srbench.compare.run import Comparison
from srbench.compare.summary import PlannerSummary, summarize, summarize_by_zoo
from srbench.compare.tables import (
    PLAN_NAME_COLUMNS,
    PROVEN_MARK,
    SUMMARY_NAME_COLUMNS,
    markdown,
    plan_table,
    summary_table,
)
from srbench.fileio import atomic_directory, atomic_write_text
from srbench.formatting import escape_markdown

STEM = "compare"


def default_layouts(comparison: Comparison) -> list[tuple[str, str]]:
    """(source, planner) of each source's smallest plan (earliest planner on a tie)."""
    chosen = []
    for source in comparison.sources():
        rows = [row for row in comparison.rows if row.source == source]
        chosen.append((source, min(rows, key=lambda row: row.total_bytes).planner))
    return chosen


def _file_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts)) + ".png"


@dataclass(frozen=True)
class Picture:
    """One drawn picture: its title (caption and alt text), file name and PNG bytes."""

    title: str
    file_name: str
    png: bytes


def figures(comparison: Comparison, layouts: Sequence[tuple[str, str]]) -> tuple[list[Picture], list[str]]:
    """Each zoo's ratio chart and each requested layout, and one line per picture that could not
    be drawn (a layout of a plan that does not exist, or an error inside matplotlib): a picture
    that fails costs that picture, never the report."""
    drawn: list[Picture] = []
    failures: list[str] = []

    def draw(title: str, file_name: str, make_png: Callable[[], bytes]) -> None:
        try:
            drawn.append(Picture(title, file_name, make_png()))
        except Exception as error:  # matplotlib raises many kinds (layout, fonts, text): report any
            failures.append(f"cannot draw the picture {title!r}: {type(error).__name__}: {error}")

    for zoo in dict.fromkeys(row.zoo for row in comparison.rows):
        rows = [row for row in comparison.rows if row.zoo == zoo]
        draw(
            f"{zoo}: ratio to the lower bound",
            _file_name("ratio", zoo),
            functools.partial(ratio_chart_png, zoo, rows, comparison.planners),
        )
    for source, planner in layouts:
        row = comparison.row(source, planner)
        if row is None:
            failures.append(f"no plan of model {source!r} by planner {planner!r} to draw")
            continue
        title = f"{source} / {planner}: {row.ratio:.3f}x the lower bound"
        records, offsets = comparison.records[source], comparison.offsets[(source, planner)]
        draw(
            title,
            _file_name("layout", source, planner),
            functools.partial(layout_png, records, offsets, row.lower_bound, title),
        )
    return drawn, failures


@dataclass(frozen=True)
class Written:
    """What :func:`write_report` wrote, and the pictures it could not draw."""

    json: Path
    markdown: Path
    html: Path
    figure_dir: Path
    pictures: list[Path]
    failures: list[str]


def write_report(
    comparison: Comparison,
    out: Path,
    layouts: Sequence[tuple[str, str]] | None = None,
    metadata: Mapping[str, Any] | None = None,
    extra_pictures: Sequence[Picture] = (),
) -> Written:
    """Write compare.json, compare.md, compare.html and the PNGs (``out/compare-figures/``,
    replaced as a whole: it never mixes pictures of this comparison with an earlier one's).
    ``layouts`` defaults to :func:`default_layouts`. Pictures that cannot be drawn are left out
    and listed in the result's ``failures`` (and in the reports). ``extra_pictures`` (drawn by the
    caller, such as ``srbench observe``'s live-bytes pictures) are written and shown with the others."""
    out = Path(out)
    summaries = summarize(comparison.rows, comparison.planners)
    by_zoo = summarize_by_zoo(comparison.rows, comparison.planners)
    pictures, picture_failures = figures(comparison, default_layouts(comparison) if layouts is None else layouts)
    pictures += extra_pictures
    figure_dir = out / f"{STEM}-figures"
    with atomic_directory(figure_dir) as temporary:
        for picture in pictures:
            (temporary / picture.file_name).write_bytes(picture.png)
    failures = [*comparison.failures, *picture_failures]
    document = {
        **dict(metadata or {}),
        **comparison.to_json(),
        "failures": failures,
        "summary": [asdict(s) for s in summaries],
        "summary_by_zoo": {zoo: [asdict(s) for s in rows] for zoo, rows in by_zoo.items()},
        "figures": {picture.title: f"{figure_dir.name}/{picture.file_name}" for picture in pictures},
    }
    written = Written(
        json=out / f"{STEM}.json",
        markdown=out / f"{STEM}.md",
        html=out / f"{STEM}.html",
        figure_dir=figure_dir,
        pictures=[figure_dir / picture.file_name for picture in pictures],
        failures=picture_failures,
    )
    atomic_write_text(written.json, json.dumps(document, indent=2, default=str) + "\n")
    atomic_write_text(written.markdown, _markdown(comparison, summaries, by_zoo, pictures, failures, figure_dir.name))
    atomic_write_text(
        written.html,
        html_report(comparison, summaries, by_zoo, {p.title: p.png for p in pictures}, failures=failures),
    )
    return written


def _markdown(
    comparison: Comparison,
    summaries: Sequence[PlannerSummary],
    by_zoo: Mapping[str, Sequence[PlannerSummary]],
    pictures: Sequence[Picture],
    failures: Sequence[str],
    figure_dir: str,
) -> str:
    planners = ", ".join(escape_markdown(planner) for planner in comparison.planners)
    lines = [
        "# srbench planner comparison",
        "",
        f"Planners: {planners}; alignment {comparison.alignment} bytes. Ratio is total / lower "
        f"bound (most bytes alive at one step); {escape_markdown(PROVEN_MARK)} marks a proven optimum.",
        "",
        "## Summary",
        "",
        markdown(summary_table(summaries), SUMMARY_NAME_COLUMNS),
    ]
    for zoo, rows in by_zoo.items():
        lines += ["", f"### {escape_markdown(zoo)}", "", markdown(summary_table(rows), SUMMARY_NAME_COLUMNS)]
    lines += ["", "## Every plan", "", markdown(plan_table(comparison), PLAN_NAME_COLUMNS)]
    if failures:
        lines += ["", f"## Failures ({len(failures)})", ""] + [f"- {escape_markdown(f)}" for f in failures]
    if pictures:
        lines += ["", "## Pictures", ""]
        lines += [f"![{escape_markdown(p.title)}]({figure_dir}/{p.file_name})" for p in pictures]
    return "\n".join(lines) + "\n"
