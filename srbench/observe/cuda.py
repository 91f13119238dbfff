"""The CUDA caching allocator's own record of a run: what each allocation asked for, and the
segments the allocator opened to serve it.

``torch.cuda.memory._record_memory_history`` makes the allocator trace every request as it
serves it (``torch/csrc/cuda/memory_snapshot.cpp`` names the fields): ``alloc`` with the block's
address and the size *requested* (``orig_size``), ``free_completed`` per block given back to the
cache, ``segment_alloc`` / ``segment_free`` per ``cudaMalloc`` / ``cudaFree``, the segment entry
just before the ``alloc`` that needed it. The profiler sees the same allocations (same addresses,
same order) but reports the *block* (the request rounded up to 512 bytes) and no segments; so
an observed CUDA run (:func:`srbench.observe.record.record`) is recorded by both, and
:func:`with_history` gives each of its allocations, matched by address in order, the bytes it
requested and the segment bytes opened for it. The node of an allocation stays the profiler's
(its ``record_function`` nesting is exact; the history's microsecond times are not).

:func:`record_cuda` records a run by the history alone, as the
:class:`~srbench.estimate.allocators.MemoryEvent` sequence the estimate's allocator models
replay, with the peaks the real allocator reported, so the model can be held to account.

Written from PyTorch's documentation of the memory snapshot and ``CUDACachingAllocator.cpp``; no
GPU was available to run it: ``tests/test_observe.py`` checks the matching on hand-written
traces, and ``tests/test_observe_cuda.py`` (the real allocator) skips with that reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from srbench.estimate.allocators import Action, MemoryEvent

if TYPE_CHECKING:
    from srbench.observe.record import RecordedRun

HISTORY_ENTRIES = 1_000_000


@dataclass(frozen=True)
class HistoryAllocation:
    """One ``alloc`` of the allocator's history: the block's address, the bytes requested, and the
    bytes of segments the allocator opened (or, retrying after running out, released: negative)
    since the previous ``alloc``, which it did to serve this one."""

    address: int
    requested: int
    reserved_change: int


def history_allocations(trace: Sequence[dict[str, Any]]) -> list[HistoryAllocation]:
    """The ``alloc`` entries of one device's trace, in order, with the segments opened for each."""
    allocations, reserved_change = [], 0
    for entry in trace:
        action = entry.get("action")
        if action == "segment_alloc":
            reserved_change += int(entry["size"])
        elif action == "segment_free":
            reserved_change -= int(entry["size"])
        elif action == "alloc":
            allocations.append(HistoryAllocation(int(entry["addr"]), int(entry["size"]), reserved_change))
            reserved_change = 0
    return allocations


def with_history(run: RecordedRun, trace: Sequence[dict[str, Any]]) -> RecordedRun:
    """``run`` (recorded by the profiler) with each allocation's requested bytes and reserved
    change taken from the allocator's ``trace`` of the same run, matched by address in order. An
    allocation the history does not have keeps ``requested_bytes`` None."""
    at_address: dict[int, deque[HistoryAllocation]] = {}
    for entry in history_allocations(trace):
        at_address.setdefault(entry.address, deque()).append(entry)
    matched = []
    for allocation in run.allocations:
        queue = at_address.get(allocation.address)
        if not queue:
            matched.append(allocation)
            continue
        entry = queue.popleft()
        matched.append(
            dataclasses.replace(allocation, requested_bytes=entry.requested, reserved_change=entry.reserved_change)
        )
    return dataclasses.replace(run, allocations=tuple(matched))


def cuda_device_index(device: str | int | torch.device) -> int:
    device = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    return device.index if device.index is not None else torch.cuda.current_device()


@contextlib.contextmanager
def allocator_history(device: str | int | torch.device = "cuda") -> Iterator[list[dict[str, Any]]]:
    """Record the caching allocator's history (no stack traces: cheap) while the block runs; the
    list yielded is filled with ``device``'s trace entries, oldest first, when the block ends.
    The history starts empty; recording is switched off again at the end."""
    index = cuda_device_index(device)
    trace: list[dict[str, Any]] = []
    torch.cuda.memory._record_memory_history(
        "all", context=None, max_entries=HISTORY_ENTRIES, clear_history=True, device=index
    )
    try:
        yield trace
        torch.cuda.synchronize(index)
        traces = torch.cuda.memory._snapshot(index).get("device_traces", [])
        trace.extend(traces[index] if index < len(traces) else [])
    finally:
        torch.cuda.memory._record_memory_history(None)


@dataclass(frozen=True)
class CudaRun:
    """One run as the CUDA caching allocator saw it: its requests in order, and the peaks it
    reported beyond what was allocated before the run (bytes of blocks, bytes of segments)."""

    events: tuple[MemoryEvent, ...]
    peak_allocated: int
    peak_reserved: int
    segments_opened: int


def _events(trace: Sequence[dict[str, Any]]) -> tuple[list[MemoryEvent], int]:
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
    with allocator_history(device) as trace:
        result = run()
        del result
    events, segments = _events(trace)
    return CudaRun(
        events=tuple(events),
        peak_allocated=torch.cuda.max_memory_allocated(device) - allocated_before,
        peak_reserved=torch.cuda.max_memory_reserved(device) - reserved_before,
        segments_opened=segments,
    )
