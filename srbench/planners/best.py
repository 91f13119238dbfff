"""The best of the fast heuristics: run them all, keep the smallest valid plan.

Which heuristic wins depends on the graph (greedy by size's tie-break alone moved MobileNetV2 and
ResNet-50 between 1.0x and 1.4x the lower bound in the ARCHITECTURE measurements), and each runs
in milliseconds, so trying every one is cheap insurance. The candidates are every registered
planner except this one and ``exact`` (which searches for up to a minute); a planner module that
offers ``VARIANTS`` (a name -> planner mapping, e.g. one greedy per tie-break) contributes each
variant instead of its default. Third-party planners take part the same way.

Every candidate gets the same :class:`~srbench.planners._placement.RecordTable` (a sequence of
the records that also keeps their arrays), so the built-in ones share the arrays. A plan is
validated when it is smaller than the best valid one so far: the smallest valid plan wins as if
every plan were validated, with a few validations instead of one per candidate (at 100,000
records a validation costs a quarter of a heuristic), and only two plans held at a time. A
candidate that raises, or whose plan fails that validation, is named in ``notes["failed"]``, so
a broken plugin cannot win or stop the others. ``notes["winner"]`` names the heuristic that won
(the first in name order among equal totals) and ``notes["totals"]`` gives every candidate's
total.
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
# Under a deadline this candidate runs first, the one that always runs: the quickest one whose plans
# are near the others' (100,000 inference-like records, CPU seconds: 0.08 against 0.44-0.83 for the
# greedy ones, 4% above the best of them), so a short limit is kept to a tenth of a greedy's time.
FALLBACK = "linear_scan[best]"
# How much longer than the fallback the slowest built-in candidate took there (greedy by size's
# squeaky wheel, 0.83 s): a candidate not yet run is expected to take this many times the
# fallback's time, or as long as the slowest run so far if longer.
SLOWEST_TO_FALLBACK = 12


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
    clock: Callable[[], float] = time.perf_counter,
) -> MemoryPlan:
    """The smallest valid plan among the candidates, named ``planner``.

    With a ``deadline`` (a value of ``clock``), :data:`FALLBACK` runs first and always, and each
    other candidate only if it is expected to end by then with time to spare for a validation
    (see :data:`SLOWEST_TO_FALLBACK`); the others are listed in ``notes["skipped"]``. Among equal
    totals the first run wins (the fallback under a deadline, else the first in name order), so
    whether the others ran changes the plan only where one of them is smaller: with the first
    in name order winning ties, a first call that paid numba's cache loading skipped the others
    and kept the fallback's plan, a second one ran them and kept greedy by breadth's, and
    ``exact`` gave two different plans, both proven optimal, for the same records.
    """
    table = as_table(records)
    winner: tuple[str, MemoryPlan] | None = None
    totals: dict[str, int] = {}
    failed: dict[str, str] = {}
    skipped: list[str] = []
    expected = 0.0  # seconds a candidate not yet run is expected to take
    order = sorted(candidates().items(), key=lambda item: deadline is not None and item[0] != FALLBACK)
    for name, candidate in order:
        started = clock()
        if totals and deadline is not None and started + 2 * expected > deadline:
            skipped.append(name)
            continue
        planned = started  # when the candidate returned (a validation may follow)
        try:
            proposed = candidate(table, alignment=alignment)
            planned = clock()
            totals[name] = proposed.total_bytes
            if winner is None or proposed.total_bytes < winner[1].total_bytes:
                validate_plan(table, proposed, alignment)
                winner = (name, proposed)
        except Exception as error:  # a broken plugin must not stop the others
            failed[name] = f"{type(error).__name__}: {error}"
            totals.pop(name, None)
        fallback = SLOWEST_TO_FALLBACK * (planned - started) if name == order[0][0] else 0.0
        expected = max(expected, clock() - started, fallback)
    if winner is None:
        raise PlanError(f"planner {planner!r}: no heuristic produced a valid plan: {failed}")
    name, chosen = winner
    notes: dict[str, object] = {"winner": name, "totals": dict(sorted(totals.items()))}
    if failed:
        notes["failed"] = failed
    if skipped:
        notes["skipped"] = skipped
    return MemoryPlan(planner=planner, offsets=dict(chosen.offsets), total_bytes=chosen.total_bytes, notes=notes)
