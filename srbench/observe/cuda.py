"""The CUDA caching allocator's own record of a run, to hold the estimate's model of it to account.

``torch.cuda.memory._record_memory_history`` makes the allocator trace every request as it
serves it: ``alloc`` (with the size requested) and ``free_completed`` per tensor, ``segment_alloc``
per ``cudaMalloc``. :func:`record_cuda` turns one run's trace into the
:class:`~srbench.estimate.allocators.MemoryEvent` sequence the estimate's allocator models take,
and keeps what the real allocator reported (``max_memory_allocated`` and ``max_memory_reserved``
over the run, counted from an emptied cache), so replaying the sequence through
:class:`~srbench.estimate.allocators.CudaCachingAllocator` can be compared with the real figures.
(Attribution to graph nodes on CUDA goes through the profiler, as on the CPU: see
:mod:`srbench.observe.record`.)

Written from PyTorch's documentation of the memory snapshot and ``CUDACachingAllocator.cpp``; no
GPU was available to run it, and ``tests/test_observe_cuda.py`` skips with that reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from srbench.estimate.allocators import Action, MemoryEvent

HISTORY_ENTRIES = 1_000_000


@dataclass(frozen=True)
class CudaRun:
    """One run as the CUDA caching allocator saw it: its requests in order, and the peaks it
    reported beyond what was allocated before the run (bytes of blocks, bytes of segments)."""

    events: tuple[MemoryEvent, ...]
    peak_allocated: int
    peak_reserved: int
    segments_opened: int


def _events(trace: list[dict[str, Any]]) -> tuple[list[MemoryEvent], int]:
    events, live, segments = [], {}, 0
    for index, entry in enumerate(trace):
        action, address = entry.get("action"), entry.get("addr")
        if action == "alloc":
            live[address] = f"block@{address:#x}#{index}"
            events.append(MemoryEvent(index, live[address], Action.ALLOCATE, int(entry["size"])))
        elif action == "free_completed" and address in live:
            events.append(MemoryEvent(index, live.pop(address), Action.FREE))
        elif action == "segment_alloc":
            segments += 1
    return events, segments


def record_cuda(run: Callable[[], Any], device: int = 0) -> CudaRun:
    """Run ``run`` once on ``device`` from an emptied cache, recording the allocator's history."""
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    allocated_before = torch.cuda.memory_allocated(device)
    reserved_before = torch.cuda.memory_reserved(device)
    torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES)
    try:
        result = run()
        del result
        torch.cuda.synchronize(device)
        snapshot = torch.cuda.memory._snapshot(device)
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    traces = snapshot.get("device_traces", [])
    trace = traces[device] if device < len(traces) else []
    events, segments = _events(trace)
    return CudaRun(
        events=tuple(events),
        peak_allocated=torch.cuda.max_memory_allocated(device) - allocated_before,
        peak_reserved=torch.cuda.max_memory_reserved(device) - reserved_before,
        segments_opened=segments,
    )
