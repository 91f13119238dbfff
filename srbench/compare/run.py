"""Plan every source with every planner and collect what each plan is judged by.

A source is anything that yields tensor usage records: a zoo model (captured and analysed by the
caller's loader) or a MiniMalloc CSV file. A source that cannot be loaded, or a planner that fails
on one, is recorded as a failure and the rest continue, so one model ``torch.export`` cannot
capture never costs the whole comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from srbench.memory.records import PlanError, RecordError, TensorUsageRecord
from srbench.memory.sources import SourceError
from srbench.planners import plan_memory


@dataclass(frozen=True)
class Source:
    """Records from somewhere: ``load()`` returns them or raises :class:`SourceError`."""

    name: str
    zoo: str  # the model provider, or "records" for a CSV file
    load: Callable[[], Sequence[TensorUsageRecord]]


@dataclass(frozen=True)
class PlanRow:
    """One planner on one source."""

    source: str
    zoo: str
    planner: str
    num_tensors: int
    total_bytes: int
    lower_bound: int
    ratio: float  # total / lower bound (1.0 when nothing needs memory)
    seconds: float
    proven_optimal: bool
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def at_lower_bound(self) -> bool:
        return self.total_bytes <= self.lower_bound


@dataclass
class Comparison:
    """Everything one comparison found. ``records`` and ``offsets`` are kept for the pictures and
    left out of :meth:`to_json`."""

    planners: list[str]
    alignment: int
    options: dict[str, dict[str, Any]]
    rows: list[PlanRow] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    records: dict[str, list[TensorUsageRecord]] = field(default_factory=dict)
    offsets: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)

    def row(self, source: str, planner: str) -> PlanRow | None:
        return next((r for r in self.rows if r.source == source and r.planner == planner), None)

    def sources(self) -> list[str]:
        return list(dict.fromkeys(row.source for row in self.rows))

    def to_json(self) -> dict[str, Any]:
        return {
            "planners": self.planners,
            "alignment": self.alignment,
            "planner_options": self.options,
            "rows": [{**asdict(row), "notes": dict(row.notes)} for row in self.rows],
            "failures": self.failures,
        }


def compare(
    sources: Sequence[Source],
    planners: Sequence[str],
    *,
    alignment: int,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    progress: bool | None = None,
) -> Comparison:
    """Plan each source with each planner (``options[planner]`` are passed to it); a tqdm bar
    shows progress on a terminal (``progress=None``), always (True) or never (False)."""
    from tqdm import tqdm

    given = {name: dict(values) for name, values in (options or {}).items()}
    comparison = Comparison(planners=list(planners), alignment=alignment, options=given)
    with tqdm(
        total=len(sources) * len(planners), unit="plan", disable=None if progress is None else not progress
    ) as bar:
        for source in sources:
            bar.set_description(source.name)
            try:
                records = list(source.load())
            except SourceError as error:
                comparison.failures.append(str(error))
                bar.update(len(planners))
                continue
            comparison.records[source.name] = records
            for planner in planners:
                bar.set_postfix_str(planner)
                _plan_one(comparison, source, records, planner, given.get(planner, {}))
                bar.update(1)
    return comparison


def _plan_one(
    comparison: Comparison, source: Source, records: list[TensorUsageRecord], planner: str, options: dict[str, Any]
) -> None:
    try:
        result = plan_memory(records, planner, alignment=comparison.alignment, **options)
    except (PlanError, RecordError) as error:
        comparison.failures.append(f"{source.name}: planner {planner!r} failed: {error}")
        return
    comparison.offsets[(source.name, planner)] = dict(result.plan.offsets)
    comparison.rows.append(
        PlanRow(
            source=source.name,
            zoo=source.zoo,
            planner=planner,
            num_tensors=result.num_tensors,
            total_bytes=result.plan.total_bytes,
            lower_bound=result.lower_bound,
            ratio=result.ratio_to_lower_bound,
            seconds=result.seconds,
            proven_optimal=result.plan.proven_optimal,
            notes=dict(result.plan.notes),
        )
    )
