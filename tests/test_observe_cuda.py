"""The estimate's model of PyTorch's CUDA caching allocator against the real one (needs a GPU).

A run that makes all its own tensors, from an emptied cache, is recorded by the allocator's own
history (``srbench.observe.cuda``) and replayed through ``CudaCachingAllocator``: the blocks and
segments it holds at its peak must be the real allocator's."""

from __future__ import annotations

import pytest
import torch

from srbench.estimate.allocators import CudaCachingAllocator

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here: the caching allocator model is checked on hand-computed sequences only "
    "(tests/test_estimate_allocators.py)",
)

MiB = 1024 * 1024


def _mixed_requests() -> list[torch.Tensor]:
    """Small and large requests, frees in between, a request that fits a merged hole."""
    kept = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (100, 600, 1 * MiB, 5 * MiB, 5 * MiB)]
    big = torch.empty(12 * MiB, dtype=torch.uint8, device="cuda")
    del kept[3], kept[3]  # the two 5 MiB blocks: neighbours in one 20 MiB segment
    kept.append(torch.empty(18 * MiB, dtype=torch.uint8, device="cuda"))
    del big
    kept.append(torch.empty(11 * MiB, dtype=torch.uint8, device="cuda"))
    return kept


def test_the_replayed_caching_allocator_holds_what_the_real_one_does():
    from srbench.observe.cuda import record_cuda

    real = record_cuda(_mixed_requests)
    assert real.events, "the allocator's history recorded the run"
    replayed = CudaCachingAllocator().replay(real.events)
    assert replayed.peak_allocated == real.peak_allocated
    assert replayed.peak_reserved == real.peak_reserved
    assert replayed.segments == real.segments_opened
