"""Write a comparison to a folder: JSON for machines, Markdown and HTML for people, PNG pictures.

Every file is written to a temporary name and renamed into place, so an interrupted run leaves
the previous report whole rather than half of a new one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from srbench.compare.html import html_report
from srbench.compare.pictures import layout_png, ratio_chart_png
from srbench.compare.run import Comparison
from srbench.compare.summary import summarize, summarize_by_zoo
from srbench.compare.tables import (
    PLAN_NAME_COLUMNS,
    PROVEN_MARK,
    SUMMARY_NAME_COLUMNS,
    markdown,
    plan_table,
    summary_table,
)
from srbench.fileio import atomic_path, atomic_write_text

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


def figures(comparison: Comparison, layouts: Sequence[tuple[str, str]]) -> dict[str, tuple[str, bytes]]:
    """Title -> (file name, PNG) for each zoo's ratio chart and each requested layout.

    Raises ValueError for a requested (source, planner) that has no plan, naming what exists.
    """
    drawn: dict[str, tuple[str, bytes]] = {}
    for zoo in dict.fromkeys(row.zoo for row in comparison.rows):
        rows = [row for row in comparison.rows if row.zoo == zoo]
        drawn[f"{zoo}: ratio to the lower bound"] = (
            _file_name("ratio", zoo),
            ratio_chart_png(zoo, rows, comparison.planners),
        )
    for source, planner in layouts:
        row = comparison.row(source, planner)
        if row is None:
            raise ValueError(
                f"no plan of model {source!r} by planner {planner!r} to draw; planned models: "
                f"{', '.join(comparison.sources()) or 'none'}; planners: {', '.join(comparison.planners)}"
            )
        title = f"{source} / {planner}: {row.ratio:.3f}x the lower bound"
        png = layout_png(comparison.records[source], comparison.offsets[(source, planner)], row.lower_bound, title)
        drawn[title] = (_file_name("layout", source, planner), png)
    return drawn


def write_report(
    comparison: Comparison,
    out: Path,
    layouts: Sequence[tuple[str, str]] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write compare.json, compare.md, compare.html and the PNGs (in ``out/compare-figures/``);
    returns what was written, by kind. ``layouts`` defaults to :func:`default_layouts`."""
    out = Path(out)
    summaries = summarize(comparison.rows, comparison.planners)
    by_zoo = summarize_by_zoo(comparison.rows, comparison.planners)
    pictures = figures(comparison, default_layouts(comparison) if layouts is None else layouts)
    written: dict[str, Path] = {}
    figure_dir = out / f"{STEM}-figures"
    for title, (name, png) in pictures.items():
        with atomic_path(figure_dir / name) as temporary:
            temporary.write_bytes(png)
        written[title] = figure_dir / name
    document = {
        **dict(metadata or {}),
        **comparison.to_json(),
        "summary": [asdict(s) for s in summaries],
        "summary_by_zoo": {zoo: [asdict(s) for s in rows] for zoo, rows in by_zoo.items()},
        "figures": {title: str(Path(figure_dir.name) / name) for title, (name, _) in pictures.items()},
    }
    written["json"] = out / f"{STEM}.json"
    atomic_write_text(written["json"], json.dumps(document, indent=2, default=str) + "\n")
    written["markdown"] = out / f"{STEM}.md"
    atomic_write_text(written["markdown"], _markdown(comparison, summaries, by_zoo, pictures, figure_dir.name))
    written["html"] = out / f"{STEM}.html"
    atomic_write_text(
        written["html"],
        html_report(comparison, summaries, by_zoo, {title: png for title, (_, png) in pictures.items()}),
    )
    return written


def _markdown(comparison, summaries, by_zoo, pictures, figure_dir: str) -> str:
    lines = [
        "# srbench planner comparison",
        "",
        f"Planners: {', '.join(comparison.planners)}; alignment {comparison.alignment} bytes. Ratio is total / lower "
        f"bound (most bytes alive at one step); {PROVEN_MARK} marks a proven optimum.",
        "",
        "## Summary",
        "",
        markdown(summary_table(summaries), SUMMARY_NAME_COLUMNS),
    ]
    for zoo, rows in by_zoo.items():
        lines += ["", f"### {zoo}", "", markdown(summary_table(rows), SUMMARY_NAME_COLUMNS)]
    lines += ["", "## Every plan", "", markdown(plan_table(comparison), PLAN_NAME_COLUMNS)]
    if comparison.failures:
        lines += ["", f"## Failures ({len(comparison.failures)})", ""] + [f"- {f}" for f in comparison.failures]
    if pictures:
        lines += ["", "## Pictures", ""] + [f"![{title}]({figure_dir}/{name})" for title, (name, _) in pictures.items()]
    return "\n".join(lines) + "\n"
