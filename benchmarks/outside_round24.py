"""The twenty-fourth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
hand-written models aimed at the static runtime's planned and reused memory (outputs that are
views of each other: a diagonal written and returned, an expanded view of a tensor written after
it, a strided window zeroed through ``as_strided``; a conjugate view's lazy bit and a complex
tensor written through ``view_as_real``; integer arithmetic whose answer depends on the dtype:
``div`` rounding modes, ``fmod``/``remainder`` of negatives, int16 and uint8 wrap-around, bool
sums; ``out=`` arguments that resize and promote; state kept across calls: a step counter, a
flag flipped each call, an exponential average; a ``torch.Generator`` argument; the call's dtype
alternating between calls; keyword arguments collected by ``**kwargs`` in another order each
call, behind a ``functools.wraps`` decorator too).

Kept apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders
import torch when they run).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded, _tokens
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round22 import _rows


def twenty_fourth_round() -> list[OutsideModel]:
    """The twenty-fourth round's models, group by group."""
    return _view_models() + _dtype_models() + _state_models() + _call_models() + _transformers_models()


def _view_models() -> list[OutsideModel]:
    """Outputs that share memory with each other, written through views of intermediates."""
    import torch
    from torch import nn

    class DiagonalWritten(nn.Module):
        """A pairwise score matrix whose diagonal is written in place (``diagonal().add_``, then
        ``fill_diagonal_`` on a copy), returned with its diagonal view and a ``diag_embed``: the
        outputs overlap, as a similarity head that masks self-pairs returns them."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)
            self.bias = nn.Parameter(torch.linspace(-1.0, 1.0, 16), requires_grad=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            scores = h @ h.transpose(-1, -2)
            diagonal = scores.diagonal(dim1=-2, dim2=-1)
            diagonal.add_(self.bias[: diagonal.shape[-1]])
            masked = scores[0].clone()
            masked.fill_diagonal_(-1.0)
            return scores, diagonal, masked, torch.diag_embed(diagonal.exp())

    class ExpandedThenWritten(nn.Module):
        """An expanded (stride 0) view of a tensor returned, the tensor written in place after
        the view was taken: the view must show the write (``gate.expand(...)`` then
        ``gate.mul_(2)``), and a ``narrow`` of the same tensor returned beside it."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = nn.Linear(16, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            gate = torch.sigmoid(self.gate(x))
            wide = gate.expand(-1, -1, 16)
            gate.mul_(2.0).sub_(0.5)
            return wide, gate.narrow(1, 1, 2), x * wide

    class StridedWindows(nn.Module):
        """Every fourth feature from offset 1 zeroed through an ``as_strided`` view of an
        intermediate, overlapping windows of it taken by ``unfold`` and returned with it and a
        ``swapaxes`` view: three outputs in one storage, one of them overlapping itself."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x).flatten(0, 1).contiguous()
            rows = h.shape[0]
            h.as_strided((rows, 4), (16, 4), 1).zero_()
            return h, h.unfold(1, 4, 2), h.swapaxes(0, 1)

    class Conjugated(nn.Module):
        """A complex signal's conjugate returned as ``conj()``'s lazy view (its conj bit set,
        memory shared with the signal), the signal's imaginary part then written in place through
        ``view_as_real`` and its real part through ``.real``: the conjugate must show both."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            z = torch.view_as_complex(self.proj(x).unflatten(-1, (8, 2)).contiguous())
            conjugate = z.conj()
            torch.view_as_real(z)[..., 1].mul_(0.5)
            z.real.add_(1.0)
            return torch.view_as_real(conjugate.resolve_conj()), (conjugate * z).real, z.abs()

    return [
        OutsideModel("diagonal_written_returned", "hand-written: a score matrix's diagonal written through "
                     "diagonal().add_, returned with that view, fill_diagonal_ and diag_embed", DiagonalWritten,
                     _rows, **_TOLERANCE),
        OutsideModel("expand_then_inplace", "hand-written: an expanded view returned, its base written in place "
                     "after (mul_/sub_), a narrow of it beside", ExpandedThenWritten, _rows, **_TOLERANCE),
        OutsideModel("as_strided_zeroed_unfold", "hand-written: every fourth feature zeroed through as_strided, "
                     "unfold's overlapping windows and a swapaxes view out with the base", StridedWindows, _rows,
                     **_TOLERANCE),
        OutsideModel("conj_view_written", "hand-written: conj()'s lazy view of a complex tensor written after "
                     "through view_as_real and .real", Conjugated, _rows, **_TOLERANCE),
    ]  # fmt: skip


