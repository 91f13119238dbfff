"""The allocator models of ``srbench.estimate``: the CUDA caching allocator's rules on sequences
computed by hand from ``c10/cuda/CUDACachingAllocator.cpp``, and the CPU allocator's plain sums."""

from __future__ import annotations

import pytest

from srbench.estimate.allocators import (
    Action,
    CpuAllocator,
    CudaCachingAllocator,
    EventError,
    MemoryEvent,
    MiB,
    allocator_for,
    round_size,
    segment_size,
)


def run(*script: tuple[str, int] | str, model=None):
    """Replay ``("a", 100)`` (allocate storage "a" of 100 bytes) and ``"a"`` (free it), one step each."""
    events = []
    for step, item in enumerate(script):
        if isinstance(item, tuple):
            events.append(MemoryEvent(step, item[0], Action.ALLOCATE, item[1]))
        else:
            events.append(MemoryEvent(step, item, Action.FREE))
    return (model or CudaCachingAllocator()).replay(events, steps=len(script))


def test_requests_round_up_to_512_bytes():
    assert [round_size(n) for n in (1, 512, 513, 1000, 1024)] == [512, 512, 1024, 1024, 1024]


def test_segment_sizes_follow_the_pools():
    assert segment_size(512) == 2 * MiB  # small pool: 2 MiB buffers
    assert segment_size(1 * MiB) == 2 * MiB  # kSmallSize is still small
    assert segment_size(1 * MiB + 512) == 20 * MiB  # large, under 10 MiB: a 20 MiB buffer
    assert segment_size(10 * MiB) == 10 * MiB  # from 10 MiB: the request rounded to 2 MiB
    assert segment_size(13 * MiB + 512) == 14 * MiB


def test_small_requests_share_one_segment():
    stats = run(("a", 100), ("b", 600), ("c", 1 * MiB - 2048))
    assert stats.peak_requested == 100 + 600 + 1 * MiB - 2048
    assert stats.peak_allocated == 512 + 1024 + 1 * MiB - 2048
    assert stats.peak_reserved == 2 * MiB and stats.segments == 1


def test_large_requests_split_a_20_mib_segment_and_reuse_the_rest():
    stats = run(("a", 5 * MiB), ("b", 5 * MiB), ("c", 5 * MiB), ("d", 5 * MiB), ("e", 5 * MiB))
    # a, b and c fit the first 20 MiB segment (each split leaves more than 1 MiB); d takes the last
    # 5 MiB whole (nothing would remain); e needs a second segment
    assert stats.peak_allocated == 25 * MiB
    assert stats.peak_reserved == 40 * MiB and stats.segments == 2


def test_a_large_block_is_not_split_when_at_most_1_mib_would_remain():
    stats = run(("a", 1 * MiB + 512 * 1024), ("b", 18 * MiB))
    # a opens a 20 MiB segment and leaves 18.5 MiB; b takes that block whole (0.5 MiB is not > 1 MiB)
    assert stats.peak_allocated == 20 * MiB
    assert stats.peak_reserved == 20 * MiB


def test_freed_neighbours_merge_so_a_larger_request_fits_the_cached_segment():
    stats = run(("a", 5 * MiB), ("b", 5 * MiB), "a", "b", ("c", 18 * MiB))
    assert stats.segments == 1 and stats.peak_reserved == 20 * MiB
    unmerged = run(("a", 5 * MiB), ("x", 5 * MiB), ("b", 5 * MiB), "a", "b", ("c", 18 * MiB))
    assert unmerged.segments == 2  # x still holds the middle: no 18 MiB hole in the first segment


def test_best_fit_takes_the_smallest_cached_block_that_is_large_enough():
    stats = run(("big", 16 * MiB), ("small", 12 * MiB), "big", "small", ("c", 11 * MiB))
    # 16 MiB and 12 MiB segments are cached; 11 MiB goes to the 12 MiB one (not split: 1 MiB left)
    assert stats.segments == 2
    assert stats.step_peaks[-1] == 12 * MiB


def test_zero_bytes_take_no_block_and_segments_are_never_returned():
    stats = run(("empty", 0), ("a", 30 * MiB), "a", "empty")
    assert stats.peak_allocated == 30 * MiB and stats.peak_reserved == 30 * MiB
    assert stats.step_peaks == (0, 30 * MiB, 0, 0)


def test_cpu_allocator_holds_exactly_what_is_requested():
    stats = run(("a", 100), ("b", 600), "a", ("c", 50), model=CpuAllocator())
    assert stats.peak_requested == stats.peak_allocated == stats.peak_reserved == 700
    assert stats.step_peaks == (100, 700, 600, 650)


@pytest.mark.parametrize("model", [CpuAllocator(), CudaCachingAllocator()])
def test_impossible_sequences_are_refused(model):
    with pytest.raises(EventError, match="'a' allocated twice"):
        run(("a", 1), ("a", 1), model=model)
    with pytest.raises(EventError, match="'b' freed but not allocated"):
        run("b", model=model)


def test_allocator_for_names_the_devices_it_knows():
    assert isinstance(allocator_for("cuda:1"), CudaCachingAllocator)
    assert isinstance(allocator_for("cpu"), CpuAllocator)
    with pytest.raises(ValueError, match="no allocator model for device 'mps'"):
        allocator_for("mps")
