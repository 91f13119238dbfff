"""The twenty-sixth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
hand-written models aimed at answers a static runtime could get wrong without a word (a slab of
memory planned once, buffers reused across calls, ``out=`` variants, a guard on each call's
signature): inputs the caller lays out otherwise at its second call (transposed, sliced, a
stride-0 ``expand``, channels_last), read, viewed and written by the model; one tensor passed as
two arguments, one of them written; outputs that are views of parameters and buffers; a Python
branch on ``is_contiguous()`` and ``stride()``; ``where``/``masked_fill`` with broadcast scalars;
complex values (``fft``, ``view_as_real`` written); cumulative ops over an empty dim.

Kept apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders
import torch when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round22 import _rows


def twenty_sixth_round() -> list[OutsideModel]:
    """The twenty-sixth round's models, group by group."""
    return _layout_models() + _alias_models() + _value_models()


def _layout_models() -> list[OutsideModel]:
    """Inputs laid out one way at the first call and another at the second, and a branch on it."""
    import torch
    from torch import nn

    class Strided(nn.Module):
        """Reads, views and writes what the caller passes: a reshape and a transpose of ``x``, a
        clone of a stride-0 ``bias`` written in its first column, ``x`` itself scaled in place."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x) + bias
            own = bias.clone()
            own[..., 0] = h[..., 0]
            flat = x.reshape(-1, 16)
            x.mul_(0.5)
            return h, own, flat, x.transpose(1, 2), x.sum(1)

    def contiguous_then_strided(shape: int) -> Any:
        """Contiguous at the first call; at the second ``x`` is a transposed copy seen back in
        (B, L, 16) order and ``bias`` a (16,) row expanded with strides 0."""
        batch, length = (1, 3)[shape], (5, 7)[shape]
        if shape == 0:
            return _call(_randn(shape, batch, length, 16), _randn(shape + 5, batch, length, 16))
        x = _randn(shape, 16, length, batch).permute(2, 1, 0)
        return _call(x, _randn(shape + 5, 16).expand(batch, length, 16))

    def strided_then_sliced(shape: int) -> Any:
        """Transposed-then-expanded at the first call, a slice of a wider buffer at the second."""
        batch, length = (1, 3)[shape], (5, 7)[shape]
        if shape == 0:
            x = _randn(shape, batch, 16, length).transpose(1, 2)
            return _call(x, _randn(shape + 5, 1, 1, 16).expand(batch, length, 16))
        x = _randn(shape, batch, length, 40)[..., 8:24]
        return _call(x, _randn(shape + 5, batch, length, 32)[..., ::2])

    class Channels(nn.Module):
        """A convolution of the caller's image, which the model then writes in place (``clamp_``)
        and returns flattened (a view in channels-first, a copy in channels_last)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.conv(x)
            x.clamp_(-0.5, 0.5)
            return h, x, x.flatten(2), h.mean((2, 3))

    def channels_last_second(shape: int) -> Any:
        image = _randn(shape, (1, 2)[shape], 3, (6, 5)[shape], (6, 7)[shape])
        return _call(image if shape == 0 else image.contiguous(memory_format=torch.channels_last))

    class Branching(nn.Module):
        """Python branches on the layout: ``is_contiguous()`` picks one scale, ``stride(-1)``
        another, and the channels_last test a third (as code picking a fast path does)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            scale = 2.0 if x.is_contiguous() else 3.0
            step = float(x.stride(-1))
            h = self.proj(x.contiguous()) * scale + step
            return h, torch.tensor(x.stride()), torch.tensor(float(x.is_contiguous()))

    def contiguous_then_transposed(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 7)[shape]
        if shape == 0:
            return _call(_randn(shape, batch, length, 16))
        return _call(_randn(shape, batch, 16, length).transpose(1, 2))

    return [
        OutsideModel("inputs_strided_second_call", "hand-written: contiguous inputs at the first call, a permuted "
                     "x and a stride-0 expanded bias at the second; x reshaped, transposed, written by mul_",
                     Strided, contiguous_then_strided, **_TOLERANCE),
        OutsideModel("inputs_expanded_then_sliced", "hand-written: the same model, a transposed x and an expanded "
                     "bias first, slices of wider buffers (a step-2 bias) second", Strided, strided_then_sliced,
                     **_TOLERANCE),
        OutsideModel("channels_last_input_written", "hand-written: the caller's image convolved, clamp_ in place "
                     "and flattened out; contiguous at the first call, channels_last at the second", Channels,
                     channels_last_second, **_TOLERANCE),
        OutsideModel("branch_on_is_contiguous_stride", "hand-written: Python branches on is_contiguous() and "
                     "stride(-1), strides out as a tensor; contiguous first, transposed second", Branching,
                     contiguous_then_transposed, **_TOLERANCE),
    ]  # fmt: skip


def _alias_models() -> list[OutsideModel]:
    """One tensor as two arguments, outputs that are views of the model's own tensors."""
    import torch
    from torch import nn

    class WritesFirst(nn.Module):
        """Writes ``a`` in place, then reads ``b``: where the caller passes one tensor as both,
        ``b`` has changed by the time it is read."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            a.add_(1.0)
            h = self.proj(b)
            a.mul_(torch.sigmoid(h))
            return h, b * 2, a

    def same_twice(shape: int) -> Any:
        x = _rows(shape).args[0]
        return _call(x, x)

    def distinct_then_same(shape: int) -> Any:
        x = _rows(shape).args[0]
        return _call(x, x) if shape == 1 else _call(x, x.clone())

    class OwnViews(nn.Module):
        """Outputs that are the model's own tensors or views of them: the weight, its transpose, a
        row of a buffer, a parameter reshaped, beside a computed output."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 8)
            self.register_buffer("table", torch.arange(32.0).reshape(4, 8))

        table: torch.Tensor

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x) + self.table[1]
            return h, self.proj.weight, self.proj.weight.t(), self.table[2], self.proj.bias.view(2, 4), self.table

    return [
        OutsideModel("same_tensor_two_arguments", "hand-written: one tensor passed as both arguments, the first "
                     "written by add_ and mul_ before and after the second is read", WritesFirst, same_twice,
                     **_TOLERANCE),
        OutsideModel("distinct_then_same_argument", "hand-written: the same model called with two tensors, then "
                     "one tensor as both", WritesFirst, distinct_then_same, **_TOLERANCE),
        OutsideModel("parameter_buffer_views_out", "hand-written: the weight, its transpose, a buffer's row, the "
                     "bias reshaped and the buffer itself out", OwnViews, _rows, **_TOLERANCE),
    ]  # fmt: skip


