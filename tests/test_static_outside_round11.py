"""What an eleventh round of models from outside the zoo broke (``benchmarks/outside_round11.py``:
gpytorch, botorch, normflows, zuko, torchmetrics, sentence-transformers, rotary-embedding-torch
and performer-pytorch models and hand-written patterns, run by ``benchmarks/outside_models.py``),
each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from test_static_outside_round6 import randn  # the sixth round's protocol
from torch import nn

from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule


class ZeroedDiagonal(nn.Module):
    """torchmetrics' ``pairwise_cosine_similarity(x, zero_diagonal=True)``: a product of two
    tensors computed in the model, its diagonal filled in place (``fill_diagonal_``, which
    ``decompose`` lowers to ``as_strided`` and ``as_strided_scatter`` at storage offset 0)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        distance = (x / x.norm(dim=1, keepdim=True)) @ x.clone().T
        distance.fill_diagonal_(0)
        return distance


class StridedRead(nn.Module):
    """``as_strided`` of a tensor the model computes, at an explicit storage offset (every other
    element of the second row on): the offset counts from the start of that tensor's storage."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = x.exp() + 1  # lives across ``y``: the slab places ``y`` past it
        y = (x * 2).tanh()
        read = torch.as_strided(y, (2, 2), (2, 1), 4) * scale[:2, :2]
        return read, torch.as_strided_scatter(y, x[0, :2] * 0, (2,), (5,), 1) / scale


@pytest.mark.parametrize(
    "options",
    [StaticOptions(decompose=True), StaticOptions(), StaticOptions(cleanup_activations=False)],
    ids=["decompose", "default", "no_cleanup"],
)
@pytest.mark.parametrize("model", [ZeroedDiagonal(), StridedRead()], ids=["fill_diagonal", "as_strided"])
def test_absolute_storage_offsets_count_from_the_tensor_the_model_computed(options, model):
    """``as_strided``, ``as_strided_scatter`` and ``as_strided_copy`` place their result at a
    storage offset counted from the start of their input's storage, not from the input's own
    offset. In eager a tensor the model computes starts its own storage; in the static runtime it
    lives in the slab, past other tensors, so the op read (and ``as_strided_scatter`` wrote)
    other elements: ``tm_pairwise_multiclass`` kept its diagonal under ``decompose``, silently.
    The offset is now counted from the input's own offset at every run (by what it was when
    captured); an input's storage is the caller's, as in eager, and keeps the absolute offset."""
    call = Inputs.of(randn(5, 6))
    runtime = StaticModule(model, call.clone(), options).runtime()
    for seed in (1, 2):
        x = randn(5, 6, seed=seed)
        torch.testing.assert_close(runtime(x), model(x))


def test_as_strided_of_an_input_keeps_its_absolute_offset():
    """An ``as_strided`` of an input reads the caller's storage where eager does, from its
    start: a view of a larger tensor passed in reads the elements before the view's own."""

    class OfInput(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.as_strided(x, (3,), (1,), 0) * 2

    model = OfInput()
    base = randn(16)
    runtime = StaticModule(model, Inputs.of(base[4:10]), StaticOptions()).runtime()
    torch.testing.assert_close(runtime(base[4:10]), model(base[4:10]))


def test_torchmetrics_pairwise_cosine_with_a_zero_diagonal_under_decompose():
    """The same on torchmetrics itself, as the round found it."""
    functional = pytest.importorskip("torchmetrics.functional", reason="the torchmetrics extra is not installed")

    class Pairwise(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return functional.pairwise_cosine_similarity(x, zero_diagonal=True)

    model = Pairwise()
    runtime = StaticModule(model, Inputs.of(randn(5, 6)), StaticOptions(decompose=True)).runtime()
    for seed in (1, 2):
        x = randn(5, 6, seed=seed)
        torch.testing.assert_close(runtime(x), model(x))


class CachedInBuffer(nn.Module):
    """rotary-embedding-torch's frequency cache: a buffer registered in ``__init__`` and written
    in place by a call longer than what it holds, the length it holds a plain attribute that
    later calls read (``cached_freqs``, ``cached_freqs_seq_len``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cached", torch.zeros(16), persistent=False)
        self.cached_length = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        if length <= self.cached_length:
            positions = self.cached[:length]
        else:
            positions = torch.arange(length, dtype=x.dtype).sin()
            self.cached[:length] = positions
            self.cached_length = length
        return x * 2 + positions


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["defaults", "decompose"])
def test_a_cache_a_first_call_fills_in_a_buffer_is_accepted(options):
    """The check for state a first call sets compared a later call with a first one after putting
    the buffers back as they were before the first call, but not the attributes: the later call
    read the length its first call cached and the zeros the check had put back in the cache, so
    every model using rotary-embedding-torch was refused ("the model's first call sets state that
    its later calls read: ... 'cached_freqs_seq_len' (0 before, 7 after)"), prepared fresh or
    called at a longer length. Both calls now start from the buffers as the first call left
    them (the program carries buffers from call to call as eager does)."""
    model, twin = CachedInBuffer(), CachedInBuffer()
    runtime = StaticModule(model, (randn(2, 3),), options).runtime()
    assert model.cached_length == 0 and not model.cached.any()
    for length, seed in ((3, 1), (5, 2), (3, 3)):
        x = randn(2, length, seed=seed)
        with torch.no_grad():
            torch.testing.assert_close(runtime(x), twin(x), rtol=0, atol=0)


def test_rotary_embedding_torch_is_prepared_fresh():
    """The same on rotary-embedding-torch itself, prepared before any eager call."""
    rotary = pytest.importorskip("rotary_embedding_torch", reason="the rotary-embedding-torch extra is not installed")

    class Rotated(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rotary = rotary.RotaryEmbedding(dim=8)

        def forward(self, q: torch.Tensor) -> torch.Tensor:
            return self.rotary.rotate_queries_or_keys(q)

    model, twin = Rotated(), Rotated()
    runtime = StaticModule(model, (randn(1, 2, 7, 16),), StaticOptions()).runtime()
    for length, seed in ((7, 1), (12, 2)):
        q = randn(1, 2, length, 16, seed=seed)
        torch.testing.assert_close(runtime(q), twin(q))
