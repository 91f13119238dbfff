"""The suite summary: one row per case, grouped by model, with the latency ratio to eager and the
memory ratios to the lower bounds; as JSON (every figure), Markdown (every figure, names escaped)
and a terminal table that fits 120 columns however large the sweep.

The figures are :data:`METRICS`, a list of :class:`Metric`: each says where its value comes from
in a case's measurements, how it reads, and whether the terminal shows it. Adding a figure to
the JSON, the Markdown and (if wanted) the terminal is one more entry there.

Built in the process that sees every report (the xdist controller, or the only process), from
what the cases put in their reports' ``user_properties``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srbench.formatting import aligned_table, escape_markdown, format_bytes

Row = dict[str, Any]

TERMINAL_WIDTH = 120
TOP_OPS = 5  # per case in the rows; the summaries show the first three of them


@dataclass(frozen=True)
class CaseOutcome:
    """What one suite case reported: pytest's outcome, the case (``None`` only for the stand-in
    of a model provider that is unavailable here), and the measurements when it ran."""

    nodeid: str
    outcome: str  # passed, failed, error, xfailed, skipped
    case: Mapping[str, Any] | None = None
    result: Mapping[str, Any] | None = None
    message: str = ""


@dataclass(frozen=True)
class Measured:
    """One case's measurements with the baselines its ratios need (eager's latency on the same
    model, batch, device and threads; the graph's lower bound, which srbench's cases report)."""

    result: Mapping[str, Any]
    eager_latency: float | None
    graph_lower_bound: int | None

    @property
    def latency(self) -> float | None:
        return (self.result.get("latency") or {}).get("median")

    @property
    def memory(self) -> Mapping[str, Any]:
        return self.result.get("memory") or {}


class Unit(enum.Enum):
    """How a figure reads."""

    MICROSECONDS = "µs"  # stored in seconds
    RATIO = "x"
    BYTES = "bytes"
    COUNT = "count"
    NUMBER = "number"

    def format(self, value: float | None) -> str:
        if value is None:
            return "n/a"
        if self is Unit.MICROSECONDS:
            return f"{value * 1e6:,.1f}"
        if self is Unit.RATIO:
            return f"{value:.2f}x"
        if self is Unit.BYTES:
            return format_bytes(int(value))
        if self is Unit.COUNT:
            return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
        return f"{value:.3g}"


@dataclass(frozen=True)
class Metric:
    """One figure of the summary: the row's JSON ``key``, its column ``header`` in Markdown, its
    ``unit``, how to get its ``value`` from a case's measurements, and its ``terminal`` header
    (short: the terminal table fits 120 columns), or ``None`` where only the files show it."""

    key: str
    header: str
    unit: Unit
    value: Callable[[Measured], float | None]
    terminal: str | None = None


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


METRICS: tuple[Metric, ...] = (
    Metric("latency_median_s", "median µs", Unit.MICROSECONDS, lambda m: m.latency, terminal="median µs"),
    Metric(
        "latency_to_eager",
        "vs eager",
        Unit.RATIO,
        lambda m: _ratio(m.latency, m.eager_latency),
        terminal="vs eager",
    ),
    Metric("planned_bytes", "planned", Unit.BYTES, lambda m: m.memory.get("planned_bytes")),
    Metric("lower_bound_bytes", "lower bound", Unit.BYTES, lambda m: m.memory.get("lower_bound")),
    Metric(
        "planned_to_lower_bound",
        "planned/LB",
        Unit.RATIO,
        lambda m: _ratio(m.memory.get("planned_bytes"), m.memory.get("lower_bound")),
        terminal="plan/LB",
    ),
    Metric("peak_bytes", "peak", Unit.BYTES, lambda m: m.memory.get("peak_bytes"), terminal="peak"),
    Metric("estimated_peak_bytes", "est. eager peak", Unit.BYTES, lambda m: m.memory.get("estimated_peak_bytes")),
    Metric("graph_lower_bound_bytes", "graph LB", Unit.BYTES, lambda m: m.graph_lower_bound),
    Metric(
        "peak_to_graph_lower_bound",
        "peak/graph LB",
        Unit.RATIO,
        lambda m: _ratio(m.memory.get("peak_bytes"), m.graph_lower_bound),
        terminal="peak/gLB",
    ),
    Metric("allocations_per_run", "allocs/run", Unit.COUNT, lambda m: m.memory.get("allocations"), terminal="allocs"),
    Metric("page_faults_per_run", "faults/run", Unit.COUNT, lambda m: m.memory.get("page_faults_per_run")),
    Metric(
        "max_abs_diff", "max abs diff", Unit.NUMBER, lambda m: (m.result.get("equivalence") or {}).get("max_abs_diff")
    ),
)
TERMINAL_LEGEND = "LB: lower bound (plan/LB: of the planned tensors; gLB: of the whole graph); allocs: per run"

# What identifies a case in a row, from its spec (``CaseSpec.to_json``), in this order.
CASE_FIELDS = ("suite", "id", "model", "runtime", "planner", "streams", "scheduler", "threads", "device", "batch")
OUTCOME_MARKS = {"passed": "ok", "failed": "FAILED", "error": "ERROR", "xfailed": "xfail", "skipped": "skip"}


def case_key(row: Mapping[str, Any]) -> str:
    """What makes two rows the same case across runs: the suite and the case id."""
    return f"{row.get('suite')}/{row.get('id')}"


def _baseline(case: Mapping[str, Any]) -> tuple[Any, ...]:
    return (case["model"], case["device"], case["batch"])


def summary_rows(outcomes: Iterable[CaseOutcome], profiles: Mapping[str, str] | None = None) -> list[Row]:
    """One row per case: its identity, outcome, every metric of :data:`METRICS`, its top ops and
    (given ``profiles``, by :func:`case_key`) where its full per-op profile was saved."""
    outcomes = list(outcomes)
    eager_latency: dict[tuple[Any, ...], float] = {}
    graph_bounds: dict[tuple[Any, ...], int] = {}
    for outcome in outcomes:
        if outcome.outcome != "passed" or not outcome.result or not outcome.case:
            continue
        reported = Measured(outcome.result, None, None)
        if outcome.case["runtime"] == "eager" and reported.latency is not None:
            eager_latency.setdefault((*_baseline(outcome.case), outcome.case["threads"]), reported.latency)
        if reported.memory.get("graph_lower_bound"):
            graph_bounds.setdefault(_baseline(outcome.case), reported.memory["graph_lower_bound"])
    rows = []
    for outcome in outcomes:
        case = outcome.case or {}
        row: Row = {field: case.get(field) for field in CASE_FIELDS}
        if not case:
            row["id"] = outcome.nodeid
        row.update(outcome=outcome.outcome, message=outcome.message)
        result = outcome.result if outcome.outcome == "passed" and outcome.result and case else None
        measured: Measured | None = None
        if result is not None:
            own_bound = (result.get("memory") or {}).get("graph_lower_bound")
            measured = Measured(
                result,
                eager_latency.get((*_baseline(case), case["threads"])),
                own_bound or graph_bounds.get(_baseline(case)),
            )
        for metric in METRICS:
            row[metric.key] = None if measured is None else metric.value(measured)
        profile = (result or {}).get("op_profile_ms") or {}
        row["top_ops_ms"] = dict(list(profile.items())[:TOP_OPS])
        row["op_time_ms"] = sum(profile.values()) if profile else None
        row["profile"] = (profiles or {}).get(case_key(row))
        rows.append(row)
    return rows


def by_model(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Rows grouped by model, models and rows in the order first seen (cases without a model,
    stand-ins of unavailable providers, under ``"-"``)."""
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row.get("model") or "-", []).append(row)
    return grouped


