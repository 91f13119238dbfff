"""Greedy by operator breadth (Pisarchyk and Lee 2020, arXiv 2001.03288).

An operator's breadth is the total size of the tensors alive while it runs. Operators are visited
widest first; at each, its tensors not yet placed go in largest first, each into the tightest gap
among the placed tensors whose lifetimes overlap it (the same best-fit search as greedy by size).
The widest operator is where the lower bound is set, so its tensors are packed first.

A tensor is placed at the widest operator of its lifetime, so the visiting order is the sort key
(rank of the widest operator in the tensor's lifetime, -size, tie-break): computed for all tensors
at once with a range-minimum table instead of walking every operator's tensor list. Steps where
nothing starts or ends are never wider than the step before them, so only those are ranked.
Operators of equal breadth are visited in step order; equal sizes at one operator follow the
named tie-break (``VARIANTS`` has one planner per tie-break).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import (
    DEFAULT_TIE_BREAK,
    TIE_BREAKS,
    as_table,
    best_fit,
    plan_from_offsets,
    range_min,
    sort_order,
    tie_break_keys,
)

NAME = "greedy_by_breadth"


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    tie_break: str = DEFAULT_TIE_BREAK,
) -> MemoryPlan:
    """Widest operator first, its tensors largest first, best-fit gap."""
    table = as_table(records)
    order = sort_order([widest_operator_rank(table), -table.size, *tie_break_keys(tie_break, table)])
    return plan_from_offsets(NAME, table, best_fit(table, order, alignment), tie_break=tie_break)


def widest_operator_rank(records: Sequence[TensorUsageRecord]) -> np.ndarray:
    """For each record, the breadth rank (0 = widest) of the widest step within its lifetime.
    Zero-size records are left out of the breadths (and get rank 0: they are never placed)."""
    table = as_table(records)
    table.footprint(1)  # refuses sizes whose sum would wrap an int64 breadth
    sized = np.flatnonzero(table.size > 0)
    ranks = np.zeros(len(table), dtype=np.int64)
    if not sized.shape[0]:
        return ranks
    first, last, size = table.first[sized], table.last[sized], table.size[sized]
    steps = np.unique(np.concatenate([first, last]))
    lo = np.searchsorted(steps, first)
    hi = np.searchsorted(steps, last)
    delta = np.zeros(len(steps) + 1, dtype=np.int64)
    np.add.at(delta, lo, size)
    np.add.at(delta, hi + 1, -size)
    breadth = np.cumsum(delta[:-1])
    # Widest first, earlier step first among equals.
    order = sort_order([-breadth, np.arange(len(steps))])
    step_rank = np.empty(len(steps), dtype=np.int64)
    step_rank[order] = np.arange(len(steps))
    ranks[sized] = range_min(step_rank, lo, hi)
    return ranks


VARIANTS = {f"{NAME}[{name}]": partial(plan, tie_break=name) for name in TIE_BREAKS}
