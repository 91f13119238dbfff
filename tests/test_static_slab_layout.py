"""With cleanup_activations the slab is held in segments, each taken right before its first writer
and given back right after its last reader, so memory the run allocates late does not stack on
slab bytes no tensor uses any more (srbench.static.slab_schedule)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.measure.memory import observe_allocations, page_faults_per_run
from srbench.memory.records import TensorUsageRecord, lower_bound
from srbench.static import StaticModule, StaticOptions, page_release
from srbench.static.mid_op_release import Cut, zoned_layout, zoned_plan
from srbench.static.slab_schedule import (
    LAZY_RELEASE_BYTES,
    MIN_CUT_BYTES,
    Release,
    SlabLayout,
    SlabSegment,
    slab_layout,
)

MIB = 1 << 20
STEPS = [f"n{i}" for i in range(8)]
EVERY_STEP = frozenset(STEPS)


def test_the_plan_is_cut_where_its_high_water_mark_falls_for_good():
    records = [
        TensorUsageRecord("a", 0, 2, 2 * MIB),
        TensorUsageRecord("b", 1, 3, 2 * MIB),
        TensorUsageRecord("c", 4, 6, 64),  # late and small, placed at 0: inside a's bytes
    ]
    offsets = {"a": 0, "b": 2 * MIB, "c": 0}
    layout = slab_layout(STEPS, records, offsets, 4 * MIB, EVERY_STEP)
    # c's end (64) lies inside a: the cut moves up to the next offset no record straddles
    assert layout.segments == (
        SlabSegment(0, 2 * MIB, take_before="n0", release_after="n6"),
        SlabSegment(2 * MIB, 2 * MIB, take_before="n1", release_after="n3"),
    )
    assert layout.locate(2 * MIB + 128) == (1, 128)
    assert layout.locate(64) == (0, 64)


def test_a_cut_that_gives_back_little_is_not_made_and_one_segment_is_taken_at_its_first_writer():
    records = [TensorUsageRecord("a", 2, 3, MIN_CUT_BYTES // 2), TensorUsageRecord("b", 4, 5, 64)]
    layout = slab_layout(STEPS, records, {"a": 0, "b": MIN_CUT_BYTES // 2}, MIN_CUT_BYTES // 2 + 64, EVERY_STEP)
    assert layout.segments == (SlabSegment(0, MIN_CUT_BYTES // 2 + 64, take_before="n2", release_after="n5"),)


def test_a_segment_whose_first_writer_runs_no_code_is_taken_at_the_start():
    records = [TensorUsageRecord("a", 2, 3, 64)]
    layout = slab_layout(STEPS, records, {"a": 0}, 64, frozenset({"n3"}))
    assert layout == SlabLayout((SlabSegment(0, 64, take_before=None, release_after="n3"),))


class Funnel(nn.Module):
    """Large intermediates first, then small ones, then a large output: a slab held whole until
    the last small read would sit under the output. (The output is smaller than the large
    intermediates, so they cannot be planned into its bytes instead: srbench.memory.hosting.)"""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.tanh(x)
        b = torch.sigmoid(x)
        c = a * b  # written over a (srbench.static.reuse); a and b die here
        s = c.sum(0)  # the default planner puts the small ones below b's bytes: a cut there
        t = torch.tanh(s) * s
        return torch.outer(t[:256], t)


@pytest.fixture
def funnel_input(one_thread) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(512, 1024)  # 2 MiB per intermediate


def test_segments_are_given_back_early_and_the_run_gives_eager_s_values(funnel_input):
    model = Funnel()
    module = StaticModule(model, (funnel_input,), StaticOptions())
    prepared = module.prepared
    assert prepared.program.slab is not None and len(prepared.program.slab.segments) >= 2
    runtime = module.runtime()
    for x in (funnel_input, torch.randn(512, 1024)):
        assert torch.equal(runtime(x), model(x))
    assert runtime.slab_bytes == 0
    output_bytes = 256 * 1024 * 4
    peak = observe_allocations(lambda: runtime(funnel_input)).peak_bytes
    # held whole until the last small read, the slab would sit under the output
    assert peak < prepared.slab_bytes + output_bytes
    assert peak <= max(prepared.slab_bytes, 2 * MIB + output_bytes) + 64 * 1024
    profile = runtime.profile((funnel_input,), iterations=3, warmup=1)
    assert profile.slab_alloc_ms >= 0 and profile.slab_free_ms >= 0


def test_a_slab_kept_between_runs_is_one_storage(funnel_input):
    module = StaticModule(Funnel(), (funnel_input,), StaticOptions(cleanup_activations=False))
    assert module.prepared.program.slab is None
    runtime = module.runtime()
    runtime(funnel_input)
    assert runtime.slab_bytes == module.prepared.slab_bytes


def test_a_segment_past_glibc_s_mmap_threshold_keeps_its_storage_and_gives_its_pages_back_lazily():
    records = [TensorUsageRecord("big", 0, 1, LAZY_RELEASE_BYTES), TensorUsageRecord("small", 0, 1, 64)]
    offsets = {"big": 0, "small": LAZY_RELEASE_BYTES}
    lazy = slab_layout(STEPS, records, offsets, LAZY_RELEASE_BYTES + 64, EVERY_STEP, lazy_release=True)
    assert [segment.release for segment in lazy.segments] == [Release.LAZY]
    eager_release = slab_layout(STEPS, records, offsets, LAZY_RELEASE_BYTES + 64, EVERY_STEP)
    assert [segment.release for segment in eager_release.segments] == [Release.RESIZE]


class Chain(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.tanh(x) * torch.sigmoid(x)).sum()


@pytest.mark.skipif(not page_release.supported(torch.device("cpu")), reason="madvise needs Linux")
def test_a_large_slab_runs_without_page_faults_and_is_reported_as_held(one_thread):
    x = torch.randn(LAZY_RELEASE_BYTES // 4)  # 32 MiB per intermediate
    module = StaticModule(Chain(), (x,), StaticOptions())
    runtime = module.runtime()
    assert torch.equal(runtime(x), Chain()(x))
    assert runtime.slab_bytes == module.prepared.slab_bytes  # kept: torch's allocator still counts it
    pages = module.prepared.slab_bytes // 4096
    assert page_faults_per_run(lambda: runtime(x), runs=3) < pages / 100  # resized to 0 and back: every page


# A fused encoder layer's allocations as recorded (torch 2.13, CPU, one thread; sequence 128,
# width 256): (allocated, freed, KiB) at sub-steps of its 25 events; its result at event 18.
ENCODER_SCRATCH = [
    (0, 2, 384),
    (1, 8, 384),
    (3, 4, 512),
    (5, 7, 128),
    (6, 14, 128),
    (9, 24, 128),
    (15, 17, 512),
    (16, 23, 128),
]


def _layers(count: int) -> list[TensorUsageRecord]:
    """Records of a chain of such layers on the intra-op timeline: each layer's scratch, then its
    result, alive until the next layer has run; the input of the first and the result of the last
    (the model's output) are not the slab's."""
    records = []
    for layer in range(count):
        base = 25 * layer
        records += [
            TensorUsageRecord(f"s{layer}_{index}", base + first, base + last, kib * 1024)
            for index, (first, last, kib) in enumerate(ENCODER_SCRATCH)
        ]
        if layer < count - 1:
            records.append(TensorUsageRecord(f"x{layer + 1}", base + 18, base + 49, 128 * 1024))
    return records


def test_a_zoned_plan_keeps_what_lives_at_the_cut_low_and_gives_the_rest_back_within_the_op():
    records = _layers(4)
    cut = Cut("n3", 3, allocation=10, substep=75 + 18)  # the last layer's output, after its scratch
    zoned = zoned_plan(records, cut, "greedy_by_size")
    assert zoned is not None
    plan = zoned.result.plan
    # no more than the records need at once (a layer's input and two of its scratch: eager's peak)
    assert plan.total_bytes == lower_bound(records) == 1024 * 1024
    for record in records:
        start, end = plan.offsets[record.id], plan.offsets[record.id] + record.size
        assert end <= zoned.low or start >= zoned.low  # within one segment
        if record.last >= cut.substep:
            assert end <= zoned.low
    # given back before the output (128 KiB) is allocated: the slab and the output within the peak
    assert zoned.low + 128 * 1024 <= plan.total_bytes
    steps = [f"n{index}" for index in range(4)]
    whole = [TensorUsageRecord(record.id, record.first // 25, record.last // 25, record.size) for record in records]
    layout = zoned_layout(steps, whole, zoned)
    low, high = layout.segments
    assert (low.start, low.size, high.start) == (0, zoned.low, zoned.low)
    assert (high.release_after, high.release_within) == ("n3", 10)
    assert low.release_within is None


def test_no_zoned_plan_where_nothing_dies_before_the_cut():
    records = [TensorUsageRecord("a", 0, 9, 1024), TensorUsageRecord("b", 2, 9, 2048)]
    assert zoned_plan(records, Cut("n0", 0, allocation=1, substep=5), "greedy_by_size") is None