def counts(rows: Iterable[Row]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for row in rows:
        outcome = row.get("outcome", "passed")
        counted[outcome] = counted.get(outcome, 0) + 1
    return dict(sorted(counted.items()))


def top_ops_line(rows: Sequence[Row], shown: int = 3) -> list[str]:
    """Per runtime, the first measured case's slowest ops with their share of its op time:
    ``"srbench: aten::addmm 61%, aten::relu 20%, aten::t 9%"``."""
    lines, seen = [], set()
    for row in rows:
        runtime, ops, total = row.get("runtime"), row.get("top_ops_ms") or {}, row.get("op_time_ms")
        if runtime in seen or not ops or not total:
            continue
        seen.add(runtime)
        shares = ", ".join(f"{op} {ms / total:.0%}" for op, ms in list(ops.items())[:shown])
        lines.append(f"{runtime}: {shares}")
    return lines


def _short_id(row: Row) -> str:
    """The case id without its model (the group says it): ``srbench-greedy_by_size-cleanup-out-t1``."""
    case_id, model = str(row.get("id")), row.get("model")
    return case_id.removeprefix(f"{model}-") if model else case_id


def _cells(row: Row, metrics: Sequence[Metric]) -> list[str]:
    return [metric.unit.format(row.get(metric.key)) for metric in metrics]


def terminal_summary(rows: Sequence[Row], width: int = TERMINAL_WIDTH) -> list[str]:
    """Lines for the terminal: per model, an aligned table of its cases (the case id cut to fit
    ``width``) with the metrics marked ``terminal``, then its top ops per runtime."""
    metrics = [metric for metric in METRICS if metric.terminal]
    header = ("case", "result", *(metric.terminal or "" for metric in metrics))
    lines = [TERMINAL_LEGEND]
    for model, group in by_model(rows).items():
        outcome_counts = ", ".join(f"{count} {outcome}" for outcome, count in counts(group).items())
        lines += ["", f"{model} ({outcome_counts})"]
        cells = [
            (_short_id(row), OUTCOME_MARKS.get(row["outcome"], str(row["outcome"])), *_cells(row, metrics))
            for row in group
        ]
        table = aligned_table(header, cells, right_aligned=range(2, len(header)), max_width=width - 2, shrink=0)
        lines += ["  " + line for line in table.splitlines()]
        lines += [("  top ops, " + line)[:width] for line in top_ops_line(group)]
    return lines


def render_markdown(title: str, preamble: Sequence[str], rows: Sequence[Row]) -> str:
    """Every metric of every case, per model, then the top ops per runtime and what did not pass."""
    header = ["case", "result", *(metric.header for metric in METRICS)]
    lines = [f"# {escape_markdown(title)}", "", *preamble]
    lines.append("Counts: " + (", ".join(f"{count} {outcome}" for outcome, count in counts(rows).items()) or "none"))
    for model, group in by_model(rows).items():
        lines += ["", f"## {escape_markdown(model)}", ""]
        lines.append("| " + " | ".join(escape_markdown(cell) for cell in header) + " |")
        lines.append("|---|---|" + "---:|" * len(METRICS))
        for row in group:
            cells = [str(row.get("id")), row["outcome"], *_cells(row, METRICS)]
            lines.append("| " + " | ".join(escape_markdown(cell) for cell in cells) + " |")
        ops = top_ops_line(group)
        if ops:
            lines += ["", "Top ops (share of the op time of the runtime's first case):", ""]
            lines += [f"- {escape_markdown(line)}" for line in ops]
    failed = [row for row in rows if row["outcome"] not in ("passed",)]
    if failed:
        lines += ["", "## Not passed", ""]
        lines += [
            f"- {escape_markdown(case_key(row))}: {row['outcome']}: {escape_markdown(row.get('message') or '')}"
            for row in failed
        ]
    return "\n".join(lines) + "\n"
