"""Memory planners: plugins that place tensor usage records in one slab.

Every planner is a callable ``plan(records, *, alignment=64) -> MemoryPlan`` registered under the
entry-point group ``srbench.planners``; a third party adds one with a line in its own
``pyproject.toml``. :func:`plan_memory` is the one way srbench calls a planner: it checks the
records, times the planner, validates the plan it returns, and puts the lower bound beside it.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from srbench.memory.records import (
    DEFAULT_ALIGNMENT,
    MemoryPlan,
    PlanError,
    RecordError,
    TensorUsageRecord,
    check_alignment,
    check_records,
    lower_bound,
    validate_plan,
)
from srbench.planners._placement import aligned_peak, as_table
from srbench.registry import Registry

PLANNERS = Registry("srbench.planners", "planner")
# The planner used where none is named: the fastest of those that reach the lower bound on most graphs.
DEFAULT_PLANNER = "greedy_by_size"


class Planner(Protocol):
    def __call__(self, records: Sequence[TensorUsageRecord], *, alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan: ...


@dataclass(frozen=True)
class PlanResult:
    """A validated plan with the figures it is judged by."""

    plan: MemoryPlan
    lower_bound: int
    seconds: float
    num_tensors: int

    @property
    def ratio_to_lower_bound(self) -> float:
        return self.plan.total_bytes / self.lower_bound if self.lower_bound else 1.0


def planner_names() -> list[str]:
    return PLANNERS.names()


def get_planner(name: str) -> Planner:
    return PLANNERS.load(name)


def plan_memory(
    records: Sequence[TensorUsageRecord],
    planner: str = DEFAULT_PLANNER,
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    **options: Any,
) -> PlanResult:
    """Plan ``records`` with the named planner; the plan is validated before it is returned.

    A planner that fails (raises, or returns something else than a :class:`MemoryPlan`) is a
    :class:`PlanError` saying how (the latter from :func:`validate_plan`), chained to its error
    where it raised, so that a caller planning with several reports it and goes on: a plugin's
    ``ZeroDivisionError``, or a ``None`` for a plan, ended ``srbench plan`` and ``compare`` in a
    traceback. Options the planner does not take are the caller's error and stay a TypeError."""
    alignment = check_alignment(alignment)
    records = list(records)
    check_records(records, alignment=alignment)
    plan_fn = get_planner(planner)
    try:
        signature = inspect.signature(plan_fn)
    except (TypeError, ValueError):  # a callable without one (a compiled function): called as is
        signature = None
    if signature is not None:
        signature.bind(records, alignment=alignment, **options)
    start = time.perf_counter()
    try:
        plan = plan_fn(records, alignment=alignment, **options)
    except (PlanError, RecordError):
        raise
    except Exception as error:
        raise PlanError(f"{type(error).__name__} in the planner: {error}") from error
    return judge_plan(records, plan, alignment=alignment, seconds=time.perf_counter() - start)


def judge_plan(
    records: Sequence[TensorUsageRecord], plan: MemoryPlan, *, alignment: int, seconds: float = 0.0
) -> PlanResult:
    """``plan`` validated for ``records`` at ``alignment`` (a :class:`PlanError` naming the
    tensors where it is wrong) and judged against the lower bound, as :func:`plan_memory` judges
    every planner's: also a plan that did not come from a planner (a solution file's packing,
    :meth:`srbench.memory.minimalloc_csv.MiniMallocInstance.packing`). ``seconds``: the time it
    took to make, where known."""
    records = list(records)
    validate_plan(records, plan, alignment)
    bound = lower_bound(records)
    # No plan is below the bound: a plan at it is optimal. At an alignment the sizes are not
    # multiples of, the bytes alive cannot be reached, and the aligned bound is the one to meet.
    if not plan.proven_optimal and (
        plan.total_bytes == bound or plan.total_bytes == aligned_peak(as_table(records), alignment)
    ):
        plan = dataclasses.replace(plan, proven_optimal=True)
    return PlanResult(plan=plan, lower_bound=bound, seconds=seconds, num_tensors=len(records))
