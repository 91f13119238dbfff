"""What a fourth round of models from outside the zoo broke (``benchmarks/outside_models.py``'s
``_fourth_round``), each as the smallest model that shows it."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from srbench.options import StaticOptions
from srbench.static import StaticModule


class BufferViewingABuffer(nn.Module):
    """Two buffers on one storage (``part`` registered as a slice of ``full``): forward writes
    one and reads the other."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("full", torch.zeros(8))
        self.register_buffer("part", self.full[:4])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.full.add_(1.0)
        return x * self.part.exp().sum(), self.part * 2


@pytest.mark.parametrize(
    "options",
    [StaticOptions(), StaticOptions(enable_out_variant=False), StaticOptions(decompose=True), StaticOptions(streams=2)],
)
def test_a_buffer_written_through_another_that_shares_its_storage(options):
    """The graph names each buffer apart; only ``full`` was counted written, so ``exp(part)``
    and ``sum`` read only a constant and were computed once at prepare time: every call gave
    the first call's numbers while eager's grew. A placeholder sharing memory with a written
    one counts as written now. torch's own decomposition of such a program fails: ``decompose``
    is not applied to it then (as to inputs that share memory), where preparing failed."""
    model, eager = BufferViewingABuffer(), BufferViewingABuffer()
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    runtime = StaticModule(model, (copy.deepcopy(x),), options).runtime()
    for _ in range(3):
        expected, got = eager(x), runtime(x)
        torch.testing.assert_close(got, expected)
    torch.testing.assert_close(model.full, eager.full)


class WritesItsInput(nn.Module):
    """Writes its input in place and reads its own buffer: called with that buffer as the input."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1.0)
        return self.state.exp() * 2


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True), StaticOptions(streams=2)])
def test_an_input_that_is_the_models_own_buffer(options):
    """An input sharing memory with a buffer is the same case across the signature: the buffer's
    reads were computed once at prepare time while the program wrote the input (the first
    call's numbers at every call), and ``decompose`` failed in torch's lowering."""
    model, eager = WritesItsInput(), WritesItsInput()
    runtime = StaticModule(model, (model.state,), options).runtime()
    for _ in range(3):
        torch.testing.assert_close(runtime(model.state), eager(eager.state))
    torch.testing.assert_close(model.state, eager.state)


class GradBlocks(nn.Module):
    """A ``no_grad`` block, then an ``enable_grad`` block, in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            y = self.linear(x)
        with torch.enable_grad():
            return y * self.linear(x).sigmoid()


def test_an_enable_grad_block_in_forward(conformance, static_options):
    """srbench exports under ``no_grad``: the ``enable_grad`` block becomes a
    ``wrap_with_set_grad_enabled(True, ...)`` sub-module, which torch's lowering to core ATen
    fails on ('list index out of range'), and ``decompose`` failed to prepare. Lowered from an
    export with gradients enabled (the block then inline), its result lost its history; such a
    model is not lowered now (``srbench.graph.capture._kept_unlowered``)."""
    first = (torch.randn(2, 8, generator=torch.Generator().manual_seed(0)),)
    conformance(GradBlocks(), first, (torch.randn(3, 8, generator=torch.Generator().manual_seed(1)),), static_options)
