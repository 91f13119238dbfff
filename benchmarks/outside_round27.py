"""The twenty-seventh round of models from outside the zoo (``benchmarks/outside_models.py`` runs
them): hand-written models aimed at answers a static runtime could get wrong without a word (a
slab of memory planned once, buffers reused across calls, ``out=`` variants, constants lifted at
capture): tensors made by ``torch.tensor`` in ``forward`` and written there; ``as_strided`` of a
view whose own offset is not 0, with and without an offset of its own; conversions that are no-ops
(``float()``, ``to(dtype)``, ``contiguous()``) written in place, which writes the caller's
tensor; two overlapping slices of one buffer as two arguments, one written; ``chunk``, ``split``
and ``unbind`` pieces written in place and returned; an eight-dim permute and reshape chain; a
batch of 0 at the second call; ``narrow`` from a 0-dim tensor start; float16 reductions near
overflow; random ops whose values are fixed (``dropout`` with p 0 and 1 in training,
``bernoulli`` of 0 and 1); autocast outputs accumulated in place into float32; ``vmap`` over dim
1 with ``chunk_size``; a parametrization that changes the weight's shape.

Kept apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders
import torch when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round22 import _rows


def twenty_seventh_round() -> list[OutsideModel]:
    """The twenty-seventh round's models, group by group."""
    return _memory_models() + _shape_models() + _value_models()


