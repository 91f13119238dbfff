"""What running on several streams costs in memory and gains in time: per model and planner, the
slab planned for N streams beside the slab for one, and, where a suite measured it, the latency.

A model's graph is scheduled (every op, costs estimated from its shapes) by each scheduler on N
streams, then planned for that schedule (:func:`srbench.memory.concurrency.plan_concurrent_memory`).
A schedule that keeps everything on one stream costs nothing more: the runtime then runs its
ordinary one-stream program. Beside the bytes, the scheduler's own estimate of the speed-up
(one-stream estimated time over the schedule's), which is what the bytes buy. Measured gains come
from a suite's ``--benchmark`` summary (``suites/streams.yaml``): each case on several streams
beside the same case on one stream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srbench.memory.sources import SourceError

if TYPE_CHECKING:
    import torch.fx

    from srbench.memory.lifetimes import LifetimeAnalysis

SCHEDULERS = ("critical_path", "parallel_steps")


@dataclass(frozen=True)
class StreamBytes:
    """One model, planner, scheduler and stream count."""

    model: str
    planner: str
    scheduler: str
    streams: int  # asked for
    streams_used: int  # in the schedule
    total_bytes: int
    one_stream_bytes: int
    lower_bound: int  # the schedule's issue order run on one stream
    estimated_speedup: float  # the scheduler's estimate, one stream's time over this schedule's

    @property
    def ratio(self) -> float:
        """Bytes against one stream's (1.0 when neither needs any)."""
        return self.total_bytes / self.one_stream_bytes if self.one_stream_bytes else 1.0


