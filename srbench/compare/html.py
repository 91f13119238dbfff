"""The comparison as one self-contained HTML page: tables, plus every picture inlined as a
base64 PNG data: URI, so the file can be mailed or archived and still shows everything (no
scripts, no stylesheets or images fetched from anywhere)."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence

from srbench.compare.run import Comparison
from srbench.compare.summary import PlannerSummary
from srbench.compare.tables import (
    PLAN_NAME_COLUMNS,
    PROVEN_MARK,
    SUMMARY_NAME_COLUMNS,
    Table,
    plan_table,
    summary_table,
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
figure { margin: 1em 0; }
"""


def _table(table: Table, name_columns: int) -> str:
    header, rows = table
    head = "".join(f"<th>{html.escape(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{'' if i < name_columns else ' class=number'}>{html.escape(cell)}</td>" for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _image(title: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    caption = html.escape(title)
    return (
        f'<figure><img alt="{caption}" src="data:image/png;base64,{data}"><figcaption>{caption}</figcaption></figure>'
    )


def html_report(
    comparison: Comparison,
    summaries: Sequence[PlannerSummary],
    zoo_summaries: Mapping[str, Sequence[PlannerSummary]],
    figures: Mapping[str, bytes],
    title: str = "srbench planner comparison",
    failures: Sequence[str] | None = None,
) -> str:
    """The page: the per-planner summary (overall and per zoo), every plan, every picture, and the
    failures (default: the comparison's)."""
    failures = comparison.failures if failures is None else failures
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>Planners: {html.escape(', '.join(comparison.planners))}; alignment {comparison.alignment} bytes. "
        f"Ratio is total / lower bound (most bytes alive at one step); {PROVEN_MARK} marks a proven optimum.</p>",
        "<h2>Summary</h2>",
        _table(summary_table(summaries), SUMMARY_NAME_COLUMNS),
    ]
    for zoo, zoo_summary in zoo_summaries.items():
        parts += [f"<h3>{html.escape(zoo)}</h3>", _table(summary_table(zoo_summary), SUMMARY_NAME_COLUMNS)]
    parts += ["<h2>Every plan</h2>", _table(plan_table(comparison), PLAN_NAME_COLUMNS)]
    if failures:
        items = "".join(f"<li>{html.escape(failure)}</li>" for failure in failures)
        parts += [f"<h2>Failures ({len(failures)})</h2><ul>{items}</ul>"]
    if figures:
        parts.append("<h2>Pictures</h2>")
        parts += [_image(name, png) for name, png in figures.items()]
    parts.append("</body></html>")
    return "\n".join(parts)
