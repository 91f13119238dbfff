"""The naive planner: no reuse, every tensor gets bytes of its own.

The reference every other planner is measured against: its total is the sum of the tensors'
aligned sizes (less the last one's padding), what eager allocation would hold if nothing were
ever freed. Tensors are laid out in order of first use (then last use, then id), so the layout
does not depend on the order the records come in.
"""

from __future__ import annotations

from collections.abc import Sequence

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import footprint, make_plan

NAME = "naive"


def plan(records: Sequence[TensorUsageRecord], *, alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    offsets: dict[str, int] = {}
    cursor = 0
    for record in sorted(records, key=lambda r: (r.first, r.last, r.id)):
        if record.size:
            offsets[record.id] = cursor
            cursor += footprint(record, alignment)
    return make_plan(NAME, records, offsets)
