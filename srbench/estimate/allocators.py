"""What a device's allocator makes of a sequence of tensor allocations and frees, without the device.

A run's memory is a sequence of :class:`MemoryEvent` (allocate ``nbytes`` for a storage, free it).
An :class:`AllocatorModel` replays that sequence and says what the device's allocator would hold:
the bytes requested, the bytes of the blocks it hands out (its rounding), and the bytes it has
reserved from the device (its segments). Estimation (:mod:`srbench.estimate`) replays the events a
graph would cause in eager mode; the same models could replay observed events.

Two models:

- :class:`CpuAllocator`: c10's default CPU allocator (``c10/core/impl/alloc_cpu.cpp``) calls
  ``posix_memalign`` with 64-byte alignment for every tensor and frees at once; it caches
  nothing, and the profiler accounts exactly the bytes requested. Blocks = reserved = requested.
- :class:`CudaCachingAllocator`: PyTorch's CUDA caching allocator, written here from reading
  ``c10/cuda/CUDACachingAllocator.cpp`` and ``c10/core/AllocatorConfig.h`` (PyTorch 2.x, default
  configuration: no ``PYTORCH_CUDA_ALLOC_CONF``, no expandable segments, one stream). Its rules:

  * every request is rounded up to a multiple of 512 bytes (``kMinBlockSize``; ``round_size``);
  * requests of at most 1 MiB (``kSmallSize``) come from the *small* pool, larger ones from the
    *large* pool (``get_pool``);
  * a request no cached free block can hold opens a new segment (one ``cudaMalloc``): 2 MiB
    (``kSmallBuffer``) for small requests, 20 MiB (``kLargeBuffer``) for large ones under
    10 MiB (``kMinLargeAlloc``), otherwise the request rounded up to 2 MiB (``kRoundLarge``;
    ``get_allocation_size``);
  * a free block is chosen best fit: the smallest cached block of the pool that is large enough
    (``get_free_block``: the pool is ordered by size, then address);
  * the chosen block is split when what is left is at least 512 bytes (small pool) or more than
    1 MiB (large pool): the request takes the front, the rest stays cached (``should_split``);
  * a freed block merges with free neighbours of the same segment (``free_block`` /
    ``try_merge_blocks``); segments are never given back (only ``empty_cache()`` or an
    out-of-memory retry would), so *reserved* only grows.

  What it leaves out: several streams, CUDA graph pools, ``max_split_size_mb`` and the other
  ``PYTORCH_CUDA_ALLOC_CONF`` knobs, expandable segments, and the order the real allocator gives
  equal-sized blocks of different segments (here: the older segment first). No GPU was at hand
  to check it against ``torch.cuda.memory_stats()``: its tests check the rules above on
  hand-computed sequences.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

KiB = 1024
MiB = 1024 * KiB

# c10/cuda/CUDACachingAllocator.cpp and c10/core/AllocatorConfig.h (the constants' own names)
MIN_BLOCK_SIZE = 512  # kMinBlockSize: every request is rounded up to a multiple of this
SMALL_SIZE = 1 * MiB  # kSmallSize: the largest request served from the small pool
SMALL_BUFFER = 2 * MiB  # kSmallBuffer: the segment size of the small pool
LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the segment opened for large requests under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc
ROUND_LARGE = 2 * MiB  # kRoundLarge: larger requests get a segment of their size rounded to this
CPU_ALIGNMENT = 64  # c10::gAlignment: posix_memalign's alignment in alloc_cpu.cpp


class Action(enum.Enum):
    ALLOCATE = "allocate"
    FREE = "free"


@dataclass(frozen=True)
class MemoryEvent:
    """One allocation (``nbytes`` for ``storage``) or the free of ``storage``, during ``step``."""

    step: int
    storage: str
    action: Action
    nbytes: int = 0


@dataclass(frozen=True)
class AllocatorStats:
    """What an allocator held over a replayed sequence.

    ``peak_requested`` is the most bytes the program asked for at once; ``peak_allocated`` the
    most bytes of blocks handed out at once (``torch.cuda.max_memory_allocated``);
    ``peak_reserved`` the most bytes taken from the device (``max_memory_reserved``).
    ``step_peaks[i]`` is the highest allocated total during step ``i``.
    """

    allocator: str
    peak_requested: int
    peak_allocated: int
    peak_reserved: int
    segments: int
    step_peaks: tuple[int, ...] = field(default=(), repr=False)


class AllocatorModel(Protocol):
    name: str

    def block_size(self, nbytes: int) -> int:
        """Bytes of the block a request of ``nbytes`` gets."""
        ...

    def reserved_for(self, nbytes: int) -> int:
        """Bytes reserved from the device when ``nbytes`` is the only allocation."""
        ...

    def replay(self, events: Iterable[MemoryEvent], steps: int = 0) -> AllocatorStats: ...


class EventError(ValueError):
    """Events that cannot happen: a storage allocated twice, or freed before it is allocated."""


class _Totals:
    """Running and peak totals of a replay, per step."""

    def __init__(self, steps: int):
        self.requested = self.allocated = self.reserved = 0
        self.peak_requested = self.peak_allocated = self.peak_reserved = 0
        self.step_peaks = [0] * steps

    def update(self, step: int) -> None:
        self.peak_requested = max(self.peak_requested, self.requested)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        if step >= len(self.step_peaks):
            self.step_peaks.extend([0] * (step + 1 - len(self.step_peaks)))
        self.step_peaks[step] = max(self.step_peaks[step], self.allocated)


class CpuAllocator:
    """c10's CPU allocator: one aligned ``malloc`` per tensor, freed at once; see the module docstring."""

    name = "cpu"

    def block_size(self, nbytes: int) -> int:
        return nbytes

    def reserved_for(self, nbytes: int) -> int:
        return nbytes

    def replay(self, events: Iterable[MemoryEvent], steps: int = 0) -> AllocatorStats:
        totals = _Totals(steps)
        live: dict[str, int] = {}
        for event in events:
            if event.action is Action.ALLOCATE:
                if event.storage in live:
                    raise EventError(f"storage {event.storage!r} allocated twice (step {event.step})")
                live[event.storage] = event.nbytes
                totals.requested += event.nbytes
            else:
                if event.storage not in live:
                    raise EventError(f"storage {event.storage!r} freed but not allocated (step {event.step})")
                totals.requested -= live.pop(event.storage)
            totals.allocated = totals.reserved = totals.requested
            totals.update(event.step)
        return AllocatorStats(
            self.name,
            totals.peak_requested,
            totals.peak_allocated,
            totals.peak_reserved,
            segments=0,
            step_peaks=tuple(totals.step_peaks),
        )


