"""Intermediates planned into the bytes of a run's fresh outputs ("hosted"), and their validator.

Under the default options a run hands its outputs to the caller as fresh tensors: their memory
is allocated at every run anyway, and until the op that writes an output runs, its bytes hold
nothing. A chain of ops whose tensors all have the output's size shows what that leaves on the
table: the slab holds an op's input and result (two tensors) for the whole chain and the output
comes on top, three tensors where eager peaks at two (it frees the input as the output is made).
A run can instead allocate the output earlier, before the intermediates it *hosts*: intermediates
whose every use ends before the op that first writes the output (so never an input of that op)
are planned into the output's bytes instead of the slab, and the slab shrinks by them.

Each host (one output storage) is a planning problem of its own with a capacity: the records
hosted in it go through :func:`~srbench.planners.plan_memory` like the slab's (any registered
planner places them, the one validator checks them, the lower bound is computed beside), and a
plan is kept only if its total fits the host's bytes. One arena with the hosts pinned inside it
would need planners that take fixed placements and several bins; none does, and a capacity per
host keeps every planner usable unchanged.

Which records, into which host (:func:`plan_hosting`): hosts largest first; for each, the
eligible records latest-ending first (so the host need not be allocated early), each taken while
the bytes alive at every step stay within the capacity; then the first of that list, or its
first quarter, half, ... or all of it (counts halving from the whole), whichever gives the lowest
estimated peak of a run (:func:`estimated_peak`: at each step, what the slab holds, whole or in
the segments ``cleanup_activations`` takes and gives back, plus the fallback results alive and
the outputs made so far), the fewest records on ties, and nothing unless that is below the peak
without it. Allocating an output earlier costs its bytes over the steps before its
write, which pays only where the slab holds less at the run's peak: on ``gpt_decoder`` the 4 MiB
logits, allocated before its first layer, would sit on top of every layer's fallback results,
while its slab's segments are given back before the logits are made anyway.

Hosting counts steps in one order of the ops, so it is for one-stream programs only: on several
streams "every use ends before the write" needs the schedule's happens-before order instead.

:func:`validate_hosting` checks the slab and every host together as one address space: each host
a region after the slab, occupied by the output itself from its first write to the end of the
run, its hosted records inside it; :func:`~srbench.memory.records.validate_plan` then proves that
no two tensors alive at one step share a byte, across the slab and the hosts as within each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from srbench.memory.records import (
    DEFAULT_ALIGNMENT,
    MemoryPlan,
    PlanError,
    TensorUsageRecord,
    align_up,
    validate_plan,
)
from srbench.planners import DEFAULT_PLANNER, PlanResult, plan_memory


@dataclass(frozen=True)
class Host:
    """An output storage a run allocates afresh: ``id`` is its record's, ``write`` the step of the
    op that first writes it, ``capacity`` the bytes of the storage eager allocates for it (not
    rounded up to the alignment: the caller gets eager's storage)."""

    id: str
    write: int
    capacity: int


@dataclass(frozen=True)
class HostPlan:
    """The records hosted in one output, planned from its first byte (``result``)."""

    host: Host
    records: tuple[TensorUsageRecord, ...]
    result: PlanResult

    @property
    def allocate(self) -> int:
        """The step before which the output must exist: its first hosted record's first."""
        return min(record.first for record in self.records)


@dataclass(frozen=True)
class Hosting:
    """Every output that hosts intermediates, and what it hosts."""

    plans: tuple[HostPlan, ...] = ()

    @property
    def placement(self) -> dict[str, tuple[str, int]]:
        """Hosted record id -> (host id, byte offset in the host)."""
        return {
            record.id: (plan.host.id, plan.result.plan.offsets[record.id])
            for plan in self.plans
            for record in plan.records
        }

    @property
    def hosted_bytes(self) -> int:
        return sum(record.size for plan in self.plans for record in plan.records)

    @property
    def allocations(self) -> dict[str, int]:
        """Host id -> the step before which a run allocates it."""
        return {plan.host.id: plan.allocate for plan in self.plans}


NO_HOSTING = Hosting()

# Bytes the slab holds at each step of a run, for the slab records given (the caller plans them
# and lays them out as the runtime would hold them: whole, or in segments with cleanup).
SlabHeld = Callable[[Sequence[TensorUsageRecord]], Sequence[int]]


def estimated_peak(
    held: Sequence[int],
    unplanned: Iterable[TensorUsageRecord],
    outputs: Iterable[TensorUsageRecord],
    allocations: Mapping[str, int] | None = None,
) -> int:
    """The most bytes a run holds at one step, as the plan sees it: what the slab holds at that
    step (``held``, one entry per step), the intermediates allocated outside it (``unplanned``:
    fallback results) and the outputs made so far, each from its first step or, for a host, from
    its allocation step (``allocations``, by id). Scratch memory kernels take for themselves is
    not known here."""
    allocations = allocations or {}
    moved = [
        dataclasses.replace(record, first=min(record.first, allocations.get(record.id, record.first)))
        for record in outputs
    ]
    other = _live([*unplanned, *moved], len(held))
    return max((slab + rest for slab, rest in zip(held, other)), default=0)


def _live(records: Iterable[TensorUsageRecord], steps: int) -> list[int]:
    live = [0] * steps
    for record in records:
        for step in range(record.first, min(record.last + 1, steps)):
            live[step] += record.size
    return live


def _fill(host: Host, eligible: Sequence[TensorUsageRecord]) -> list[TensorUsageRecord]:
    """Eligible records latest-ending first, each taken while the bytes alive at every step stay
    within the host's capacity (a necessary condition for a plan to fit; see :func:`plan_hosting`)."""
    live = [0] * host.write
    chosen = []
    for record in sorted(eligible, key=lambda r: (-r.last, -r.size, r.first, r.id)):
        span = range(record.first, record.last + 1)
        if all(live[step] + record.size <= host.capacity for step in span):
            for step in span:
                live[step] += record.size
            chosen.append(record)
    return chosen


def _counts(n: int) -> list[int]:
    """How many of the filled records to try hosting, fewest first (on a tie the fewer win: fewer
    views to make per run, the output allocated later): one, ..., a quarter, half, all."""
    counts = []
    while n:
        counts.append(n)
        n //= 2
    return counts[::-1]


def plan_hosting(
    slab_records: Sequence[TensorUsageRecord],
    hostable: Collection[str],
    hosts: Sequence[Host],
    *,
    unplanned: Sequence[TensorUsageRecord],
    outputs: Sequence[TensorUsageRecord],
    held: SlabHeld,
    planner: str = DEFAULT_PLANNER,
    alignment: int = DEFAULT_ALIGNMENT,
) -> Hosting:
    """Which of ``slab_records`` (those in ``hostable``) go into which of ``hosts``, planned; see
    the module docstring. ``unplanned`` and ``outputs`` are what the run allocates outside the
    slab, ``held`` how the slab of the records left holds memory (for :func:`estimated_peak`).
    A host takes the count of its filled records (all, half, ...) that lowers the estimated peak
    most (the fewest on ties), and nothing where none lowers it. Records of 0 bytes stay: hosting them saves nothing."""
    remaining = {record.id: record for record in slab_records}
    allocations: dict[str, int] = {}
    best = estimated_peak(held(slab_records), unplanned, outputs)
    plans = []
    for host in sorted(hosts, key=lambda h: (-h.capacity, h.write, h.id)):
        eligible = [
            record
            for record in remaining.values()
            if record.id in hostable and 0 < record.size <= host.capacity and record.last < host.write
        ]
        chosen = _fill(host, eligible)
        picked: HostPlan | None = None
        for count in _counts(len(chosen)):
            records = tuple(chosen[:count])
            result = plan_memory(records, planner, alignment=alignment)
            if result.plan.total_bytes > host.capacity:  # a planner may need more than the bytes alive at a step
                continue
            plan = HostPlan(host, records, result)
            ids = {record.id for record in records}
            rest = [record for record in remaining.values() if record.id not in ids]
            estimate = estimated_peak(held(rest), unplanned, outputs, {**allocations, host.id: plan.allocate})
            if estimate < best:
                best, picked = estimate, plan
        if picked is None:
            continue
        for record in picked.records:
            del remaining[record.id]
        allocations[host.id] = picked.allocate
        plans.append(picked)
    return Hosting(tuple(plans))


def validate_hosting(
    slab_records: Sequence[TensorUsageRecord],
    slab_plan: MemoryPlan | None,
    outputs: Sequence[TensorUsageRecord],
    hosting: Hosting,
    alignment: int = DEFAULT_ALIGNMENT,
) -> None:
    """Raise :class:`~srbench.memory.records.PlanError` unless the slab and the hosts together are
    a correct placement: every host is an output record and every hosted plan fits its host's
    capacity, no record is placed twice, and, with the slab and each host laid out as regions of
    one address space (a host occupied by its output from the output's first step to its last),
    no two tensors alive at one step share a byte (:func:`validate_plan`)."""
    records = list(slab_records)
    offsets = dict(slab_plan.offsets) if slab_plan is not None else {}
    if slab_plan is not None:
        validate_plan(slab_records, slab_plan, alignment)
    base = align_up(slab_plan.total_bytes if slab_plan is not None else 0, alignment)
    by_id = {record.id: record for record in outputs}
    for plan in hosting.plans:
        host = plan.host
        output = by_id.get(host.id)
        if output is None:
            raise PlanError(f"host {host.id!r} is not a graph output", (host.id,))
        if plan.result.plan.total_bytes > host.capacity:
            raise PlanError(
                f"the records hosted in {host.id!r} need {plan.result.plan.total_bytes} bytes, "
                f"more than its {host.capacity}",
                (host.id,),
            )
        validate_plan(plan.records, plan.result.plan, alignment)
        if host.id in offsets:
            raise PlanError(f"host {host.id!r} is placed twice", (host.id,))
        region = max(host.capacity, output.size)
        records.append(TensorUsageRecord(host.id, output.first, output.last, region))
        offsets[host.id] = base
        for record in plan.records:
            if record.id in offsets:
                raise PlanError(f"tensor {record.id!r} is placed twice (in the slab or another host)", (record.id,))
            records.append(record)
            offsets[record.id] = base + plan.result.plan.offsets[record.id]
        base += align_up(region, alignment)
    validate_plan(records, MemoryPlan("slab and hosts", offsets, base), alignment)
