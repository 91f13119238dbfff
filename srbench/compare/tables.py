"""The comparison as tables: aligned text for a terminal, Markdown for a file or a pull request.

Both come from the same rows of strings (:func:`plan_table`, :func:`summary_table`), so what a
person reads in the terminal and in ``compare.md`` cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

from srbench.compare.run import Comparison
from srbench.compare.summary import PlannerSummary
from srbench.formatting import aligned_table, escape_markdown, format_bytes, format_seconds

Table = tuple[Sequence[str], Sequence[Sequence[str]]]
# Columns before this index hold names (left-aligned); the rest hold numbers (right-aligned).
PLAN_NAME_COLUMNS = 3
SUMMARY_NAME_COLUMNS = 1
PROVEN_MARK = "*"


def plan_table(comparison: Comparison) -> Table:
    header = ("MODEL", "ZOO", "PLANNER", "TENSORS", "TOTAL", "LOWER BOUND", "RATIO", "TIME")
    rows = [
        (
            row.source,
            row.zoo,
            row.planner,
            str(row.num_tensors),
            format_bytes(row.total_bytes),
            format_bytes(row.lower_bound),
            f"{row.ratio:.3f}" + (PROVEN_MARK if row.proven_optimal else ""),
            format_seconds(row.seconds),
        )
        for row in comparison.rows
    ]
    return header, rows


def summary_table(summaries: Sequence[PlannerSummary]) -> Table:
    header = ("PLANNER", "SOURCES", "GEOMEAN RATIO", "WORST RATIO", "WORST ON", "AT LOWER BOUND", "PROVEN", "TIME")
    rows = [
        (
            s.planner,
            str(s.sources),
            f"{s.geomean_ratio:.4f}",
            f"{s.worst_ratio:.3f}",
            s.worst_source or "-",
            f"{s.at_lower_bound}/{s.sources} ({s.share_at_lower_bound:.0%})",
            str(s.proven_optimal),
            format_seconds(s.seconds),
        )
        for s in summaries
    ]
    return header, rows


def aligned(table: Table, name_columns: int) -> str:
    """Text with every column padded: names left-aligned, numbers right-aligned."""
    header, rows = table
    return aligned_table(header, rows, right_aligned=range(name_columns, len(header)))


def markdown(table: Table, name_columns: int) -> str:
    """A GitHub-flavoured Markdown table (names left-aligned, numbers right-aligned)."""
    header, rows = table
    rule = ["---" if i < name_columns else "---:" for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    def escaped(cells: Sequence[str]) -> str:
        return line([escape_markdown(cell) for cell in cells])

    return "\n".join([escaped(header), line(rule), *(escaped(row) for row in rows)])


def text_report(comparison: Comparison, summaries: Sequence[PlannerSummary]) -> str:
    """What ``srbench compare`` prints: every plan, then the per-planner summary (failures are said
    on stderr as they are found, not repeated here)."""
    parts = [
        aligned(plan_table(comparison), PLAN_NAME_COLUMNS),
        "",
        aligned(summary_table(summaries), SUMMARY_NAME_COLUMNS),
    ]
    if any(row.proven_optimal for row in comparison.rows):
        parts.append(f"{PROVEN_MARK} proven optimal")
    return "\n".join(parts)