def _value_models() -> list[OutsideModel]:
    """Scalars broadcast by ``where``, complex values written through real views, empty cumulations."""
    import torch
    from torch import nn

    class Selected(nn.Module):
        """``where`` with a scalar on either side and both sides, a broadcast (B, 1, 16) mask,
        ``masked_fill`` with a float and a 0-dim tensor value, ``masked_fill_`` of an intermediate."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            mask = h > 0
            row = (h.mean(1, keepdim=True) > 0).expand_as(h)
            fill = h.amax() * 0.5
            g = h * 1.5
            g.masked_fill_(~mask, -1.0)
            return (torch.where(mask, h, 0.0), torch.where(mask, -2.0, h), torch.where(row, 1.0, -1.0),
                    h.masked_fill(row, float("-inf")).softmax(-1), h.masked_fill(mask, fill), g)  # fmt: skip

    class Spectral(nn.Module):
        """An ``rfft`` of a projection, its real view written (the DC bin's imaginary part zeroed,
        the real parts scaled), back through ``irfft``; the complex spectrum and ``abs`` out too."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            spectrum = torch.fft.rfft(self.proj(x), dim=-1)
            real = torch.view_as_real(spectrum)
            real[..., 0, 1] = 0.0
            real[..., 0].mul_(0.5)
            back = torch.fft.irfft(spectrum, n=16, dim=-1)
            return back, spectrum, spectrum.abs(), torch.view_as_real(spectrum * 1j)

    class Cumulative(nn.Module):
        """``cumsum``, ``cumprod``, ``cummax`` (values and indices), ``logcumsumexp`` over the
        length, which is 0 at one of the calls."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = torch.tanh(self.proj(x))
            high, where = torch.cummax(h, dim=1)
            return torch.cumsum(h, 1), torch.cumprod(h, 1), high, where, torch.logcumsumexp(h, 1)

    def full_then_empty(shape: int) -> Any:
        return _call(_randn(shape, (2, 3)[shape], (6, 0)[shape], 16))

    return [
        OutsideModel("where_masked_fill_scalars", "hand-written: where with scalar branches, a broadcast mask, "
                     "masked_fill by a float, -inf and a 0-dim tensor, masked_fill_", Selected, _rows, **_TOLERANCE),
        OutsideModel("rfft_view_as_real_written", "hand-written: rfft, its view_as_real written in place, irfft; "
                     "complex spectrum and view_as_real out", Spectral, _rows, **_TOLERANCE),
        OutsideModel("cumulative_over_empty_dim", "hand-written: cumsum, cumprod, cummax, logcumsumexp over a "
                     "length 6, then 0", Cumulative, full_then_empty, **_TOLERANCE),
    ]  # fmt: skip
