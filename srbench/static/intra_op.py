"""Lifetimes within served ops: the timeline the slab is planned on when an op's scratch is served.

A served op (:mod:`srbench.static.serving`) allocates its scratch, frees it, and allocates its
results, often after the scratch at which its own peak falls is freed: eager's allocator reuses
those bytes for the results. A plan that gives every record whole steps holds a result from the
start of its op, beside all of the op's scratch, and a run holds more than eager
(``transformer_encoder``'s fused layers). So the plan is made on a finer timeline: a step whose
op has a recording of ``k`` events (allocations and frees) takes ``k`` sub-steps, its scratch
lives from the event that allocates it to the one that frees it, its results from the event that
allocates them, and every other record keeps its steps (from the first sub-step of its first
step to the last sub-step of its last). Every other user of the records (the slab's segments,
the estimates, several streams) keeps whole steps, where a scratch record lives at its op's step:
it overlaps all that lives then, so a placement on the finer timeline is valid on the coarse one
wherever it is checked too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from srbench.memory.records import TensorUsageRecord
from srbench.static.choose import NodePlan


@dataclass(frozen=True)
class Timeline:
    """Sub-steps of the steps whose ops have servings: ``starts[step]`` the first sub-step of each
    step (one more entry, the end), ``allocated`` the sub-step at which a served result or a
    scratch record is allocated, ``freed`` that at which a scratch record is freed, ``scratch``
    every scratch record on whole steps (what the op's step holds of it, with the step's other
    records), and ``peaks`` the most scratch each op holds at once (what eager holds for it)."""

    starts: tuple[int, ...]
    allocated: Mapping[str, int]
    freed: Mapping[str, int]
    scratch: Mapping[str, tuple[TensorUsageRecord, ...]]
    peaks: Mapping[str, TensorUsageRecord]

    @staticmethod
    def of(steps: Sequence[str], plans: Iterable[NodePlan]) -> Timeline:
        """The timeline of ``steps`` (node names in order) where the served ones among ``plans``
        serve some of their ops' allocations."""
        served = {plan.node.name: plan for plan in plans if plan.serving is not None}
        starts = [0]
        allocated: dict[str, int] = {}
        freed: dict[str, int] = {}
        scratch: dict[str, tuple[TensorUsageRecord, ...]] = {}
        peaks: dict[str, TensorUsageRecord] = {}
        for step, name in enumerate(steps):
            base = starts[-1]
            plan = served.get(name)
            serving = plan.serving if plan is not None else None
            starts.append(base + (serving.events if serving is not None else 1))
            if plan is None or serving is None:
                continue
            for result in serving.results:
                storage = plan.result_storages[result.result]
                if storage is not None:
                    allocated[storage] = base + result.allocated
            records = []
            for part in serving.scratch:
                record = TensorUsageRecord(part.id(name), step, step, part.nbytes)
                allocated[record.id], freed[record.id] = base + part.allocated, base + part.freed
                records.append(record)
            scratch[name] = tuple(records)
            peaks[name] = TensorUsageRecord(f"{name}__scratch", step, step, serving.peak_scratch())
        return Timeline(tuple(starts), allocated, freed, scratch, peaks)

    def refine(self, records: Iterable[TensorUsageRecord]) -> list[TensorUsageRecord]:
        """``records`` (on whole steps) on the sub-steps: see the module docstring."""
        return [
            dataclasses.replace(
                record,
                first=self.allocated.get(record.id, self._start(record.first)),
                last=self.freed.get(record.id, self._start(record.last + 1) - 1),
            )
            for record in records
        ]

    def _start(self, step: int) -> int:
        """The first sub-step of ``step`` (steps past the graph's, as outputs' ends, are whole)."""
        known = len(self.starts) - 1
        return self.starts[step] if step <= known else self.starts[known] + step - known

    def served_scratch(self, plans: Iterable[NodePlan]) -> list[TensorUsageRecord]:
        """The scratch records of the ops among ``plans`` served with their scratch."""
        return [record for name in _with_scratch(plans) for record in self.scratch.get(name, ())]

    def eager_scratch(self, plans: Iterable[NodePlan]) -> list[TensorUsageRecord]:
        """What the ops with a serving found, but run by ``plans`` without their scratch served,
        hold of it at their step (allocated by eager's allocator, outside the slab)."""
        served = _with_scratch(plans)
        return [record for name, record in self.peaks.items() if name not in served and record.size]


def _with_scratch(plans: Iterable[NodePlan]) -> set[str]:
    return {plan.node.name for plan in plans if plan.serving is not None and plan.serving.scratch}
