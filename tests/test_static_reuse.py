"""Elementwise ops write their result over an input no later op reads (srbench.static.reuse):
one slab record instead of two, and eager's values bit for bit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions
from srbench.static.choose import RunAs
from srbench.static.out_variants import OutVariantRegistry


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(32, 128)
        self.down = nn.Linear(128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.up(x))  # the projection dies at the GELU
        return self.down(h) + x


class KeepsItsInput(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.tanh(x * 2)
        b = torch.sigmoid(a)  # a is read again below: b needs room of its own
        return (a * b).sum(0)


@pytest.fixture
def x(one_thread) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(64, 32)


def storage_of(module: StaticModule, kind: str) -> tuple[RunAs, tuple[str | None, ...]]:
    plan = next(plan for plan in module.prepared.plans if plan.kind == kind)
    return plan.how, plan.result_storages


def test_gelu_writes_over_the_projection_it_reads_and_the_slab_shrinks(x):
    model = FeedForward().eval()
    module = StaticModule(model, (x,), StaticOptions())
    linear_how, linear_storage = storage_of(module, "aten::linear")
    assert storage_of(module, "aten::gelu") == (RunAs.OUT, linear_storage) and linear_how is RunAs.OUT
    runtime = module.runtime()
    for inputs in ((x,), (torch.randn(64, 32),)):
        with torch.inference_mode():
            assert torch.equal(runtime(*inputs), model(*inputs))
    projection = 64 * 128 * 4
    assert module.prepared.slab_bytes < projection * 2  # the GELU's result needs no room of its own
    assert module.prepared.managed_share == 1.0


def test_an_input_read_later_is_not_written_over(x):
    module = StaticModule(KeepsItsInput(), (x,), StaticOptions())
    tanh_storage = storage_of(module, "aten::tanh")[1]
    assert storage_of(module, "aten::sigmoid")[1] != tanh_storage
    assert torch.equal(module.runtime()(x), KeepsItsInput()(x))


def test_a_registered_out_variant_never_writes_over_its_input(x):
    registry = OutVariantRegistry()
    registry.register("aten::gelu", lambda a, approximate="none", *, out: torch._C._nn.gelu(a, out=out))
    model = FeedForward().eval()
    module = StaticModule(model, (x,), StaticOptions(), out_variants=registry)
    assert storage_of(module, "aten::gelu")[1] != storage_of(module, "aten::linear")[1]
    with torch.inference_mode():
        assert torch.equal(module.runtime()(x), model(x))


class ViewsTheResult(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(32, 64)
        self.down = nn.Linear(64, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.up(x))  # written over the projection
        return self.down(h.unsqueeze(0)).sum(0)


def test_views_of_a_result_written_over_its_input_are_made_once(x):
    """The result lives in its input's slab tensor, fixed per runtime as the input's is: a view of
    it (DLRM's ``unsqueeze`` of its bottom MLP) is made once, not at every run."""
    model = ViewsTheResult().eval()
    module = StaticModule(model, (x,), StaticOptions())
    assert storage_of(module, "aten::relu") == (RunAs.OUT, storage_of(module, "aten::linear")[1])
    assert next(plan for plan in module.prepared.plans if plan.kind == "aten::unsqueeze").static
    runtime = module.runtime()
    for inputs in ((x,), (torch.randn(64, 32),)):
        with torch.inference_mode():
            assert torch.equal(runtime(*inputs), model(*inputs))
