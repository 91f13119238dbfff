"""The observer and the estimate on a real CUDA device (needs a GPU).

The observer attributes each CUDA allocation to its node with the caching allocator's block and
the bytes requested (its history, :mod:`srbench.observe.cuda`), and the estimate on fake CUDA
tensors says the same. A run that makes all its own tensors, from an emptied cache, is recorded
by the allocator's history and replayed through ``CudaCachingAllocator``: the blocks and segments
it holds at its peak must be the real allocator's."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from srbench.cli import main
from srbench.estimate import estimate_model
from srbench.estimate.allocators import CudaCachingAllocator
from srbench.graph import capture
from srbench.observe import observe_eager

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device here: the observer's CUDA path and the caching allocator model are checked on "
    "hand-written traces and hand-computed sequences only (tests/test_observe.py, tests/test_estimate_allocators.py)",
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


class Elementwise(nn.Module):
    """Allocations of known sizes and no library workspace: 4,000 bytes at ``mul`` (a 4,096-byte
    block), 1,200 at ``ones`` (1,536), 4 at each sum (512)."""

    def forward(self, x):
        a = x * x
        b = torch.ones(300, device=x.device)
        return a.sum() + b.sum()


def test_each_cuda_allocation_is_attributed_with_its_block_and_request():
    inputs = (torch.randn(1000, device="cuda"),)
    observed = observe_eager(capture(Elementwise().cuda(), inputs, name="elementwise"), inputs, device="cuda")
    mul, ones = observed.node("mul"), observed.node("ones")
    assert (mul.allocations, mul.allocated_bytes, mul.requested_bytes) == (1, 4096, 4000)
    assert (ones.allocations, ones.allocated_bytes, ones.requested_bytes) == (1, 1536, 1200)
    assert observed.reserved_bytes == 0  # after the warm-up the cache serves every request
    estimate = estimate_model(Elementwise, lambda: (torch.randn(1000),), name="elementwise", device="cuda")
    for name in ("mul", "ones"):
        node = estimate.node(name)
        assert (node.output.nbytes, node.block_bytes) == (
            observed.node(name).requested_bytes,
            observed.node(name).allocated_bytes,
        )
    assert estimate.eager.peak_allocated == observed.peak_bytes  # mul's block freed after sum_1: frees are seen


def test_cli_observes_both_runtimes_on_cuda(tmp_path, capsys):
    picture = tmp_path / "mlp.png"
    argv = ["observe", "--model", "mlp", "--device", "cuda", "--json", "--picture", str(picture)]
    assert main([*argv, "--no-cleanup-activations"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "cuda" and data["eager"]["device"].startswith("cuda")
    first = data["nodes"][0]
    assert first["eager"]["output_bytes"] == first["estimated_output"]  # blocks, estimated and observed
    assert first["eager"]["requested_bytes"] <= first["eager"]["allocated_bytes"]
    assert picture.read_bytes().startswith(b"\x89PNG")
