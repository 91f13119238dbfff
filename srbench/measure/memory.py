"""Memory of one run: what the runtime planned, the lower bound, and what the run really did.

The observed side comes from ``torch.profiler`` with ``profile_memory=True`` read by
:mod:`srbench.observe.record`, which records every allocation and free of the profiled device: the
peak is the most bytes the call had allocated at once (its own allocations, outputs included),
and the allocation count says whether a runtime that claims to pre-plan its memory still
allocates in steady state. Minor page faults per call (``resource.getrusage``) show the cost of
handing memory back to the OS and taking it again. The planned side is reported only by runtimes
that plan (``planned_memory()``); the estimated side is eager's peak estimated on fake tensors
(:mod:`srbench.estimate`), when the caller gives it.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from srbench.inputs import Inputs


@dataclass(frozen=True)
class MemoryReport:
    planned_bytes: int | None
    lower_bound: int | None
    graph_lower_bound: int | None
    peak_bytes: int
    allocations: int
    allocated_bytes: int
    page_faults_per_run: float
    estimated_peak_bytes: int | None = None  # eager's peak, estimated on fake tensors

    @property
    def planned_to_lower_bound(self) -> float | None:
        if self.planned_bytes is None or not self.lower_bound:
            return None
        return self.planned_bytes / self.lower_bound

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "planned_to_lower_bound": self.planned_to_lower_bound}


@dataclass(frozen=True)
class ObservedAllocations:
    peak_bytes: int
    allocations: int
    allocated_bytes: int


def observe_allocations(run: Callable[[], Any], device: str = "cpu") -> ObservedAllocations:
    """Profile one call of ``run`` and sum the allocations it made on ``device``."""
    from srbench.observe.record import live_bytes_over, record

    allocations = record(run, device).allocations
    return ObservedAllocations(
        peak_bytes=max((live for _, live in live_bytes_over(allocations)), default=0),
        allocations=len(allocations),
        allocated_bytes=sum(allocation.nbytes for allocation in allocations),
    )


def page_faults_per_run(run: Callable[[], Any], runs: int = 10, warmup: int = 5) -> float:
    """Minor page faults per call of ``run`` in steady state: over ``runs`` calls after ``warmup``
    calls. One warm-up call is not always steady state: glibc raises its mmap threshold when a
    mapped block is freed, so a size that was mapped and unmapped at every call moves to the heap
    only after a call or two, and after an observer's call (the allocation profiler) a static
    runtime's slab segments of 512 KiB faulted again for up to four calls, then never."""
    for _ in range(warmup):
        run()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(runs):
        run()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / runs


def measure_memory(
    runtime: Callable[..., Any], inputs: Inputs, *, device: str = "cpu", estimated_peak_bytes: int | None = None
) -> MemoryReport:
    """Memory figures of ``runtime`` on the call ``inputs`` in steady state (after a warm-up call);
    ``estimated_peak_bytes`` is carried into the report as given."""
    call = lambda: inputs.call(runtime)  # noqa: E731 - a thunk for the observers
    faults = page_faults_per_run(call)
    observed = observe_allocations(call, device)
    planned_memory = getattr(runtime, "planned_memory", None)
    planned = planned_memory() if callable(planned_memory) else None
    return MemoryReport(
        planned_bytes=planned.planned_bytes if planned else None,
        lower_bound=planned.lower_bound if planned else None,
        graph_lower_bound=planned.graph_lower_bound if planned else None,
        peak_bytes=observed.peak_bytes,
        allocations=observed.allocations,
        allocated_bytes=observed.allocated_bytes,
        page_faults_per_run=faults,
        estimated_peak_bytes=estimated_peak_bytes,
    )