def stream_bytes(
    model: str,
    graph: torch.fx.Graph,
    analysis: LifetimeAnalysis,
    planners: Sequence[str],
    streams: Sequence[int],
    schedulers: Sequence[str] = SCHEDULERS,
    planner_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[StreamBytes]:
    """The rows of one model (see the module docstring); ``planner_options`` by planner name."""
    from srbench.memory.concurrency import plan_concurrent_memory
    from srbench.planners import plan_memory
    from srbench.schedulers import schedule_graph
    from srbench.schedulers.from_fx import op_graph, tensor_uses
    from srbench.schedulers.timeline import estimate

    records = list(analysis.records)
    ops = op_graph(graph, analysis)
    uses = tensor_uses(graph, analysis, set(ops.ops))
    sequential = estimate(ops, schedule_graph(ops, "sequential", streams=1)).seconds
    schedules = {(name, count): schedule_graph(ops, name, streams=count) for name in schedulers for count in streams}
    rows = []
    for planner in planners:
        given = dict((planner_options or {}).get(planner, {}))
        one = plan_memory(records, planner, **given) if records else None
        for (scheduler, count), schedule in schedules.items():
            if schedule.num_streams > 1 and one is not None:
                result = plan_concurrent_memory(records, uses, schedule, planner, **given)
                total, bound = result.plan.total_bytes, result.lower_bound
            else:
                total, bound = (one.plan.total_bytes, one.lower_bound) if one else (0, 0)
            seconds = estimate(ops, schedule).seconds if schedule.num_streams > 1 else sequential
            rows.append(
                StreamBytes(
                    model,
                    planner,
                    scheduler,
                    count,
                    schedule.num_streams,
                    total,
                    one.plan.total_bytes if one else 0,
                    bound,
                    sequential / seconds if seconds else 1.0,
                )
            )
    return rows


def stream_bytes_of_models(
    names: Sequence[str],
    planners: Sequence[str],
    streams: Sequence[int],
    schedulers: Sequence[str] = SCHEDULERS,
    *,
    planner_options: Mapping[str, Mapping[str, Any]] | None = None,
    batch: int | None = None,
    decompose: bool = False,
) -> tuple[list[StreamBytes], list[str]]:
    """Rows for the zoo models ``names``; a model that cannot be captured is one line in the
    failures and the others go on."""
    from srbench.memory.lifetimes import LifetimeError, analyze_lifetimes
    from srbench.memory.sources import model_graph
    from srbench.zoo import load_zoo

    zoo = load_zoo()
    rows: list[StreamBytes] = []
    failures = []
    for name in names:
        try:
            captured = model_graph(zoo, name, batch=batch, decompose=decompose)
            analysis = analyze_lifetimes(captured.graph)
        except (SourceError, LifetimeError) as error:
            failures.append(f"{name}: {error}")
            continue
        rows += stream_bytes(name, captured.graph, analysis, planners, streams, schedulers, planner_options)
    return rows, failures


def report_streams(
    names: Sequence[str],
    planners: Sequence[str],
    streams: Sequence[int],
    schedulers: Sequence[str],
    out: Path,
    suite_summary: Path,
    *,
    planner_options: Mapping[str, Mapping[str, Any]] | None = None,
    batch: int | None = None,
    decompose: bool = False,
) -> tuple[str, list[str]]:
    """What ``srbench compare --streams`` prints (bytes, then measured gains where a suite summary
    has them), written also to ``compare-streams.json`` and ``.md`` in ``out``; and the
    failures."""
    import json

    from srbench.fileio import atomic_write_text

    rows, failures = stream_bytes_of_models(
        names, planners, streams, schedulers, planner_options=planner_options, batch=batch, decompose=decompose
    )
    gains = latency_gains(_summary_rows(suite_summary, failures))
    text = "bytes on several streams against one (used: streams the schedule uses; est.: its estimated speed-up)\n\n"
    text += streams_table(rows) + "\n"
    if gains:
        text += f"\nmeasured gains ({suite_summary})\n\n" + gains_table(gains) + "\n"
    else:
        text += f"\nno measured gains: run `pytest suites/streams.yaml --benchmark` (reads {suite_summary})\n"
    out.mkdir(parents=True, exist_ok=True)
    document = {"bytes": [asdict(row) for row in rows], "gains": [asdict(gain) for gain in gains]}
    atomic_write_text(out / "compare-streams.json", json.dumps(document, indent=2) + "\n")
    atomic_write_text(out / "compare-streams.md", "# srbench compare: streams\n\n```\n" + text + "```\n")
    return text, failures


def _summary_rows(path: Path, failures: list[str]) -> list[dict[str, Any]]:
    import json

    if not path.exists():
        return []
    try:  # the merged suite summary (srbench.pytest_plugin.results): rows grouped by model
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        failures.append(f"cannot read suite results {path}: {error}")
        return []
    # Another JSON file given by mistake said only "'models'" (a KeyError's text), or stopped
    # the comparison with a traceback where a row was not an object.
    models = document.get("models") if isinstance(document, dict) else None
    if not isinstance(models, dict):
        failures.append(
            f"cannot read suite results {path}: expected a suite summary, a JSON object whose 'models' "
            f"maps each model to its case rows; got {type(document).__name__} without it"
        )
        return []
    rows = []
    for model, model_rows in models.items():
        for index, row in enumerate(model_rows if isinstance(model_rows, list) else [model_rows]):
            if not (isinstance(row, dict) and {"id", "model"} <= row.keys()):
                failures.append(
                    f"cannot read suite results {path}: models.{model}[{index}]: expected a case row "
                    f"(an object with 'id' and 'model'), got {row!r:.80}"
                )
                return []
            rows.append(row)
    return rows


def _cell(row: StreamBytes, format_bytes: Callable[[int], str]) -> str:
    return f"{format_bytes(row.total_bytes)} {row.ratio:.2f}x ({row.streams_used}, {row.estimated_speedup:.2f}x)"


def streams_table(rows: Sequence[StreamBytes]) -> str:
    """One line per model, planner and scheduler: bytes on one stream, then per stream count the
    bytes, their ratio to one stream's, the streams the schedule uses and its estimated speed-up."""
    from srbench.formatting import aligned_table, format_bytes

    counts = sorted({row.streams for row in rows if row.streams > 1})
    keys = list(dict.fromkeys((row.model, row.planner, row.scheduler) for row in rows))
    header = ("model", "planner", "scheduler", "1 stream", *(f"{n} streams (used, est. speed-up)" for n in counts))
    body = []
    for model, planner, scheduler in keys:
        mine = {r.streams: r for r in rows if (r.model, r.planner, r.scheduler) == (model, planner, scheduler)}
        first = next(iter(mine.values()))
        cells = [model, planner, scheduler, format_bytes(first.one_stream_bytes)]
        for n in counts:
            row = mine.get(n)
            cells.append("" if row is None else _cell(row, format_bytes))
        body.append(tuple(cells))
    return aligned_table(header, body)


@dataclass(frozen=True)
class LatencyGain:
    """A measured srbench case on several streams beside the same case on one stream (from a
    suite's ``--benchmark`` summary)."""

    suite: str
    case: str
    model: str
    streams: int
    scheduler: str
    seconds: float
    one_stream_seconds: float

    @property
    def gain(self) -> float:
        return self.one_stream_seconds / self.seconds


def _one_stream_id(row: Mapping[str, Any]) -> str:
    """The id of the same case on one stream: the id without the parts the streams and the
    scheduler options add to it."""
    from srbench.options import options_of

    parts = {
        option.info.id_part(row.get(option.name, option.default))
        for option in options_of()
        if option.name in ("streams", "scheduler")
    }
    return "-".join(part for part in str(row["id"]).split("-") if part not in parts)


def latency_gains(rows: Iterable[Mapping[str, Any]]) -> list[LatencyGain]:
    """Every measured case with ``streams`` > 1 whose one-stream twin was measured too."""
    rows = [
        row
        for row in rows
        if isinstance(row.get("latency_median_s"), (int, float)) and row["latency_median_s"] > 0
        if isinstance(row.get("streams"), int) and row["streams"] > 0
    ]
    one_stream = {(row.get("suite"), row["id"]): row["latency_median_s"] for row in rows if row["streams"] == 1}
    gains = []
    for row in rows:
        if row["streams"] > 1 and (baseline := one_stream.get((row.get("suite"), _one_stream_id(row)))):
            gains.append(
                LatencyGain(
                    str(row.get("suite")),
                    str(row["id"]),
                    str(row["model"]),
                    int(row["streams"]),
                    str(row.get("scheduler")),
                    float(row["latency_median_s"]),
                    float(baseline),
                )
            )
    return gains


def gains_table(gains: Sequence[LatencyGain]) -> str:
    from srbench.formatting import aligned_table

    body = [
        (
            gain.model,
            gain.scheduler,
            str(gain.streams),
            f"{gain.one_stream_seconds * 1e6:,.0f}",
            f"{gain.seconds * 1e6:,.0f}",
            f"{gain.gain:.2f}x",
        )
        for gain in gains
    ]
    return aligned_table(
        ("model", "scheduler", "streams", "1 stream µs", "µs", "gain"), body, right_aligned=(2, 3, 4, 5)
    )