def _dtype_models() -> list[OutsideModel]:
    """Answers that depend on integer and small dtypes: rounding, wrap-around, promotion."""
    import torch
    from torch import nn

    class IntegerRounding(nn.Module):
        """Quantised scores divided every way torch divides: ``div`` with ``rounding_mode`` "floor"
        and "trunc" and without (true division to float), ``//`` on int64, ``fmod`` and
        ``remainder`` of negatives, int16 products that wrap around, uint8 differences that wrap,
        bool sums (int64) and an int16 ``cumsum`` (promoted to int64)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            q = torch.round(self.proj(x) * 40).to(torch.int64)
            floor, trunc, true = (torch.div(q, 7, rounding_mode=mode) for mode in ("floor", "trunc", None))
            small = q.to(torch.int16)
            wrapped = small * small * small  # beyond int16's range: wraps as C does
            unsigned = q.clamp(0, 255).to(torch.uint8)
            return (floor, trunc, true, q // -3, torch.fmod(q, 5), torch.remainder(q, -5), wrapped,
                    unsigned - 200, (q > 0).sum(-1), small.cumsum(-1), torch.abs(small - 32767))  # fmt: skip

    class OutArguments(nn.Module):
        """``out=`` tensors made empty in ``forward`` and resized by the op (as code reusing a
        scratch tensor writes it), an int64 ``out=`` of ``argmax``, a float64 ``out=`` of a
        float32 sum (the result cast to the out's dtype) and ``torch.cat(..., out=)``."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            product = torch.empty(0)
            torch.mul(h, 2.0, out=product)
            index = torch.empty(0, dtype=torch.int64)
            torch.argmax(h, dim=-1, out=index)
            total = torch.empty(0, dtype=torch.float64)
            torch.sum(h, dim=1, out=total)
            joined = torch.empty(0)
            torch.cat([h, product], dim=-1, out=joined)
            return product, index, total, joined

    class IntoArgument(nn.Module):
        """The result written into an ``out`` tensor the caller passes (``torch.mul(h, 2, out=out)``),
        as preallocating callers do: of the result's size, or empty for the op to resize."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
            torch.mul(self.proj(x), 2.0, out=out)
            return out.sum(-1)

    class Bitcast(nn.Module):
        """Bits written through dtype views (``view(torch.int32)``: the same memory read as
        another dtype): the caller's tensor's sign bits cleared in place (``bitwise_and_``, an
        abs), an intermediate negated by flipping its sign bits (``bitwise_xor_``), every other
        int16 half of it zeroed; returned with its int32 and uint8 views, which share its memory."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            x.view(torch.int32).bitwise_and_(0x7FFFFFFF)
            h = self.proj(x)
            h.view(torch.int32).bitwise_xor_(-(2**31))
            halves = h.view(torch.int16)
            halves[..., ::2] = 0
            return h, h.view(torch.int32), h.view(torch.uint8)

    def into(sized: bool) -> Callable[[int], Any]:
        def make(shape: int) -> Any:
            x = _rows(shape).args[0]
            return _call(x, torch.zeros(x.shape) if sized else torch.empty(0))

        return make

    def alternating(shape: int) -> Any:
        """float32 then float64 (and int16 then int32 indices): one prepared model called with
        the other dtype."""
        dtype = (torch.float32, torch.float64)[shape]
        index = torch.tensor([[0, 2], [1, 3], [5, 0], [4, 4]], dtype=(torch.int16, torch.int32)[shape])
        return _call(_randn(shape, (1, 3)[shape], 4, 6, dtype=dtype), index)

    class DtypeFollowing(nn.Module):
        """No parameters: the result follows the call's dtype (a float64 call answers float64),
        indices in int16 or int32 cast for ``gather``."""

        def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            picked = x.gather(-1, index.long().expand(x.shape[0], -1, -1))
            return torch.softmax(x, dim=-1).cumsum(-1), picked * 1e-9 + x[..., :2]

    class BitPacked(nn.Module):
        """A keep-mask packed eight to a byte (bools shifted into ``uint8`` and summed, as masks
        are stored compactly), unpacked again by ``bitwise_right_shift`` and ``& 1``, an
        arithmetic right shift of negative int16 values, ``bitwise_xor`` of the packed bytes and
        an in-place dropout in eval (``inplace=True``: the same tensor back) returned beside its
        input."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)
            self.drop = nn.Dropout(0.5, inplace=True)
            self.register_buffer("shifts", torch.arange(8, dtype=torch.uint8))

        shifts: torch.Tensor

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.proj(x)
            bits = (h > 0).unflatten(-1, (2, 8)).to(torch.uint8)
            packed = (bits << self.shifts).sum(-1, dtype=torch.uint8)
            unpacked = (packed.unsqueeze(-1) >> self.shifts) & 1
            signed = torch.round(h * 1000).to(torch.int16)
            return packed, unpacked, signed >> 3, packed ^ 0xA5, h, self.drop(h), h * unpacked.flatten(-2)

    return [
        OutsideModel("integer_rounding_wrap", "hand-written: div rounding modes, // by a negative, fmod/remainder "
                     "of negatives, int16 wrap-around, uint8 wrap, bool sum, int16 cumsum", IntegerRounding, _rows,
                     rtol=0.0, atol=0.0),
        OutsideModel("out_arguments_resize", "hand-written: empty out= tensors made in forward "
                     "(resized), an int64 argmax out=, a float64 out= of a float32 sum, cat out=", OutArguments,
                     _rows, **_TOLERANCE),
        OutsideModel("bit_packed_mask", "hand-written: bools packed into uint8 by shifts, unpacked by >> and "
                     "&, int16 arithmetic shift of negatives, xor, an inplace Dropout in eval returned beside its "
                     "input", BitPacked, _rows, rtol=1e-4, atol=1e-5),
        OutsideModel("bitcast_views_written", "hand-written: the caller's tensor and an intermediate written "
                     "through view(torch.int32) (sign bits cleared, flipped), int16 halves zeroed, int32/uint8 views "
                     "out", Bitcast, _rows, rtol=0.0, atol=0.0),
        OutsideModel("out_argument_written", "hand-written: the result written into the caller's out tensor of "
                     "its size (torch.mul(..., out=out))", IntoArgument, into(True), **_TOLERANCE),
        OutsideModel("out_argument_resized", "hand-written: the result written into the caller's empty out "
                     "tensor, resized by the op", IntoArgument, into(False), **_TOLERANCE),
        OutsideModel("dtype_alternating_calls", "hand-written: float32 then float64 calls (int16 then int32 "
                     "indices) of one model", DtypeFollowing, alternating, rtol=1e-6, atol=1e-9),
    ]  # fmt: skip


def _state_models() -> list[OutsideModel]:
    """State kept across calls in buffers, and randomness the caller controls."""
    import torch
    from torch import nn

    class Counting(nn.Module):
        """A step counter buffer (int64) incremented each call, a bool flag flipped each call
        (``logical_not_``) choosing between two heads by ``torch.where``, an exponential average
        kept by ``lerp_``, and the input rolled by the count: each call answers differently."""

        steps: torch.Tensor
        flag: torch.Tensor
        average: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.first, self.second = nn.Linear(16, 16), nn.Linear(16, 16)
            self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
            self.register_buffer("flag", torch.zeros((), dtype=torch.bool))
            self.register_buffer("average", torch.zeros(16))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.steps.add_(1)
            self.flag.logical_not_()
            h = torch.where(self.flag, self.first(x), self.second(x))
            self.average.lerp_(h.mean((0, 1)), 0.25)
            shifted = torch.roll(h, 1, dims=-1) * self.steps
            return shifted + self.average, self.steps.clone()

    class Seeded(nn.Module):
        """Noise drawn from a ``torch.Generator`` the caller passes (``randn(..., generator=g)``),
        as diffusion samplers take one; ``F.dropout(training=self.training)`` off in eval."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
            noise = torch.randn(x.shape, generator=generator)
            return nn.functional.dropout(self.proj(x + 0.1 * noise), 0.5, training=self.training)

    return [
        OutsideModel("counter_flag_average_state", "hand-written: an int64 step counter, a bool flag flipped "
                     "(logical_not_) choosing a head, a lerp_ average, all buffers across calls", Counting, _rows,
                     **_TOLERANCE),
        OutsideModel("generator_argument", "hand-written: a torch.Generator argument drawing noise in forward, "
                     "F.dropout off in eval", Seeded, lambda shape: _call(*_rows(shape).args, _seeded(shape + 9)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _keeping_order(forward: Callable[..., Any]) -> Callable[..., Any]:
    """A decorator as logging and casting wrappers are written: ``*args, **kwargs`` passed on,
    ``functools.wraps`` making ``inspect.signature`` show ``forward``'s own parameters; this one
    adds the keywords' values in the order the call gave them, scaled by their place."""

    @functools.wraps(forward)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = forward(self, *args, **kwargs)
        for place, value in enumerate(kwargs.values()):
            out = out + (place + 1) * value
        return out

    return wrapper


def _call_models() -> list[OutsideModel]:
    """Keyword arguments the model sees in the call's order, the order changing between calls."""
    import torch
    from torch import nn

    class Collected(nn.Module):
        """Named features collected by ``**parts`` beside a keyword-only ``scale``, concatenated in
        the call's order, as a feature-fusion head is called with whatever parts a caller has."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(48, 16)

        def forward(self, x: torch.Tensor, *, scale: float = 1.0, **parts: torch.Tensor) -> torch.Tensor:
            return self.proj(torch.cat([x, *parts.values()], dim=-1)) * scale

    def collected(shape: int) -> Any:
        x, a, b = (_randn(shape + seed, (1, 3)[shape], 5, 16) for seed in (0, 3, 6))
        return _call(x, a=a, scale=0.5, b=b) if shape == 0 else _call(x, b=b, scale=0.5, a=a)

    class Wrapped(nn.Module):
        """``forward(x, a, b)`` behind :func:`_keeping_order`: the signature names ``a`` and
        ``b``, the wrapper sees the order they were written in."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        @_keeping_order
        def forward(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return self.proj(x) + a * b

    def wrapped(shape: int) -> Any:
        x, a, b = (_randn(shape + seed, (1, 3)[shape], 5, 16) for seed in (0, 3, 6))
        return _call(x, a=a, b=b) if shape == 0 else _call(x, b=b, a=a)

    return [
        OutsideModel("kwargs_order_alternating", "hand-written: **parts concatenated in call order beside a "
                     "keyword-only scale, the two calls in other orders (a, scale, b then b, scale, a)", Collected,
                     collected, **_TOLERANCE),
        OutsideModel("wraps_decorated_forward", "hand-written: forward(x, a, b) behind a functools.wraps "
                     "decorator whose **kwargs sees the call's order, the calls in other orders", Wrapped, wrapped,
                     **_TOLERANCE),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built; the second called with its keywords in
    another order at its second call (its ``forward`` is behind ``functools.wraps`` decorators
    taking ``**kwargs``, as every transformers model's is)."""
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                   use_cache=False)  # fmt: skip
    models: list[HfCase] = [
        ("hf_ernie", "ErnieModel", "ErnieConfig", "pooler_output",
         dict(decoder, use_task_id=True, task_type_vocab_size=3, max_position_embeddings=64),
         _task_tokens(1000, (12, 16))),
        ("hf_arcee_reordered", "ArceeForCausalLM", "ArceeConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, bos_token_id=1, eos_token_id=2),
         _reordered(_tokens(1000, (12, 16)))),
    ]  # fmt: skip
    return _hf_cases(models)


def _task_tokens(vocab: int, lengths: tuple[int, int]) -> Any:
    """ERNIE's ``input_ids`` and ``attention_mask`` with ``task_type_ids`` (task 1, then 2)."""

    def make(shape: int) -> Any:
        import torch

        call = _tokens(vocab, lengths)(shape)
        ids = call.kwargs["input_ids"]
        return _call(**call.kwargs, task_type_ids=torch.full_like(ids, 1 + shape))

    return make


def _reordered(make: Callable[[int], Any]) -> Callable[[int], Any]:
    """``make``'s calls, the second with its keywords in reverse order (``attention_mask`` first)."""

    def reordered(shape: int) -> Any:
        call = make(shape)
        return call if shape == 0 else _call(**dict(reversed(call.kwargs.items())))

    return reordered
