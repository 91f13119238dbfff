"""Linear scan with a free list, in the spirit of Wimmer's linear-scan register allocation.

Time is walked once, in step order. Before the tensors born at a step are placed, every tensor
whose last use came earlier gives its block back to a free list, where it merges with free
neighbours. A new tensor takes a free block that fits (``fit="best"``: the smallest one, the
lowest on a tie; ``fit="first"``: the lowest one), keeping the low part and returning the rest;
when none fits, the slab grows: over the free block at its top if there is one, else at the top.
Tensors born at the same step are placed largest first (then by id).

Unlike the greedy planners it never looks ahead, which is what a runtime allocating as it goes
can do; the gap to the lower bound shows what planning the whole graph buys.

The free list is a pair of arrays (block starts and ends, sorted, disjoint, merged), and the walk
is compiled with numba, so 100,000 tensors take a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._compiled import njit
from srbench.planners._placement import as_table, plan_from_offsets, sort_order

NAME = "linear_scan"
FITS = ("best", "first")


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    fit: str = "best",
) -> MemoryPlan:
    """Walk time, free dead tensors' blocks, take a fitting free block or grow the slab."""
    if fit not in FITS:
        raise ValueError(f"unknown fit {fit!r}; expected one of {', '.join(FITS)}")
    table = as_table(records)
    footprints = table.footprint(alignment)
    order = sort_order([table.first, -table.size, table.id_rank])
    order = order[table.size[order] > 0]
    offsets = np.zeros(len(table), dtype=np.int64)
    if order.shape[0]:
        offsets[order] = _walk(table.first[order], table.last[order], footprints[order], fit == "best")
    return plan_from_offsets(NAME, table, offsets, fit=fit)


@njit(cache=True)
def _walk(first, last, footprint, best):
    """Offsets of tensors given in allocation order (by first step)."""
    count = first.shape[0]
    by_last = np.argsort(last, kind="mergesort")
    starts = np.empty(count + 1, dtype=np.int64)
    ends = np.empty(count + 1, dtype=np.int64)
    blocks = 0
    top = 0
    offset = np.zeros(count, dtype=np.int64)
    released = 0
    for tensor in range(count):
        # Tensors are allocated in order of first step, so one that died before this one was
        # born has been allocated already.
        while released < count and last[by_last[released]] < first[tensor]:
            dead = by_last[released]
            blocks = release(starts, ends, blocks, offset[dead], offset[dead] + footprint[dead])
            released += 1
        offset[tensor], blocks, top = allocate(starts, ends, blocks, top, footprint[tensor], best)
    return offset


@njit(cache=True)
def allocate(starts, ends, blocks, top, size, best):
    """Take ``size`` bytes from the free list ``starts[:blocks]``, ``ends[:blocks]`` of a slab of
    ``top`` bytes: (offset, blocks, top) after it. ``best``: the smallest fitting block (the
    lowest on a tie), else the lowest fitting one; no fit: grow the slab (over a free block at
    its top)."""
    chosen = -1
    for index in range(blocks):
        length = ends[index] - starts[index]
        if length >= size and (chosen < 0 or (best and length < ends[chosen] - starts[chosen])):
            chosen = index
            if not best:
                break
    if chosen >= 0:
        offset = starts[chosen]
        if ends[chosen] - offset == size:
            starts[chosen : blocks - 1] = starts[chosen + 1 : blocks].copy()
            ends[chosen : blocks - 1] = ends[chosen + 1 : blocks].copy()
            blocks -= 1
        else:
            starts[chosen] = offset + size
        return offset, blocks, top
    if blocks and ends[blocks - 1] == top:  # grow over the free block at the top
        blocks -= 1
        offset = starts[blocks]
    else:
        offset = top
    return offset, blocks, offset + size


@njit(cache=True)
def release(starts, ends, blocks, start, end):
    """Give ``[start, end)`` back to the free list, merged with free neighbours; the new count."""
    where = np.searchsorted(starts[:blocks], start)
    merge_next = where < blocks and starts[where] == end
    merge_previous = where > 0 and ends[where - 1] == start
    if merge_previous and merge_next:
        ends[where - 1] = ends[where]
        starts[where : blocks - 1] = starts[where + 1 : blocks].copy()
        ends[where : blocks - 1] = ends[where + 1 : blocks].copy()
        return blocks - 1
    if merge_previous:
        ends[where - 1] = end
        return blocks
    if merge_next:
        starts[where] = start
        return blocks
    starts[where + 1 : blocks + 1] = starts[where:blocks].copy()
    ends[where + 1 : blocks + 1] = ends[where:blocks].copy()
    starts[where] = start
    ends[where] = end
    return blocks + 1


VARIANTS = {f"{NAME}[{name}]": partial(plan, fit=name) for name in FITS}
