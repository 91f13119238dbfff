"""How a run with ``cleanup_activations`` holds its slab: in segments, each taken and given back
when the plan needs it.

A slab held whole from a run's first op to its last stacks its full size on everything the run
allocates outside the plan: fallback results, and the scratch memory kernels take for themselves
(oneDNN reorders a convolution's weight into its blocked layout at every call: 9 MiB for one of
ResNet-50's last 3x3 convolutions, while the slab, sized for the first stage, held 9.4 MiB of
which 1.5 MiB was still in use). Eager holds only what is alive at each op. So, with cleanup, the
slab follows the plan:

* the plan's offsets are cut where its high-water mark falls for good: before the op at step
  ``t`` no record alive at ``t`` or born later ends above ``high(t)``; a cut at ``high(t)`` is
  made where it gives back at least :data:`MIN_CUT_BYTES` and :data:`MIN_CUT_SHARE` of what
  lies below the previous cut, and where no record straddles it;
* each segment between two cuts is a storage of its own, taken (resized from 0, no copy) right
  before the first op that writes a record placed in it, and given back right after the last op
  that reads one. The top segments go first, while the run goes on in the lower ones;
* a segment of :data:`LAZY_RELEASE_BYTES` or more would come back as a fresh mapping whose
  every page faults at every run: it keeps its storage, and its pages are given back to the OS
  lazily after each run instead (:class:`Release`, :mod:`srbench.static.page_release`).

A segment is given back within an op, where the allocator hook serves that op's scratch and the
op then allocates what the slab does not hold (the model's output): see
:mod:`srbench.static.mid_op_release`, which plans the slab for it.

Cutting one storage down instead (``resize_`` to fewer bytes) would copy what it keeps into a
new allocation while the old one is still held: more memory at the moment of the cut, not less.
How much the cuts give back depends on where the planner put the late records; the planner is
asked for nothing it does not already do.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from srbench.memory.records import TensorUsageRecord, align_up

# Each segment is one more storage to take and give back per run: cuts that give back less than
# this are not worth their calls.
MIN_CUT_BYTES = 1 << 20
MIN_CUT_SHARE = 0.25
# glibc's largest mmap threshold on 64-bit Linux: an allocation above it is always a fresh
# mapping, unmapped when freed (measured, a chain of elementwise ops on 64 MiB tensors: 49,154
# faults per run with the slab resized to 0 and back, 0 with its pages released lazily).
LAZY_RELEASE_BYTES = 32 << 20


class Release(enum.Enum):
    """How a segment is given back after its last reader."""

    RESIZE = "resize"  # its storage resized to 0: the bytes go back to the allocator
    LAZY = "lazy"  # its storage kept, its pages marked free for the OS to take when it needs them


@dataclass(frozen=True)
class SlabSegment:
    """Plan offsets ``[start, start + size)`` as one storage, taken right before ``take_before``
    runs and given back right after ``release_after`` (``None``: at the start, at the end of the
    run); with ``release_within``, given back by the allocator hook within ``release_after``'s
    op, right before its allocation of that index (:mod:`srbench.static.mid_op_release`)."""

    start: int
    size: int
    take_before: str | None = None
    release_after: str | None = None
    release: Release = Release.RESIZE
    release_within: int | None = None


@dataclass(frozen=True)
class SlabLayout:
    """The slab's segments, lowest offsets first (one segment: the slab as a single storage)."""

    segments: tuple[SlabSegment, ...]

    @classmethod
    def whole(cls, size: int) -> SlabLayout:
        """One storage, taken at the start of the run and given back at its end."""
        return cls((SlabSegment(0, size),))

    def held(self, steps: Sequence[str]) -> list[int]:
        """Bytes the segments hold at each of ``steps`` (the graph's node names in order): a segment
        from the step it is taken before to the step it is given back after (the run's ends where
        those are ``None``), a lazily released one at every step (torch's allocator keeps counting
        its bytes)."""
        position = {name: index for index, name in enumerate(steps)}
        held = [0] * len(steps)
        for segment in self.segments:
            first, last = 0, len(steps) - 1
            if segment.release is Release.RESIZE:
                first = position[segment.take_before] if segment.take_before is not None else first
                last = position[segment.release_after] if segment.release_after is not None else last
            for step in range(first, last + 1):
                held[step] += segment.size
        return held

    def locate(self, offset: int) -> tuple[int, int]:
        """The segment holding plan offset ``offset``, and the offset within it."""
        index = bisect.bisect_right([segment.start for segment in self.segments], offset) - 1
        return index, offset - self.segments[index].start


