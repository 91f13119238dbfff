"""Linear scan with a free list, in the spirit of Wimmer's linear-scan register allocation.

Time is walked once, in step order. Before the tensors born at a step are placed, every tensor
whose last use came earlier gives its block back to a free list, where it merges with free
neighbours. A new tensor takes a free block that fits (``fit="best"``: the smallest one, the
lowest on a tie; ``fit="first"``: the lowest one), keeping the low part and returning the rest;
when none fits, the slab grows: over the free block at its top if there is one, else at the top.
Tensors born at the same step are placed largest first (then by id).

Unlike the greedy planners it never looks ahead, which is what a runtime allocating as it goes
can do; the gap to the lower bound shows what planning the whole graph buys.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from functools import partial

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import footprint, make_plan

NAME = "linear_scan"
FITS = ("best", "first")


class FreeList:
    """Free blocks of a growing slab, as sorted disjoint ``[start, end)`` pairs, merged on release."""

    def __init__(self) -> None:
        self.blocks: list[tuple[int, int]] = []
        self.top = 0  # the slab's current size

    def allocate(self, size: int, fit: str) -> int:
        chosen = self._choose(size, fit)
        if chosen is not None:
            start, end = self.blocks[chosen]
            if end - start == size:
                del self.blocks[chosen]
            else:
                self.blocks[chosen] = (start + size, end)
            return start
        if self.blocks and self.blocks[-1][1] == self.top:  # grow over the free block at the top
            start, _ = self.blocks.pop()
        else:
            start = self.top
        self.top = start + size
        return start

    def release(self, start: int, size: int) -> None:
        end = start + size
        where = bisect.bisect_left(self.blocks, (start, end))
        if where < len(self.blocks) and self.blocks[where][0] == end:
            end = self.blocks.pop(where)[1]
        if where > 0 and self.blocks[where - 1][1] == start:
            where -= 1
            start = self.blocks.pop(where)[0]
        self.blocks.insert(where, (start, end))

    def _choose(self, size: int, fit: str) -> int | None:
        best = None
        for index, (start, end) in enumerate(self.blocks):
            length = end - start
            if length < size:
                continue
            if fit == "first":
                return index
            if best is None or length < best[0]:
                best = (length, index)
        return None if best is None else best[1]


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    fit: str = "best",
) -> MemoryPlan:
    """Walk time, free dead tensors' blocks, take a fitting free block or grow the slab."""
    if fit not in FITS:
        raise ValueError(f"unknown fit {fit!r}; expected one of {', '.join(FITS)}")
    free = FreeList()
    offsets: dict[str, int] = {}
    alive: list[tuple[int, str, int, int]] = []  # heap of (last, id, offset, size)
    for record in sorted((r for r in records if r.size), key=lambda r: (r.first, -r.size, r.id)):
        while alive and alive[0][0] < record.first:
            _, _, start, size = heapq.heappop(alive)
            free.release(start, size)
        size = footprint(record, alignment)
        offsets[record.id] = free.allocate(size, fit)
        heapq.heappush(alive, (record.last, record.id, offsets[record.id], size))
    return make_plan(NAME, records, offsets, fit=fit)


VARIANTS = {f"{NAME}[{name}]": partial(plan, fit=name) for name in FITS}
