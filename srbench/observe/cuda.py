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

Written from PyTorch's documentation of the memory snapshot and ``CUDACachingAllocator.cpp``,
then run on an H200 (torch 2.11, ``scripts/gpu-check``), which showed that the profiler there
reports no CUDA frees: they come from the history (:func:`with_history`).
``tests/test_observe.py`` checks the matching on hand-written traces, ``tests/test_observe_cuda.py``
the real allocator where a GPU is present.
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
from srbench.observe.record import node_at, span_at

if TYPE_CHECKING:
    from srbench.observe.record import Allocation, RecordedRun

HISTORY_ENTRIES = 1_000_000


# ``HistoryAllocation.freed_before`` of a block the trace never frees.
NOT_FREED = -1


@dataclass(frozen=True)
class HistoryAllocation:
    """One ``alloc`` of the allocator's history: the block's address, the bytes requested, and the
    bytes of segments the allocator opened (or, retrying after running out, released: negative)
    since the previous ``alloc``, which it did to serve this one. ``freed_before``: the position
    (among the trace's ``alloc`` entries) of the first allocation after the block's
    ``free_completed``, the number of allocations when it was freed after the last one, or
    :data:`NOT_FREED`."""

    address: int
    requested: int
    reserved_change: int
    freed_before: int = NOT_FREED


def history_allocations(trace: Sequence[dict[str, Any]]) -> list[HistoryAllocation]:
    """The ``alloc`` entries of one device's trace, in order, with the segments opened for each
    and where among them each block was freed."""
    allocations: list[HistoryAllocation] = []
    live: dict[int, int] = {}  # address -> position of the allocation holding it
    freed_since: list[int] = []  # positions of blocks freed since the last ``alloc``
    reserved_change = 0
    for entry in trace:
        action = entry.get("action")
        if action == "segment_alloc":
            reserved_change += int(entry["size"])
        elif action == "segment_free":
            reserved_change -= int(entry["size"])
        elif action == "free_completed" and int(entry["addr"]) in live:
            freed_since.append(live.pop(int(entry["addr"])))
        elif action == "alloc":
            for position in freed_since:
                allocations[position] = dataclasses.replace(allocations[position], freed_before=len(allocations))
            freed_since = []
            live[int(entry["addr"])] = len(allocations)
            allocations.append(HistoryAllocation(int(entry["addr"]), int(entry["size"]), reserved_change))
            reserved_change = 0
    for position in freed_since:
        allocations[position] = dataclasses.replace(allocations[position], freed_before=len(allocations))
    return allocations


def with_history(run: RecordedRun, trace: Sequence[dict[str, Any]]) -> RecordedRun:
    """``run`` (recorded by the profiler) with each allocation's requested bytes and reserved
    change taken from the allocator's ``trace`` of the same run, matched by address in order. An
    allocation the history does not have keeps ``requested_bytes`` None.

    A free the profiler did not report is taken from the history too: on an H200 with torch 2.11
    the profiler reported every CUDA allocation and no free, so a run's blocks looked alive to its
    end. The history orders each free among the allocations; the free is placed just before the
    first allocation after it (or after the run's last event, when none follows), so the bytes
    alive at every allocation, and so the peak, are exact, and the node it is attributed to is
    the one running at that time (or the one that ran last before it)."""
    history = history_allocations(trace)
    at_address: dict[int, deque[int]] = {}
    for position, entry in enumerate(history):
        at_address.setdefault(entry.address, deque()).append(position)
    matched, position_of = [], {}
    for allocation in run.allocations:
        queue = at_address.get(allocation.address)
        if not queue:
            matched.append(allocation)
            continue
        position = queue.popleft()
        position_of[position] = len(matched)
        entry = history[position]
        matched.append(
            dataclasses.replace(allocation, requested_bytes=entry.requested, reserved_change=entry.reserved_change)
        )
    run_end = max((t for a in run.allocations for t in (a.start_ns, a.end_ns) if t is not None), default=0)
    run_end = max([run_end, *(span.end_ns for span in run.spans)]) + 1
    for position, index in position_of.items():
        allocation, freed_before = matched[index], history[position].freed_before
        if allocation.freed or freed_before == NOT_FREED:
            continue
        end_ns = _free_time(
            run, matched, position_of.get(freed_before - 1, index), position_of.get(freed_before), run_end
        )
        freed_in, freed_after = node_at(run.spans, end_ns)
        matched[index] = dataclasses.replace(
            allocation, freed=True, freed_in=freed_in, freed_after=freed_after, end_ns=end_ns
        )
    return dataclasses.replace(run, allocations=tuple(matched))


def _free_time(
    run: RecordedRun, allocations: Sequence[Allocation], before: int, after: int | None, run_end: int
) -> int:
    """When a free the history orders after allocation ``before`` and before allocation ``after``
    (None: none follows) is taken to happen: at the end of the node range ``before`` was made
    in (a workspace given back inside its node stays a temporary of that node), or just after
    ``before`` when that was made between nodes; and before ``after`` in any case."""
    made = allocations[before].start_ns
    span = span_at(run.spans, made)
    span_end = span.end_ns if span is not None and made <= span.end_ns else made + 1
    latest = allocations[after].start_ns - 1 if after is not None else run_end
    return min(span_end, latest)


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
