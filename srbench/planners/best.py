"""The best of the fast heuristics: run them all, keep the smallest valid plan.

Which heuristic wins depends on the graph (greedy by size's tie-break alone moved MobileNetV2 and
ResNet-50 between 1.0x and 1.4x the lower bound in the ARCHITECTURE measurements), and each runs
in milliseconds, so trying every one is cheap insurance. The candidates are every registered
planner except this one and ``exact`` (which searches for up to a minute); a planner module that
offers ``VARIANTS`` (a name -> planner mapping, e.g. one greedy per tie-break) contributes each
variant instead of its default. Third-party planners take part the same way.

Every candidate plan is validated; one that fails validation or raises is left out and named in
``notes["failed"]``, so a broken plugin cannot win or stop the others. ``notes["winner"]`` names
the heuristic that won (the first in name order among equal totals) and ``notes["totals"]`` gives
every candidate's total.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, PlanError, TensorUsageRecord, validate_plan
from srbench.planners import PLANNERS

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
    records = list(records)
    winner: tuple[str, MemoryPlan] | None = None
    totals: dict[str, int] = {}
    failed: dict[str, str] = {}
    for name, planner in candidates().items():
        try:
            candidate = planner(records, alignment=alignment)
            validate_plan(records, candidate, alignment)
        except Exception as error:  # a broken plugin must not stop the others
            failed[name] = f"{type(error).__name__}: {error}"
            continue
        totals[name] = candidate.total_bytes
        if winner is None or candidate.total_bytes < winner[1].total_bytes:
            winner = (name, candidate)
    if winner is None:
        raise PlanError(f"planner {NAME!r}: no heuristic produced a valid plan: {failed}")
    name, chosen = winner
    notes: dict[str, object] = {"winner": name, "totals": totals}
    if failed:
        notes["failed"] = failed
    return MemoryPlan(planner=NAME, offsets=dict(chosen.offsets), total_bytes=chosen.total_bytes, notes=notes)
