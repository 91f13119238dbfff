"""What a thirteenth round of models from outside the zoo broke (``benchmarks/outside_round13.py``:
julius, asteroid-filterbanks, nnAudio, lucidrains' single-module libraries, FrEIA and transformers
architectures no earlier round built, run by ``benchmarks/outside_models.py``), each as the
smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from test_static_outside_round6 import randn  # the sixth round's protocol
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule


class OverlapAdd(nn.Module):
    """An inverse transform's normalisation as nnAudio's ``STFT.inverse`` keeps it: at every call
    it remakes, for the length it is given, its window's sum of squares and where that is
    nonzero (``w_sum``, ``nonzero_indices``: plain tensor attributes), then divides by it there."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", torch.hann_window(4, periodic=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames = self.window.square().repeat(x.shape[-1] // 4 + 1)[: x.shape[-1]]
        self.w_sum = frames
        self.nonzero_indices = self.w_sum > 1e-10
        out = x.clone()
        out[:, self.nonzero_indices] = out[:, self.nonzero_indices] / self.w_sum[self.nonzero_indices]
        return out


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["defaults", "decompose"])
def test_a_tensor_remade_at_every_call_from_the_shapes_is_not_state(options):
    """A tensor attribute each call remakes before reading it, from the shapes and the module's
    own tensors, was refused as state carried from call to call ("carries state from call to
    call in its attribute 'nonzero_indices'": tensors are compared by identity, and each call
    makes a new one), so every model calling nnAudio's inverse STFT was refused. It is accepted
    now, with eager's numbers at other lengths."""
    model = OverlapAdd()
    runtime = StaticModule(model, Inputs.of(randn(2, 9)), options).runtime()
    for batch, length, seed in ((2, 9, 1), (3, 14, 2), (2, 9, 3)):
        x = randn(batch, length, seed=seed)
        torch.testing.assert_close(runtime(x), model(x))


class Stash(nn.Module):
    """Keeps its last input (never read): a tensor holding the data, remade at every call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last = x.clone()
        return x * 2


class TensorCounter(nn.Module):
    """Counts its calls in a tensor attribute it reads (``self.steps + 1``) and never uses."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps = self.steps + 1
        return x * 2


class ReadBeforeRemade(nn.Module):
    """Remakes a tensor alike at every call from the shape (equal at every call, on any
    inputs), but reads the one the last call made first: its first call scales by one, every
    later call by two."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        previous = getattr(self, "scale", torch.ones(x.shape[-1]))
        self.scale = torch.full((x.shape[-1],), 2.0)
        return x * previous


@pytest.mark.parametrize(
    ("model_class", "attribute"), [(Stash, "'last'"), (TensorCounter, "'steps'")], ids=["stash", "counter"]
)
def test_a_tensor_holding_the_data_or_a_count_is_still_state(model_class, attribute):
    """Only a tensor remade alike from the shapes is exempt: one holding the call's data (which a
    call on other inputs leaves otherwise) or one a call derives from its previous value (a
    count: filled with NaN, the next value is NaN) is state as before, read or not."""
    with pytest.raises(CaptureError, match=attribute):
        StaticModule(model_class(), Inputs.of(randn(2, 5)), StaticOptions())


def test_a_tensor_remade_alike_but_read_before_is_still_state():
    """Remade alike is not enough: a tensor the call reads before remaking it carries the last
    call's value into this one (filled with NaN, it changes the answer), and is refused as
    state carried from call to call (the first-call check, after it, would refuse it too)."""
    with pytest.raises(CaptureError, match="carries state from call to call in its attribute 'scale'"):
        StaticModule(ReadBeforeRemade(), Inputs.of(randn(2, 5)), StaticOptions())


def test_nnaudios_inverse_stft_is_prepared():
    """The same on nnAudio itself, as the round found it: an STFT and its inverse."""
    features = pytest.importorskip("nnAudio.features", reason="the nnaudio extra is not installed")

    class RoundTrip(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stft = features.STFT(n_fft=32, hop_length=8, iSTFT=True, output_format="Complex", verbose=False)

        def forward(self, wave: torch.Tensor) -> torch.Tensor:
            return self.stft.inverse(self.stft(wave), length=wave.shape[-1])

    model = RoundTrip().eval()
    runtime = StaticModule(model, Inputs.of(randn(1, 128)), StaticOptions()).runtime()
    for batch, length, seed in ((1, 128, 1), (3, 200, 2)):
        wave = randn(batch, length, seed=seed)
        torch.testing.assert_close(runtime(wave), model(wave), rtol=1e-4, atol=1e-4)
