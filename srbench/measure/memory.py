"""Memory of one run: what the runtime planned, the lower bound, and what the run really did.

The observed side comes from ``torch.profiler`` with ``profile_memory=True``, which records every
allocation and free of the profiled device: the peak is the highest running total over one call
(counted from zero at its start, outputs included), and the allocation count says whether a
runtime that claims to pre-plan its memory still allocates in steady state. Minor page faults
per call (``resource.getrusage``) show the cost of handing memory back to the OS and taking it
again. The planned side is reported only by runtimes that plan (``planned_memory()``).
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from torch.profiler import ProfilerActivity, profile


@dataclass(frozen=True)
class MemoryReport:
    planned_bytes: int | None
    lower_bound: int | None
    graph_lower_bound: int | None
    peak_bytes: int
    allocations: int
    allocated_bytes: int
    page_faults_per_run: float

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
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities, profile_memory=True) as prof:
        result = run()
    del result
    wanted = "CUDA" if device.startswith("cuda") else "CPU"
    live = peak = allocations = allocated = 0
    events = sorted(
        (event for event in prof.profiler.kineto_results.events() if event.name() == "[memory]"),
        key=lambda event: event.start_ns(),
    )
    for event in events:
        if event.device_type().name != wanted:
            continue
        nbytes = event.nbytes()
        live += nbytes
        peak = max(peak, live)
        if nbytes > 0:
            allocations += 1
            allocated += nbytes
    return ObservedAllocations(peak_bytes=peak, allocations=allocations, allocated_bytes=allocated)


def page_faults_per_run(run: Callable[[], Any], runs: int = 10) -> float:
    """Minor page faults per call of ``run``, over ``runs`` calls after one warm-up call."""
    run()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(runs):
        run()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / runs


def measure_memory(runtime: Callable[..., Any], inputs: tuple, *, device: str = "cpu") -> MemoryReport:
    """Memory figures of ``runtime`` on ``inputs`` in steady state (after a warm-up call)."""
    call = lambda: runtime(*inputs)  # noqa: E731 - a thunk for the observers
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
    )
