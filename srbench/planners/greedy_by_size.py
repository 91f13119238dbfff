"""Greedy by size (Pisarchyk and Lee 2020, arXiv 2001.03288, "Greedy by Size for offset calculation").

Tensors are placed largest first, each in the tightest gap left among the already placed tensors
whose lifetimes overlap it, or above them when no gap fits. Large tensors decide the slab size, so
placing them while the slab is empty and tucking small ones into the holes they leave usually
lands at or near the lower bound on inference graphs.

Equal sizes are ordered by a named tie-break (see ``srbench.planners._placement.TIE_BREAKS``);
``VARIANTS`` offers one planner per tie-break for a planner that tries several and keeps the best.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import (
    DEFAULT_TIE_BREAK,
    TIE_BREAKS,
    make_plan,
    place_best_fit,
    tie_break_key,
)

NAME = "greedy_by_size"


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    tie_break: str = DEFAULT_TIE_BREAK,
) -> MemoryPlan:
    """Largest first, best-fit gap; equal sizes ordered by ``tie_break``."""
    tie = tie_break_key(tie_break)
    ordered = sorted(records, key=lambda r: (-r.size, *tie(r)))
    return make_plan(NAME, records, place_best_fit(ordered, alignment), tie_break=tie_break)


VARIANTS = {f"{NAME}[{name}]": partial(plan, tie_break=name) for name in TIE_BREAKS}