def _covered(records: Sequence[TensorUsageRecord], offsets: Mapping[str, int]) -> list[tuple[int, int]]:
    """The offsets inside some record, as disjoint open intervals, lowest first (a cut there would
    split a tensor; the ends of a record are fine)."""
    spans = sorted((offsets[record.id], offsets[record.id] + record.size) for record in records if record.size)
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _cuts(records: Sequence[TensorUsageRecord], offsets: Mapping[str, int], runs_code: Sequence[bool]) -> list[int]:
    """Offsets to cut the plan at (see the module docstring), highest first."""
    first = min(record.first for record in records)
    last = max(record.last for record in records)
    ends: dict[int, int] = {}
    for record in records:
        ends[record.last] = max(ends.get(record.last, 0), offsets[record.id] + record.size)
    high: dict[int, int] = {}
    running = 0
    for step in range(last, first - 1, -1):
        running = max(running, ends.get(step, 0))
        high[step] = running
    covered = _covered(records, offsets)
    starts = [start for start, _ in covered]

    def clean(offset: int) -> int:
        """The lowest offset at or above ``offset`` that no record straddles."""
        index = bisect.bisect_left(starts, offset) - 1
        if index >= 0 and covered[index][0] < offset < covered[index][1]:
            return covered[index][1]
        return offset

    cuts: list[int] = []
    top = high[first]
    for step in range(first + 1, last + 1):
        if not runs_code[step]:
            continue
        cut = clean(align_up(high[step]))  # segments start aligned, as the slab does
        while align_up(cut) != cut:  # a record's end need not be aligned: the next clean aligned offset
            cut = clean(align_up(cut))
        if cut > 0 and top - cut >= max(MIN_CUT_BYTES, MIN_CUT_SHARE * top):
            cuts.append(cut)
            top = cut
    return cuts


def slab_layout(
    steps: Sequence[str],
    records: Sequence[TensorUsageRecord],
    offsets: Mapping[str, int],
    total: int,
    runs_code: frozenset[str],
    lazy_release: bool = False,
) -> SlabLayout:
    """The segments of a slab of ``total`` bytes laid out at ``offsets``; ``steps`` are the graph's
    node names in order (the records' steps index them), ``runs_code`` the nodes that have lines
    in the run (a segment is taken and given back next to one of those, else at the run's ends);
    ``lazy_release``: whether pages can be given back lazily on this device (see :class:`Release`)."""
    records = [record for record in records if record.size]  # an empty tensor needs no bytes
    if not records:  # nothing to cut (a batch of 0 plans only empty tensors): one storage
        return SlabLayout.whole(total)
    starts = [0, *sorted(_cuts(records, offsets, [name in runs_code for name in steps]))]
    return segments_at(steps, records, offsets, starts, total, runs_code, lazy_release)


def segments_at(
    steps: Sequence[str],
    records: Sequence[TensorUsageRecord],
    offsets: Mapping[str, int],
    starts: Sequence[int],
    total: int,
    runs_code: frozenset[str],
    lazy_release: bool,
) -> SlabLayout:
    """The segments of a slab of ``total`` bytes cut at ``starts`` (the first 0; no record of
    ``records``, all of some size, straddles one), each taken before its records' first step and
    given back after their last (see :func:`slab_layout`); a segment holding none is left out."""
    bounds = [*starts, total]
    segments = []
    for index, start in enumerate(starts):
        inside = [r for r in records if start <= offsets[r.id] < bounds[index + 1]]
        if not inside:
            continue
        take, release = steps[min(r.first for r in inside)], steps[max(r.last for r in inside)]
        size = bounds[index + 1] - start
        segments.append(
            SlabSegment(
                start,
                size,
                take_before=take if take in runs_code else None,
                release_after=release if release in runs_code else None,
                release=Release.LAZY if lazy_release and size >= LAZY_RELEASE_BYTES else Release.RESIZE,
            )
        )
    return SlabLayout(tuple(segments))
