"""Per-planner figures over many sources: how close to the lower bound, and how reliably.

The geometric mean is the right average for ratios (a planner 2x off on one model and 0.5x on
another is even, not 1.25x); the worst case and the share of sources at the lower bound say
whether a planner can be trusted without looking at each model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from srbench.compare.run import PlanRow


@dataclass(frozen=True)
class PlannerSummary:
    planner: str
    sources: int
    geomean_ratio: float
    worst_ratio: float
    worst_source: str  # "" when the planner reached the lower bound everywhere
    at_lower_bound: int  # sources where the total equals the lower bound
    proven_optimal: int
    seconds: float  # planning time summed over the sources

    @property
    def share_at_lower_bound(self) -> float:
        return self.at_lower_bound / self.sources if self.sources else 0.0


def summarize(rows: Iterable[PlanRow], planners: Sequence[str]) -> list[PlannerSummary]:
    """One summary per planner that has rows, in the order of ``planners``."""
    by_planner: dict[str, list[PlanRow]] = {name: [] for name in planners}
    for row in rows:
        by_planner.setdefault(row.planner, []).append(row)
    summaries = []
    for planner, planned in by_planner.items():
        if not planned:
            continue
        worst = max(planned, key=lambda r: r.ratio)
        summaries.append(
            PlannerSummary(
                planner=planner,
                sources=len(planned),
                geomean_ratio=math.exp(sum(math.log(r.ratio) for r in planned) / len(planned)),
                worst_ratio=worst.ratio,
                worst_source="" if worst.at_lower_bound else worst.source,
                at_lower_bound=sum(r.at_lower_bound for r in planned),
                proven_optimal=sum(r.proven_optimal for r in planned),
                seconds=sum(r.seconds for r in planned),
            )
        )
    return summaries


def summarize_by_zoo(rows: Sequence[PlanRow], planners: Sequence[str]) -> dict[str, list[PlannerSummary]]:
    """:func:`summarize` for each zoo (model provider, or "records") separately."""
    zoos = dict.fromkeys(row.zoo for row in rows)
    return {zoo: summarize([row for row in rows if row.zoo == zoo], planners) for zoo in zoos}