def _memory_models() -> list[OutsideModel]:
    """Constants written, offsets of views, no-op conversions written, pieces written in place."""
    import torch
    from torch import nn

    class Constants(nn.Module):
        """Tensors made from Python lists in ``forward`` (export lifts them as constants), then
        written in place there: in eager each call starts from the list's values again."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            counts = torch.tensor([0.0, 1.0, 2.0, 3.0])
            counts.add_(h.mean())
            counts.index_add_(0, torch.tensor([0, 2, 2, 1]), h[0, 0, :4])
            table = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
            table[0, 1] = h.amax()
            ids = torch.tensor([3, 1, 2])
            return h + counts.sum(), counts, table, ids, h[..., ids]

    class Offsets(nn.Module):
        """``as_strided`` of an intermediate's row slice, whose own storage offset is 16: without
        an offset (the slice's own is kept: overlapping windows from it), with an absolute offset
        before the slice's start (row 0's elements), and of the intermediate itself."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x).flatten(0, 1).contiguous()
            tail = h[1:]
            windows = tail.as_strided((tail.shape[0] - 1, 4, 8), (16, 4, 1))
            before = tail.as_strided((4, 8), (2, 1), 3)
            inside = h.as_strided((3, 8), (4, 1), 5)
            return windows.sum(-1), windows, before * 2.0, inside, torch.as_strided(tail, (2, 2), (1, 1))

    class NoOps(nn.Module):
        """``float()`` and ``to(float32)`` of a float32 tensor return the tensor itself, and so does
        ``contiguous()`` of a contiguous one: written in place, they write the caller's tensor (a
        batch-transposed caller's ``contiguous()`` is a copy, and writing it leaves the caller's alone)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = x.float()
            y.mul_(2.0)
            z = x.to(torch.float32).add_(1.0)
            c = x.contiguous()
            c.sub_(0.25)
            h = self.proj(x)
            return h, y, z, c, x.reshape(-1), x.type_as(h)

    def batch_transposed_second(shape: int) -> Any:
        """Contiguous at the first call; at the second a (L, B, 16) tensor seen batch first."""
        batch, length = (1, 3)[shape], (5, 7)[shape]
        x = _randn(shape, length, batch, 16)
        return _call(x.transpose(0, 1) if shape else x.transpose(0, 1).contiguous())

    class Pieces(nn.Module):
        """``chunk``, ``split`` and ``unbind`` pieces of one intermediate written in place after
        they were taken, and returned with the intermediate they view."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            left, right = h.chunk(2, dim=-1)
            left.mul_(2.0)
            head, rest = h.split([3, 13], dim=-1)
            rest.relu_()
            rows = h.unbind(1)
            rows[0].zero_()
            right.add_(left)
            return h, left, right, head, rows[0], rows[-1], torch.stack(rows[1:], 1).sum(1)

    class Overlapping(nn.Module):
        """Writes ``a`` in place, then reads ``b``, then writes ``a`` again: where the caller passes
        two slices of one buffer that overlap, ``b`` has partly changed by the time it is read."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            a.add_(1.0)
            h = self.proj(b)
            a.mul_(torch.sigmoid(h))
            return h, b * 2.0, a, b[..., :4]

    def overlapping_then_disjoint(shape: int) -> Any:
        """Columns 0-15 and 8-23 of one (B, L, 24) buffer, then columns 0-15 and 16-31 of one
        (B, L, 32) buffer: one storage both times, overlapping only at the first call."""
        buffer = _randn(shape, (1, 3)[shape], (5, 7)[shape], (24, 32)[shape])
        return _call(buffer[..., :16], buffer[..., (8, 16)[shape] :])

    return [
        OutsideModel("forward_constants_written", "hand-written: torch.tensor lists in forward (lifted constants) "
                     "written by add_, index_add_ and item assignment, returned, and one indexing", Constants,
                     _rows, **_TOLERANCE),
        OutsideModel("as_strided_view_offsets", "hand-written: as_strided of a row slice (storage offset 16) "
                     "without an offset (overlapping windows, out), with an absolute offset before it, and of "
                     "the intermediate", Offsets, _rows, **_TOLERANCE),
        OutsideModel("noop_conversions_written", "hand-written: float(), to(float32) and contiguous() of the "
                     "caller's float32 tensor written in place; contiguous first, batch-transposed second",
                     NoOps, batch_transposed_second, **_TOLERANCE),
        OutsideModel("overlapping_argument_slices", "hand-written: two slices of one buffer as two arguments, "
                     "the first written before and after the second is read; overlapping, then disjoint",
                     Overlapping, overlapping_then_disjoint, **_TOLERANCE),
        OutsideModel("chunk_split_unbind_written", "hand-written: chunk, split and unbind pieces written by mul_, "
                     "relu_, zero_, add_ after they were taken, returned with what they view", Pieces, _rows,
                     **_TOLERANCE),
    ]  # fmt: skip


def _shape_models() -> list[OutsideModel]:
    """Eight dims, a batch of 0 at the second call, a start from a tensor."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class EightDims(nn.Module):
        """The 16 features split into four dims of 2 beside batch, length and a fourth 2: a
        ``permute`` of all eight, ``movedim`` of three, ``flatten``/``unflatten`` back, a reversed
        permute out as a view (strides of eight dims)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 32)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x).unflatten(-1, (2, 2, 2, 2, 2, 1))
            p = h.permute(7, 3, 0, 5, 2, 6, 1, 4)
            m = torch.movedim(p, (0, 3, 6), (7, 1, 4))
            back = m.flatten(2, 5).unflatten(2, m.shape[2:6]).contiguous()
            folded = back.reshape(back.shape[0], -1).t()
            return p, m.sum((0, 7)), back, folded @ folded.t(), h.permute(*range(7, -1, -1))

    class Batchless(nn.Module):
        """A learned token prepended to each sample, attention, a convolution over the length,
        ``max`` with indices, ``sort``: called at batch 2, then 0."""

        def __init__(self) -> None:
            super().__init__()
            self.token = nn.Parameter(torch.randn(1, 1, 16))
            self.norm = nn.LayerNorm(16)
            self.qkv = nn.Linear(16, 48)
            self.conv = nn.Conv1d(16, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = torch.cat([self.token.expand(x.shape[0], -1, -1), x], 1)
            q, k, v = self.qkv(self.norm(h)).unflatten(-1, (3, 2, 8)).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)
            c = self.conv(a.transpose(1, 2))
            high, where = c.max(-1)
            ordered, order = torch.sort(c[:, 0], dim=-1, descending=True)
            return a, c, high, where, ordered, order, a.sum(0), x.new_zeros(x.shape[0], 2)

    def batch_2_then_0(shape: int) -> Any:
        return _call(_randn(shape, (2, 0)[shape], (5, 7)[shape], 16))

    class Narrowed(nn.Module):
        """``narrow`` whose start is a 0-dim int64 tensor the caller passes (1, then 3)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, start: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            window = h.narrow(1, start, 3)
            return window, window.sum(1), torch.narrow(x, 2, start, 4)

    def start_1_then_3(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], 7, 16), torch.tensor((1, 3)[shape]))

    return [
        OutsideModel("eight_dim_permute_chain", "hand-written: a projection unflattened to eight dims, permuted, "
                     "movedim'd, flattened and unflattened back, a reversed permute out", EightDims, _rows,
                     **_TOLERANCE),
        OutsideModel("zero_batch_second_call", "hand-written: a token prepended, attention, conv1d, max and sort; "
                     "batch 2, then 0", Batchless, batch_2_then_0, **_TOLERANCE),
        OutsideModel("narrow_tensor_start", "hand-written: narrow of an intermediate and of the input from a "
                     "0-dim int64 tensor start, 1 then 3", Narrowed, start_1_then_3, **_TOLERANCE),
    ]  # fmt: skip


