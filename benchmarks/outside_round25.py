"""The twenty-fifth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
hand-written models aimed at answers a static runtime could get wrong without a word (a slab of
memory planned once, buffers reused across calls, ``out=`` variants, a guard on each call's
signature): ops with two outputs written by ``out=`` (``sort``/``topk``/``max``/``kthvalue``
values and indices), counts into fixed bins (``histc``, ``bincount`` with ``minlength``,
``bucketize``); the same tensor returned twice, an input beside a view of it; flipped,
transposed and channels_last outputs; empty calls (a 0-size length) beside full ones, a length
of 1 beside one of 1024; the caller's tensor written in place by a broadcast operand; mixed-dtype
promotion with 0-dim tensors and integer overflow; a scale passed as a 0-dim tensor at one call
and a Python float at the next.

Kept apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders
import torch when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round22 import _rows

_EXACT = dict(rtol=0.0, atol=0.0)  # integer answers: any difference is a wrong answer


def twenty_fifth_round() -> list[OutsideModel]:
    """The twenty-fifth round's models, group by group."""
    return _index_models() + _alias_models() + _shape_models() + _dtype_models()


def _index_models() -> list[OutsideModel]:
    """Ops whose ``out=`` forms write two tensors (values and indices) or count into bins."""
    import torch
    from torch import nn

    class Ranked(nn.Module):
        """Scores ranked every way torch ranks: ``sort`` (descending, stable), ``topk``,
        ``max``/``min`` along a dim, ``kthvalue``, ``argsort``, each returned as values and int64
        indices, and the indices used again by ``gather`` (a wrong index reads a wrong row)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            values, order = torch.sort(h, dim=-1, descending=True, stable=True)
            top, top_index = torch.topk(h, 3, dim=1)
            high, high_index = h.max(dim=-1)
            low, low_index = torch.min(h, dim=1, keepdim=True)
            kth, kth_index = torch.kthvalue(h, 2, dim=-1)
            return (values, order, top, top_index, high, high_index, low, low_index, kth, kth_index,
                    torch.argsort(h, dim=1), torch.gather(x, -1, order[..., :4]))  # fmt: skip

    class Binned(nn.Module):
        """Features counted into fixed bins: ``histc`` of the whole call, ``bucketize`` against
        boundaries in a buffer, ``bincount`` of the buckets with ``minlength`` (its length is the
        larger of ``minlength`` and the largest bucket + 1: fixed here, as the buckets stay below
        it), ``searchsorted`` right-sided: the counts depend on every element of the call."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)
            self.register_buffer("edges", torch.linspace(-1.0, 1.0, 7))

        edges: torch.Tensor

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = torch.tanh(self.proj(x))
            buckets = torch.bucketize(h, self.edges)
            return (torch.histc(h, bins=10, min=-1.0, max=1.0), buckets,
                    torch.bincount(buckets.flatten(), minlength=8),
                    torch.searchsorted(self.edges, h.flatten(0, 1).contiguous(), right=True))  # fmt: skip

    class Distinct(nn.Module):
        """Sizes from data: ``unique`` (sorted, with inverse and counts) and ``nonzero`` of a
        quantised projection, as a vocabulary or a sparse index is built in ``forward``."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            q = torch.round(self.proj(x) * 2).to(torch.int64)
            values, inverse, counts = torch.unique(q, sorted=True, return_inverse=True, return_counts=True)
            return values, inverse, counts, torch.nonzero(q > 1)

    return [
        OutsideModel("sort_topk_max_indices", "hand-written: sort (descending, stable), topk, max/min along a dim, "
                     "kthvalue and argsort, values and int64 indices out, the order gathering the input", Ranked,
                     _rows, **_TOLERANCE),
        OutsideModel("histc_bucketize_bincount", "hand-written: histc, bucketize against a buffer, bincount with "
                     "minlength, searchsorted right", Binned, _rows, **_EXACT),
        OutsideModel("unique_nonzero_sizes", "hand-written: unique with inverse and counts, nonzero: output sizes "
                     "from data", Distinct, _rows, **_EXACT),
    ]  # fmt: skip


def _alias_models() -> list[OutsideModel]:
    """Outputs that are one tensor twice, an input and views of it, in layouts other than
    contiguous."""
    import torch
    from torch import nn

    class Twice(nn.Module):
        """One tensor returned twice (a tuple and a dict holding it), the input returned beside a
        reshaped view of it, a ``flip`` (a copy in torch, where another runtime would return a
        negative-stride view) and a ``transpose`` (a non-contiguous view of an intermediate)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[Any, ...]:
            h = torch.relu(self.proj(x))
            return h, h, {"same": h, "input": x}, x, x.reshape(-1, 8), h.flip(1), h.transpose(0, 1)

    class Layouts(nn.Module):
        """A convolution on a channels_last input, returned channels_last, its ``flip`` on two
        dims, a ``permute`` back to NHWC and a ``movedim``, none contiguous in the default
        format: a planner that lays outputs out contiguously changes their strides."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.conv(x.contiguous(memory_format=torch.channels_last))
            return h, h.flip(-1, -2), h.permute(0, 2, 3, 1), torch.movedim(h, 1, -1) * 2

    def images(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], 3, (8, 6)[shape], (8, 10)[shape]))

    class BroadcastInPlace(nn.Module):
        """The caller's tensor written in place by operands broadcast to it (``x.add_(bias)`` with
        a ``(16,)`` argument, ``x.mul_`` by a ``(B, 1, 1)`` gate), and a stride-0 ``expand`` of
        the bias cloned and written, returned with ``x``: the inputs after the call are part of
        the answer."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = nn.Linear(16, 1)

        def forward(self, x: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
            gate = torch.sigmoid(self.gate(x).mean(1, keepdim=True))
            x.add_(bias).mul_(gate)
            wide = bias.expand_as(x).clone()
            wide[:, 0].fill_(0.0)
            return x, wide, x * wide

    class ViewThenWritten(nn.Module):
        """A ``reshape`` of the caller's tensor (a view) taken, the tensor then doubled in place
        (``mul_``) and the view returned: eager's output is a view of the caller's tensor, which
        the caller's later writes show. The call's tensor is a slice of a wider one (rows 32
        apart), as a caller passes ``buffer[..., :16]``."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            flat = x.reshape(-1, 16)
            x.mul_(2.0)
            return flat, self.proj(flat)

    def sliced(shape: int) -> Any:
        wide = _randn(shape, (1, 3)[shape], (5, 7)[shape], 32)
        return _call(wide[..., :16])

    def broadcast(shape: int) -> Any:
        return _call(*_rows(shape).args, _randn(shape + 5, 16))

    return [
        OutsideModel("same_tensor_twice_input_view", "hand-written: one tensor out twice (and in a dict), the "
                     "input and a reshape of it out, flip and transpose outputs", Twice, _rows, **_TOLERANCE),
        OutsideModel("channels_last_flip_outputs", "hand-written: a channels_last convolution output, its flip on "
                     "two dims, a permute and a movedim out", Layouts, images, **_TOLERANCE),
        OutsideModel("broadcast_inplace_argument", "hand-written: the caller's tensor written by add_/mul_ with "
                     "broadcast operands, an expand of an argument cloned and written", BroadcastInPlace, broadcast,
                     **_TOLERANCE),
        OutsideModel("sliced_input_view_then_written", "hand-written: a reshape view of the caller's sliced "
                     "tensor (rows 32 apart) returned after the tensor is written by mul_", ViewThenWritten, sliced,
                     **_TOLERANCE),
    ]  # fmt: skip


def _shape_models() -> list[OutsideModel]:
    """Calls whose sizes swing: an empty length beside a full one, a length of 1 beside 1024."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Pooled(nn.Module):
        """A projection, a softmax over the length and a sum and an ``amax`` pooled over it (``amax``
        of nothing is refused by torch, so pooled by ``sum`` and a ``clamp``ed mean), and the
        length read from the input: at length 0 every output but the pooled ones is empty."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = F.gelu(self.proj(x))
            weights = torch.softmax(h, dim=1)
            total = h.sum(1)
            mean = total / max(x.shape[1], 1)
            return h, weights, total, mean, torch.cumsum(h, dim=1)

    def empty_then_full(shape: int) -> Any:
        return _call(_randn(shape, (2, 3)[shape], (0, 7)[shape], 16))

    def full_then_empty(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (5, 0)[shape], 16))

    def tiny_then_large(shape: int) -> Any:
        return _call(_randn(shape, (1, 2)[shape], (1, 1024)[shape], 16))

    return [
        OutsideModel("empty_length_first", "hand-written: projection, softmax, sum, cumsum; prepared on a "
                     "0-length call, then a full one", Pooled, empty_then_full, **_TOLERANCE),
        OutsideModel("empty_length_second", "hand-written: the same model prepared on a full call, then a "
                     "0-length one", Pooled, full_then_empty, **_TOLERANCE),
        OutsideModel("length_1_then_1024", "hand-written: the same model at length 1, then 1024 (a planned "
                     "slab 1024 times smaller)", Pooled, tiny_then_large, **_TOLERANCE),
    ]  # fmt: skip


def _dtype_models() -> list[OutsideModel]:
    """Promotion across dtypes and 0-dim tensors, overflow, and a scale whose type alternates."""
    import torch
    from torch import nn

    class Promoted(nn.Module):
        """Mixed-dtype arithmetic as torch promotes it: uint8 + int8 (int16), int32 by a 0-dim
        int64 tensor (stays int32: a 0-dim tensor of the same kind does not promote, and the
        product wraps), int64 by a 0-dim float64 (float32, the default), float16 + int64
        (float16), bool + bool (stays bool by ``add``, ``sum`` to int64), int32 ``sum``
        (int64, no overflow) beside an int32 ``cumprod`` (wraps)."""

        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, ...]:
            q = torch.round(x * 60).to(torch.int64)
            unsigned, signed = q.clamp(0, 255).to(torch.uint8), q.clamp(-128, 127).to(torch.int8)
            wide = q.to(torch.int32) * 50_000_000
            big = torch.tensor(70_000, dtype=torch.int64)
            mask = q > 0
            return (unsigned + signed, wide * big, q * scale, x.half() + q, mask + mask, mask.sum(-1),
                    wide.sum(-1), (q.to(torch.int32) + 3).cumprod(-1))  # fmt: skip

    def promoted(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16), torch_scalar(0.5 + shape))

    def torch_scalar(value: float) -> Any:
        return torch.tensor(value, dtype=torch.float64)

    class Scaled(nn.Module):
        """A temperature passed as a 0-dim tensor at one call and a Python float at the next, as
        callers pass ``model(x, temperature=t)`` with whatever they hold."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, temperature: Any) -> torch.Tensor:
            return torch.softmax(self.proj(x) / temperature, dim=-1)

    def scaled(shape: int) -> Any:
        x = _rows(shape).args[0]
        return _call(x, temperature=torch.tensor(0.5)) if shape == 0 else _call(x, temperature=2.0)

    return [
        OutsideModel("mixed_dtype_promotion_overflow", "hand-written: uint8+int8, int32 by a 0-dim int64 (wraps), "
                     "int64 by a 0-dim float64 argument, half+int64, bool+bool, int32 sum and cumprod", Promoted,
                     promoted, **_EXACT),
        OutsideModel("scalar_tensor_then_float", "hand-written: a temperature as a 0-dim tensor at the first call, "
                     "a Python float at the second", Scaled, scaled, **_TOLERANCE),
    ]  # fmt: skip
