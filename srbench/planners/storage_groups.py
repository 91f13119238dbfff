"""PyTorch Static Runtime's storage groups.

Static Runtime (``torch/csrc/jit/runtime/static/memory_planner.cpp``) gives each managed tensor a
storage group: tensors whose lifetimes are disjoint share a group, a group is as large as its
largest member, and the groups are laid end to end in the slab. Walking the tensors in order of
first use, a tensor joins a group whose members are all dead by then, or opens a new one.

Which free group it joins is the ``reuse`` option:
* ``"lifo"`` (default, as Static Runtime does): the group freed most recently. Groups freed
  before the same step are released in order of their dead member's (last, first, id).
* ``"best_fit"``: the smallest free group at least as large as the tensor, else the largest
  free group (least growth); ties go to the older group.

Sharing whole groups never splits or merges bytes, which is simple and safe for dynamic shapes
but costs memory when sizes vary: the gap to the byte-level planners measures that price.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from functools import partial

from srbench.memory.records import DEFAULT_ALIGNMENT, MemoryPlan, TensorUsageRecord
from srbench.planners._placement import as_table, footprint, make_plan, sort_order

NAME = "storage_groups"
REUSE = ("lifo", "best_fit")


def assign_groups(records: Sequence[TensorUsageRecord], reuse: str = "lifo") -> list[list[TensorUsageRecord]]:
    """Storage groups (in creation order) of the non-empty records; members have disjoint lifetimes."""
    if reuse not in REUSE:
        raise ValueError(f"unknown reuse {reuse!r}; expected one of {', '.join(REUSE)}")
    table = as_table(records)
    groups: list[list[TensorUsageRecord]] = []
    group_size: list[int] = []
    stack: list[int] = []  # lifo: the free groups, the latest freed on top
    by_size: list[tuple[int, int]] = []  # best_fit: the free groups as sorted (size, group)
    busy: list[tuple[int, int, str, int]] = []  # heap of (last, first, id, group index)
    order = sort_order([table.first, -table.size, table.id_rank])
    for record in (table[index] for index in order.tolist()):
        if not record.size:
            continue
        while busy and busy[0][0] < record.first:
            group = heapq.heappop(busy)[3]
            if reuse == "lifo":
                stack.append(group)
            else:
                bisect.insort(by_size, (group_size[group], group))
        if stack or by_size:
            group = stack.pop() if reuse == "lifo" else by_size.pop(_best_fit(by_size, record.size))[1]
            groups[group].append(record)
            group_size[group] = max(group_size[group], record.size)
        else:
            group = len(groups)
            groups.append([record])
            group_size.append(record.size)
        heapq.heappush(busy, (record.last, record.first, record.id, group))
    return groups


def _best_fit(free_by_size: list[tuple[int, int]], size: int) -> int:
    """Index in ``free_by_size`` of the oldest of the smallest groups holding ``size``, else of
    the oldest of the largest groups."""
    where = bisect.bisect_left(free_by_size, (size, -1))
    if where == len(free_by_size):
        where = bisect.bisect_left(free_by_size, (free_by_size[-1][0], -1))
    return where


def plan(
    records: Sequence[TensorUsageRecord],
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    reuse: str = "lifo",
) -> MemoryPlan:
    """Group tensors with disjoint lifetimes; lay the groups end to end."""
    offsets: dict[str, int] = {}
    cursor = 0
    groups = assign_groups(records, reuse)
    for members in groups:
        for member in members:
            offsets[member.id] = cursor
        cursor += max(footprint(member, alignment) for member in members)
    return make_plan(NAME, records, offsets, reuse=reuse, groups=len(groups))


VARIANTS = {f"{NAME}[{name}]": partial(plan, reuse=name) for name in REUSE}
