"""Greedy by size (Pisarchyk and Lee 2020, arXiv 2001.03288, "Greedy by Size for offset calculation").

Tensors are placed largest first, each in the tightest gap left among the already placed tensors
whose lifetimes overlap it, or above them when no gap fits. Large tensors decide the slab size, so
placing them while the slab is empty and tucking small ones into the holes they leave usually
lands at or near the lower bound on inference graphs.

Equal sizes are ordered by a named tie-break (see ``srbench.planners._placement.TIE_BREAKS``).
``plan`` is the paper's algorithm, nothing more. ``VARIANTS`` (what the ``best`` planner tries)
offers one planner per tie-break, and ``greedy_by_size[squeaky_wheel]``: greedy by size's order
improved by squeaky wheel optimisation (:mod:`srbench.planners._squeaky_wheel`), which re-places
the tensors with those that ended above the lower bound moved up the order.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import (
    DEFAULT_TIE_BREAK,
    TIE_BREAKS,
    RecordTable,
    as_table,
    best_fit,
    plan_from_offsets,
    sort_order,
    tie_break_keys,
)
from srbench.planners._squeaky_wheel import reprioritise

NAME = "greedy_by_size"
SQUEAKY_WHEEL = f"{NAME}[squeaky_wheel]"


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    tie_break: str = DEFAULT_TIE_BREAK,
) -> MemoryPlan:
    """Largest first, best-fit gap; equal sizes ordered by ``tie_break``."""
    table = as_table(records)
    offsets = best_fit(table, largest_first(table, tie_break), alignment)
    return plan_from_offsets(NAME, table, offsets, tie_break=tie_break)


def plan_squeaky_wheel(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    tie_break: str = DEFAULT_TIE_BREAK,
) -> MemoryPlan:
    """Greedy by size's order, then squeaky wheel rounds: never larger than :func:`plan`."""
    table = as_table(records)
    found = reprioritise(table, largest_first(table, tie_break), alignment)
    return plan_from_offsets(
        SQUEAKY_WHEEL,
        table,
        found.offsets,
        tie_break=tie_break,
        squeaky_wheel_rounds=found.rounds,
        squeaky_wheel_best_round=found.best_round,
    )


def largest_first(table: RecordTable, tie_break: str) -> np.ndarray:
    """Record indices by decreasing size, equal sizes by ``tie_break``."""
    return sort_order([-table.size, *tie_break_keys(tie_break, table)])


VARIANTS = {
    **{f"{NAME}[{name}]": partial(plan, tie_break=name) for name in TIE_BREAKS},
    SQUEAKY_WHEEL: plan_squeaky_wheel,
}
