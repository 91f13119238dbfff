"""The naive planner: no reuse, every tensor gets bytes of its own.

The reference every other planner is measured against: its total is the sum of the tensors'
aligned sizes (less the last one's padding), what eager allocation would hold if nothing were
ever freed. Tensors are laid out in order of first use (then last use, then id), so the layout
does not depend on the order the records come in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import as_table, plan_from_offsets, sort_order

NAME = "naive"


def plan(records: Sequence[TensorUsageRecord], *, alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    table = as_table(records)
    order = sort_order([table.first, table.last, table.id_rank])
    footprints = table.footprint(alignment)[order]
    offsets = np.zeros(len(table), dtype=np.int64)
    offsets[order] = np.cumsum(footprints) - footprints  # zero-size tensors take no room: offset 0 below
    offsets[table.size == 0] = 0
    return plan_from_offsets(NAME, table, offsets)