def _value_models() -> list[OutsideModel]:
    """float16 near overflow, random ops with fixed values, autocast accumulated, vmap, a reshaping
    parametrization."""
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.nn.utils import parametrize

    class HalfRange(nn.Module):
        """float16 values near its largest (65504): ``mean``, ``var``, ``softmax``, ``layer_norm``
        and ``logsumexp`` of values whose plain float16 sum overflows; a float16 tensor with a 0-dim
        float64 tensor (float16 kept) and a Python float that overflows it."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 64)

        def forward(self, x: torch.Tensor, big: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = (self.proj(x).abs() * 4000.0 + 1000.0).half()
            return (h.mean(-1), h.var(-1), h.softmax(-1), F.layer_norm(h, (64,)), h.logsumexp(-1),
                    h + big, h * 1e5, h.float().sum(-1))  # fmt: skip

    def half_inputs(shape: int) -> Any:
        return _call(_rows(shape).args[0], torch.tensor(70000.0 if shape else 2.5, dtype=torch.float64))

    class FixedRandom(nn.Module):
        """Random ops whose answer is fixed: ``dropout`` in training with p 0 and 1, ``bernoulli``
        of 0 and 1, a uniform draw compared with 2, ``randint`` over one value, a normal draw times 0."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            keep = torch.bernoulli(torch.ones_like(h))
            drop = torch.bernoulli(torch.zeros_like(h))
            return (F.dropout(h, 0.0, training=True), F.dropout(h, 1.0, training=True), h * keep + drop,
                    (torch.rand_like(h) < 2.0).float(), torch.randint(4, 5, h.shape[:2]),
                    h + torch.randn_like(h) * 0.0)  # fmt: skip

    class Accumulated(nn.Module):
        """bfloat16 outputs of an autocast region added in place into float32 accumulators made
        before it, one of them a view of the other; the region's output out too."""

        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(16, 16)
            self.second = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            total = torch.zeros_like(x)
            half = total[..., :8]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                a = self.first(x)
                total.add_(a)
                b = self.second(a)
                half.sub_(b[..., 8:])
                total += torch.cat([a, x], -1)[..., 16:]
            return a, b, total, half

    class Mapped(nn.Module):
        """``vmap`` over dim 1 of the input, in chunks of 2, of a function that writes its own
        intermediate in place (an ``out_dims`` other than 0 is not capturable: export finds "a fake
        tensor in the exported program constant's list")."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def one(self, row: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.proj(row)
            h.mul_(scale).tanh_()
            return h, h.amax(-1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            scale = x.mean((0, 1)).abs() + 0.5
            mapped, peaks = torch.vmap(self.one, in_dims=(1, None), chunk_size=2)(x, scale)
            return mapped, peaks, mapped.transpose(0, 1) - self.proj(x)

    class Flat(nn.Module):
        """A weight kept flat, (out * in,), and given back as (out, in) by an unsafe
        parametrization; the caller sees the parametrized shape."""

        def forward(self, flat: torch.Tensor) -> torch.Tensor:
            return flat.view(16, 16) * 0.5

        def right_inverse(self, weight: torch.Tensor) -> torch.Tensor:
            return (weight * 2.0).flatten()

    class Reshaped(nn.Module):
        """A linear layer whose weight is stored flat by an unsafe parametrization."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)
            parametrize.register_parametrization(self.proj, "weight", Flat(), unsafe=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            parametrized: Any = self.proj  # its parametrizations are typed neither tensor nor module
            return self.proj(x), parametrized.weight.t(), parametrized.parametrizations.weight.original

    return [
        OutsideModel("float16_near_overflow", "hand-written: float16 mean, var, softmax, layer_norm, logsumexp of "
                     "values whose float16 sum overflows; a 0-dim float64 tensor and 1e5 with float16",
                     HalfRange, half_inputs, rtol=2e-3, atol=2e-3),
        OutsideModel("random_ops_fixed_values", "hand-written: dropout in training with p 0 and 1, bernoulli of 0 "
                     "and 1, rand < 2, randint of one value, randn times 0", FixedRandom, _rows, **_TOLERANCE),
        OutsideModel("autocast_accumulated_in_place", "hand-written: bfloat16 autocast outputs added in place into "
                     "float32 accumulators made before the region, one a view of the other", Accumulated, _rows,
                     rtol=1e-2, atol=1e-2),
        OutsideModel("vmap_chunked_in_place", "hand-written: vmap over dim 1 in chunks of 2 (chunk_size) of a "
                     "function writing its own intermediate in place", Mapped, _rows, **_TOLERANCE),
        OutsideModel("unsafe_reshaping_parametrization", "hand-written: a weight stored flat by an unsafe "
                     "parametrization, (16, 16) when read; the flat original out", Reshaped, _rows,
                     **_TOLERANCE),
    ]  # fmt: skip
