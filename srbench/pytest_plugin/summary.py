"""The session summary: per model, every runtime and planner measured, with the latency ratio to
eager and the memory ratio to the lower bound, as JSON and Markdown in ``results/``.

Built in the process that sees every report (the xdist controller, or the only process), from
the results the cases put in their reports' ``user_properties``; files are written to a
temporary name and moved into place, so a reader never sees half a file.
"""

from __future__ import annotations

import datetime
import json
import pathlib
from dataclasses import dataclass
from typing import Any

from srbench.fileio import atomic_write_text

SUMMARY_NAME = "suites-summary"


@dataclass(frozen=True)
class CaseOutcome:
    """What one suite case reported: pytest's outcome, and the measurements when it ran."""

    nodeid: str
    outcome: str  # passed, failed, xfailed, skipped
    result: dict[str, Any] | None = None
    message: str = ""


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


def summary_rows(outcomes: list[CaseOutcome]) -> dict[str, list[dict[str, Any]]]:
    """Rows per model, one per measured case, with ratios to eager and to the lower bound."""
    measured = [o.result for o in outcomes if o.outcome == "passed" and o.result]
    eager_latency: dict[tuple, float] = {}
    lower_bounds: dict[tuple, int] = {}
    for result in measured:
        case = result["case"]
        shape = (case["model"], case["device"], case["batch"])
        latency = (result.get("latency") or {}).get("median")
        if case["runtime"] == "eager" and latency is not None:
            eager_latency.setdefault((*shape, case["threads"]), latency)
        bound = (result.get("memory") or {}).get("graph_lower_bound")
        if bound:
            lower_bounds.setdefault(shape, bound)
    rows: dict[str, list[dict[str, Any]]] = {}
    for result in measured:
        case, memory = result["case"], result.get("memory") or {}
        shape = (case["model"], case["device"], case["batch"])
        latency = (result.get("latency") or {}).get("median")
        graph_bound = memory.get("graph_lower_bound") or lower_bounds.get(shape)
        rows.setdefault(case["model"], []).append(
            {
                "id": case["id"],
                "suite": case["suite"],
                "runtime": case["runtime"],
                "planner": case["planner"],
                "threads": case["threads"],
                "device": case["device"],
                "batch": case["batch"],
                "latency_median_s": latency,
                "latency_to_eager": _ratio(latency, eager_latency.get((*shape, case["threads"]))),
                "planned_bytes": memory.get("planned_bytes"),
                "lower_bound_bytes": memory.get("lower_bound"),
                "planned_to_lower_bound": _ratio(memory.get("planned_bytes"), memory.get("lower_bound")),
                "graph_lower_bound_bytes": graph_bound,
                "peak_bytes": memory.get("peak_bytes"),
                "peak_to_graph_lower_bound": _ratio(memory.get("peak_bytes"), graph_bound),
                "allocations_per_run": memory.get("allocations"),
                "page_faults_per_run": memory.get("page_faults_per_run"),
                "max_abs_diff": result["equivalence"]["max_abs_diff"],
            }
        )
    return rows


def build_summary(outcomes: list[CaseOutcome], *, timed: bool) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.outcome] = counts.get(outcome.outcome, 0) + 1
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "timed": timed,
        "counts": counts,
        "models": summary_rows(outcomes),
        "not_passed": [
            {"nodeid": o.nodeid, "outcome": o.outcome, "message": o.message} for o in outcomes if o.outcome != "passed"
        ],
    }


def _cell(value: Any, kind: str = "") -> str:
    if value is None:
        return "n/a"
    if kind == "us":
        return f"{value * 1e6:,.1f}"
    if kind == "x":
        return f"{value:.2f}x"
    if kind == "bytes":
        return f"{value / 1024:,.0f} KiB" if value >= 1024 else f"{value} B"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


COLUMNS = (
    ("case", "id", ""),
    ("median µs", "latency_median_s", "us"),
    ("vs eager", "latency_to_eager", "x"),
    ("planned", "planned_bytes", "bytes"),
    ("lower bound", "lower_bound_bytes", "bytes"),
    ("planned/LB", "planned_to_lower_bound", "x"),
    ("peak", "peak_bytes", "bytes"),
    ("graph LB", "graph_lower_bound_bytes", "bytes"),
    ("peak/graph LB", "peak_to_graph_lower_bound", "x"),
    ("allocs/run", "allocations_per_run", ""),
    ("faults/run", "page_faults_per_run", ""),
)


def render_markdown(summary: dict[str, Any]) -> str:
    lines = ["# srbench suite summary", "", f"Created {summary['created']}."]
    if not summary["timed"]:
        lines.append("Latency: n/a (run with `--benchmark`, without `-n`: pytest-benchmark does not time under xdist).")
    lines.append("Counts: " + ", ".join(f"{count} {outcome}" for outcome, count in sorted(summary["counts"].items())))
    for model, rows in summary["models"].items():
        lines += ["", f"## {model}", "", "| " + " | ".join(c[0] for c in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(_cell(row[key], kind) for _, key, kind in COLUMNS) + " |" for row in rows]
    if summary["not_passed"]:
        lines += ["", "## Not passed", ""]
        lines += [f"- `{item['nodeid']}`: {item['outcome']}: {item['message']}" for item in summary["not_passed"]]
    return "\n".join(lines) + "\n"


def write_summary(summary: dict[str, Any], directory: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    json_path, markdown_path = directory / f"{SUMMARY_NAME}.json", directory / f"{SUMMARY_NAME}.md"
    atomic_write_text(json_path, json.dumps(summary, indent=2) + "\n")
    atomic_write_text(markdown_path, render_markdown(summary))
    return json_path, markdown_path