def round_size(nbytes: int) -> int:
    """The CUDA caching allocator's block size for a request (``round_size``)."""
    return max(MIN_BLOCK_SIZE, -(-nbytes // MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE)


def segment_size(block: int) -> int:
    """The segment (``cudaMalloc``) opened for a block no cached block holds (``get_allocation_size``)."""
    if block <= SMALL_SIZE:
        return SMALL_BUFFER
    if block < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-block // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False)
class _Block:
    """A piece of a segment: allocated or cached free. ``prev``/``next`` are its neighbours in the segment."""

    segment: int
    offset: int
    size: int
    small: bool
    allocated: bool = False
    prev: _Block | None = None
    next: _Block | None = None

    def key(self) -> tuple[int, int, int]:
        return (self.size, self.segment, self.offset)


class _Pool:
    """Cached free blocks of one pool, ordered as the allocator's ``BlockPool`` (size, then address)."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, int, int]] = []
        self.blocks: dict[tuple[int, int, int], _Block] = {}

    def add(self, block: _Block) -> None:
        key = block.key()
        bisect.insort(self.keys, key)
        self.blocks[key] = block

    def remove(self, block: _Block) -> None:
        key = block.key()
        del self.keys[bisect.bisect_left(self.keys, key)]
        del self.blocks[key]

    def best_fit(self, size: int) -> _Block | None:
        where = bisect.bisect_left(self.keys, (size, -1, -1))
        return self.blocks[self.keys[where]] if where < len(self.keys) else None


class CudaCachingAllocator:
    """PyTorch's CUDA caching allocator, replayed; the rules and their source are in the module docstring."""

    name = "cuda-caching"

    def block_size(self, nbytes: int) -> int:
        return 0 if nbytes == 0 else round_size(nbytes)

    def reserved_for(self, nbytes: int) -> int:
        return 0 if nbytes == 0 else segment_size(round_size(nbytes))

    def replay(self, events: Iterable[MemoryEvent], steps: int = 0) -> AllocatorStats:
        totals = _Totals(steps)
        pools = {True: _Pool(), False: _Pool()}
        live: dict[str, tuple[_Block | None, int]] = {}
        segments = 0
        for event in events:
            if event.action is Action.ALLOCATE:
                if event.storage in live:
                    raise EventError(f"storage {event.storage!r} allocated twice (step {event.step})")
                block = None
                if event.nbytes > 0:  # a zero-byte tensor gets no block (the allocator returns nullptr)
                    size = round_size(event.nbytes)
                    small = size <= SMALL_SIZE
                    block = pools[small].best_fit(size)
                    if block is None:
                        block = _Block(segments, 0, segment_size(size), small)
                        segments += 1
                        totals.reserved += block.size
                    else:
                        pools[small].remove(block)
                    self._split(block, size, pools[small])
                    block.allocated = True
                    totals.allocated += block.size
                live[event.storage] = (block, event.nbytes)
                totals.requested += event.nbytes
            else:
                if event.storage not in live:
                    raise EventError(f"storage {event.storage!r} freed but not allocated (step {event.step})")
                block, requested = live.pop(event.storage)
                totals.requested -= requested
                if block is not None:
                    totals.allocated -= block.size
                    self._free(block, pools[block.small])
            totals.update(event.step)
        return AllocatorStats(
            self.name,
            totals.peak_requested,
            totals.peak_allocated,
            totals.peak_reserved,
            segments=segments,
            step_peaks=tuple(totals.step_peaks),
        )

    @staticmethod
    def _split(block: _Block, size: int, pool: _Pool) -> None:
        remaining = block.size - size
        if not (remaining >= MIN_BLOCK_SIZE if block.small else remaining > SMALL_SIZE):
            return
        rest = _Block(block.segment, block.offset + size, remaining, block.small, prev=block, next=block.next)
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        pool.add(rest)

    @staticmethod
    def _free(block: _Block, pool: _Pool) -> None:
        block.allocated = False
        for neighbour in (block.prev, block.next):
            if neighbour is None or neighbour.allocated:
                continue
            pool.remove(neighbour)
            if neighbour is block.prev:
                block.offset = neighbour.offset
                block.prev = neighbour.prev
                if block.prev is not None:
                    block.prev.next = block
            else:
                block.next = neighbour.next
                if block.next is not None:
                    block.next.prev = block
            block.size += neighbour.size
        pool.add(block)


def allocator_for(device: str) -> AllocatorModel:
    """The allocator model of a device type: ``cpu`` or ``cuda`` (``cuda:N`` too)."""
    kind = device.split(":")[0]
    if kind == "cpu":
        return CpuAllocator()
    if kind == "cuda":
        return CudaCachingAllocator()
    raise ValueError(f"no allocator model for device {device!r}; expected cpu or cuda")
