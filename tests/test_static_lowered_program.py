"""Refusals under ``decompose`` that say when torch's own lowered program fails too
(:mod:`srbench.graph.lowered_program`): the user then knows the fault is torch's lowering to
core ATen, and that preparing without ``decompose`` avoids it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import srbench.static.prepared as prepared
from srbench.graph.lowered_program import lowered_program_failure
from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions, UnsupportedOpError


class AttentionThenGroupNorm(nn.Module):
    """diffusers' VAE mid-block in small: attention over the pixels, back to an image, group norm.
    At batch 1 the real ``reshape`` after attention strides the batch dimension otherwise than its
    fake result; the lowering of ``group_norm`` drops the ``contiguous`` those fake strides made
    look needless, and ``native_group_norm``'s CPU kernel refuses the tensor."""

    def __init__(self, channels: int = 32) -> None:
        super().__init__()
        self.q, self.k, self.v, self.out = (nn.Linear(channels, channels) for _ in range(4))
        self.norm = nn.GroupNorm(8, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        pixels = x.view(b, c, h * w).transpose(1, 2)
        q, k, v = (p(pixels).view(b, -1, 1, c).transpose(1, 2) for p in (self.q, self.k, self.v))
        attended = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, -1, c)
        image = self.out(attended).transpose(-1, -2).reshape(b, c, h, w)
        return self.norm(image + x)


def images(batch: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 32, 8, 8, generator=torch.Generator().manual_seed(batch)),)


@pytest.fixture
def model(one_thread: None) -> nn.Module:
    torch.manual_seed(0)
    return AttentionThenGroupNorm().eval()


def test_the_refusal_says_that_torchs_lowered_program_fails_too(model):
    """Refused where torch's lowered program fails (torch 2.13); where torch's lowering keeps the
    ``contiguous`` and its program runs (torch 2.14), srbench runs the model as eager does."""
    x = images(1)
    try:
        module = StaticModule(model, x, StaticOptions(decompose=True))
    except UnsupportedOpError as refusal:
        message = str(refusal)
    else:
        assert lowered_program_failure(model, Inputs.coerce(x), name="model") is None
        with torch.no_grad():
            torch.testing.assert_close(module.runtime()(*x), model(*x))
        return
    assert message.startswith("op aten::native_group_norm (node 'native_group_norm') can run neither")
    assert "Expected X.is_contiguous(memory_format)" in message
    assert message.endswith(
        "; torch's own lowered program (ExportedProgram.run_decompositions(), run by torch as .module()) fails on "
        "these inputs too, with the same error: torch's lowering to core ATen (decompose=True) breaks the model; "
        "it can be prepared without decompose"
    )


def test_without_decompose_or_at_another_batch_the_model_runs_as_eager(model):
    for options, batch in ((StaticOptions(), 1), (StaticOptions(decompose=True), 3)):
        x = images(batch)
        with torch.no_grad():
            expected = model(*x)
        torch.testing.assert_close(StaticModule(model, x, options).runtime()(*x), expected)


def test_the_check_leaves_the_models_state_and_the_inputs_alone():
    """A buffer the program writes in place, an input it writes: the check runs on copies."""

    class Counts(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return x.add_(self.calls)

    counts, x = Counts(), torch.zeros(3)
    assert lowered_program_failure(counts, Inputs.coerce((x,)), name="counts") is None
    assert counts.calls.item() == 0 and x.eq(0).all()


def test_a_refusal_where_torchs_lowered_program_runs_says_nothing_of_it(model, monkeypatch):
    """srbench's own fault (planted: every op refused) is not blamed on torch's lowering."""

    def refuse(graph, *args, **kwargs):
        raise UnsupportedOpError("aten::planted", "node", "planted")

    monkeypatch.setattr(prepared, "resolve", refuse)
    with pytest.raises(UnsupportedOpError, match=r"as fallback: planted$"):
        StaticModule(model, images(3), StaticOptions(decompose=True))
