"""The best of the fast heuristics: run them all, keep the smallest valid plan.

Which heuristic wins depends on the graph (greedy by size's tie-break alone moved MobileNetV2 and
ResNet-50 between 1.0x and 1.4x the lower bound in the ARCHITECTURE measurements), and each runs
in milliseconds, so trying every one is cheap insurance. The candidates are every registered
planner except this one and ``exact`` (which searches for up to a minute); a planner module that
offers ``VARIANTS`` (a name -> planner mapping, e.g. one greedy per tie-break) contributes each
variant instead of its default. Third-party planners take part the same way.

Every candidate gets the same :class:`~srbench.planners._placement.RecordTable` (a sequence of
the records that also keeps their arrays), so the built-in ones share the arrays. Plans are
validated from the smallest total up until one passes: the smallest valid plan wins as if every
plan were validated, at the cost of one validation instead of one per candidate (at 100,000
records a validation costs as much as a heuristic). A candidate that raises, or whose plan
fails validation, is named in ``notes["failed"]``, so a broken plugin cannot win or stop the
others. ``notes["winner"]`` names the heuristic that won (the first in name order among equal
totals) and ``notes["totals"]`` gives every candidate's total.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, PlanError, TensorUsageRecord, validate_plan
from srbench.planners import PLANNERS
from srbench.planners._placement import as_table

NAME = "best"
EXCLUDED = frozenset({NAME, "exact"})


def candidates() -> dict[str, Callable[..., MemoryPlan]]:
    """Every heuristic ``best`` tries, by name (variants as ``planner[variant]``)."""
    found: dict[str, Callable[..., MemoryPlan]] = {}
    for name in PLANNERS.names():
        if name in EXCLUDED:
            continue
        planner = PLANNERS.load(name)
        variants = getattr(sys.modules.get(getattr(planner, "__module__", ""), None), "VARIANTS", None)
        found.update(variants if variants else {name: planner})
    return dict(sorted(found.items()))


def plan(records: Sequence[TensorUsageRecord], *, alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    """The smallest valid plan among all fast heuristics and their variants."""
    return run_candidates(records, alignment=alignment, planner=NAME)


def run_candidates(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int,
    planner: str,
    deadline: float | None = None,
) -> MemoryPlan:
    """The smallest valid plan among the candidates, named ``planner``. With a ``deadline``
    (a ``time.perf_counter()`` value), candidates after the first are skipped once it passes."""
    table = as_table(records)
    plans: dict[str, MemoryPlan] = {}
    failed: dict[str, str] = {}
    for name, candidate in candidates().items():
        if plans and deadline is not None and time.perf_counter() >= deadline:
            failed[name] = "skipped: out of time"
            continue
        try:
            plans[name] = candidate(table, alignment=alignment)
        except Exception as error:  # a broken plugin must not stop the others
            failed[name] = f"{type(error).__name__}: {error}"
    totals = {name: chosen.total_bytes for name, chosen in plans.items()}
    for name in sorted(plans, key=lambda name: (totals[name], name)):
        try:
            validate_plan(table, plans[name], alignment)
        except PlanError as error:
            failed[name] = f"{type(error).__name__}: {error}"
            del totals[name]
            continue
        notes: dict[str, object] = {"winner": name, "totals": totals}
        if failed:
            notes["failed"] = failed
        chosen = plans[name]
        return MemoryPlan(planner=planner, offsets=dict(chosen.offsets), total_bytes=chosen.total_bytes, notes=notes)
    raise PlanError(f"planner {planner!r}: no heuristic produced a valid plan: {failed}")
