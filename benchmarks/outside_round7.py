"""The seventh round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
what users add around the stock layers rather than the layers themselves: module hooks and the
older hook-based weight norm, spectral norm and pruning, custom parametrizations, custom
operators (``torch.library.custom_op``, one writing its argument) and ``autograd.Function``s,
``torch.vmap`` over stacked ensemble weights, activation checkpointing left on, a
``while_loop`` iteration, ``*args``/``**kwargs`` calls and structseq results, a string and a
bool choosing a branch, parameters returned as outputs; then float8 and complex layers, fake
quantisation, unbatched inputs to stock layers, writes through views of intermediates and the
``*_scatter`` ops, losses, statistics, factories, 1-D and 3-D resampling, and whole small
models users write (a Fourier neural operator, DLRM's interaction, EdgeConv's neighbours); and
``transformers`` families not in the earlier rounds.

Kept apart from ``outside_models.py`` like the sixth round; importing it is cheap (builders
import torch when they run).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import (
    HF_TOLERANCE,
    OutsideModel,
    _batch,
    _call,
    _features_of,
    _hf,
    _pixels,
    _randn,
    _seeded,
    _tokens,
)


def seventh_round() -> list[OutsideModel]:
    """The seventh round's models, torch.nn ones first."""
    return _around_modules() + _values() + _whole_models() + _transformers()


def _custom_ops() -> tuple[Any, Any]:
    """Two operators of a user's library, defined once per process: a functional one with a
    float argument and two results, and one that writes its argument (``mutates_args``). Their
    schemas are spelled out: this module's annotations are strings, which ``infer_schema`` cannot
    read inside a function."""
    import torch

    namespace = "srbench_outside7"
    if not hasattr(torch.ops, namespace) or not hasattr(getattr(torch.ops, namespace), "soft_clip"):

        @torch.library.custom_op(f"{namespace}::soft_clip", mutates_args=(),
                                 schema="(Tensor x, float limit) -> (Tensor, Tensor)")  # fmt: skip
        def soft_clip(x: torch.Tensor, limit: float) -> tuple[torch.Tensor, torch.Tensor]:
            clipped = limit * torch.tanh(x / limit)
            return clipped, (x.abs() > limit).to(torch.float32)

        @soft_clip.register_fake
        def _(x: torch.Tensor, limit: float) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.empty_like(x), torch.empty_like(x, dtype=torch.float32)

        @torch.library.custom_op(f"{namespace}::decay_", mutates_args=("x",),
                                 schema="(Tensor(a!) x, Tensor rate) -> ()")  # fmt: skip
        def decay_(x: torch.Tensor, rate: torch.Tensor) -> None:
            x.mul_(1 - rate.sigmoid())

        @decay_.register_fake
        def _(x: torch.Tensor, rate: torch.Tensor) -> None:
            return None

    ops = getattr(torch.ops, namespace)
    return ops.soft_clip, ops.decay_


def _around_modules() -> list[OutsideModel]:
    """What users put around layers: hooks, parametrizations, custom ops and functions, vmap,
    checkpointing, loops, unusual signatures and results."""
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.nn.utils import parametrize, prune

    class Hooked(nn.Module):
        """A forward pre-hook scaling an input, one with keyword arguments changing a keyword, a
        forward hook replacing an output, one recording into a buffer; the older hook-based
        ``weight_norm`` and ``spectral_norm`` (eval: no power iteration) and pruning's mask,
        each a pre-hook assigning the weight before every forward."""

        seen: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Linear(8, 8)
            self.attention = nn.MultiheadAttention(8, 2, batch_first=True)
            self.normed = torch.nn.utils.weight_norm(nn.Linear(8, 8))
            self.spectral = torch.nn.utils.spectral_norm(nn.Linear(8, 8))
            self.pruned = prune.l1_unstructured(nn.Linear(8, 8), "weight", amount=0.4)
            self.register_buffer("seen", torch.zeros(8))
            self.first.register_forward_pre_hook(lambda module, args: (args[0] * 0.5,))
            self.first.register_forward_hook(lambda module, args, out: out.tanh() + args[0])
            self.attention.register_forward_pre_hook(self._no_weights, with_kwargs=True)
            self.normed.register_forward_hook(self._record)

        @staticmethod
        def _no_weights(module: nn.Module, args: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
            return args, {**kwargs, "need_weights": False}

        def _record(self, module: nn.Module, args: Any, out: torch.Tensor) -> None:
            self.seen.copy_(out.detach().mean((0, 1)))

        def forward(self, x: torch.Tensor) -> tuple[Any, ...]:
            h = self.first(x)
            attended, weights = self.attention(h, h, h)
            return attended, weights, self.pruned(self.spectral(self.normed(attended))), self.seen * 1

    class Symmetric(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.triu() + x.triu(1).mT

    class Positive(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.exp()

        def right_inverse(self, x: torch.Tensor) -> torch.Tensor:
            return x.clamp(min=1e-3).log()

    class Parametrized(nn.Module):
        """A user's parametrizations (``register_parametrization``): a symmetric weight, a
        positive one made of two chained parametrizations with a right inverse, a parametrized
        buffer; read under ``parametrize.cached()`` where the weight is used twice."""

        scale: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.square, self.gate = nn.Linear(8, 8), nn.Linear(8, 8)
            parametrize.register_parametrization(self.square, "weight", Symmetric())
            parametrize.register_parametrization(self.gate, "weight", Positive())
            parametrize.register_parametrization(self.gate, "weight", Symmetric())
            self.register_buffer("scale", torch.rand(8))
            parametrize.register_parametrization(self, "scale", Positive())

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            with parametrize.cached():
                h = self.square(x) + F.linear(x, self.square.weight.t())
            return h * self.scale, self.gate(h).sigmoid(), self.gate.weight.sum(0)

    soft_clip, decay_ = _custom_ops()

    class CustomOps(nn.Module):
        """Operators of a user's library (``torch.library.custom_op``): two results, a float
        argument; one writing an intermediate in place, one writing the input."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            self.rate = nn.Parameter(torch.randn(8))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(x)
            clipped, hits = soft_clip(h, 0.5)
            decay_(h, self.rate)
            decay_(x, -self.rate)
            return clipped, hits, h, x.sum(-1)

    class RoundThrough(torch.autograd.Function):
        """Rounding with a straight-through gradient, as quantisation-aware code writes it."""

        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, step: float) -> torch.Tensor:
            return torch.round(x / step) * step

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
            return grad, None

    class ScaledGate(torch.autograd.Function):
        """The newer form: ``forward`` without ``ctx``, ``setup_context`` saving tensors."""

        @staticmethod
        def forward(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
            return x * gate.sigmoid()

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x, gate = ctx.saved_tensors
            s = gate.sigmoid()
            return grad * s, grad * x * s * (1 - s)

    class Functions(nn.Module):
        """``autograd.Function``s in forward (both forms), one applied twice."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            self.gate = nn.Parameter(torch.randn(8))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(x)
            rounded = RoundThrough.apply(h, 0.25)
            return rounded, ScaledGate.apply(rounded, self.gate), RoundThrough.apply(ScaledGate.apply(h, h), 0.5)

    class Ensemble(nn.Module):
        """Three MLPs' weights stacked by ``torch.func.stack_module_state`` and run by
        ``torch.vmap`` over ``functional_call``; a per-sample ``vmap`` with ``in_dims``."""

        def __init__(self) -> None:
            super().__init__()
            members = [nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)) for _ in range(3)]
            self.member = members[0]
            stacked, _ = torch.func.stack_module_state(members)
            self.names = list(stacked)
            self.stacked = nn.ParameterList([nn.Parameter(stacked[name].detach()) for name in self.names])

        def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
            def one(*weights: torch.Tensor) -> torch.Tensor:
                return torch.func.functional_call(self.member, dict(zip(self.names, weights)), (x,))

            every = torch.vmap(one)(*self.stacked)
            per_row = torch.vmap(torch.dot, in_dims=(0, None))(x, w)
            return every, every.mean(0), per_row, torch.vmap(torch.outer)(x[:, :3], x[:, 3:6])

    class Checkpointed(nn.Module):
        """Activation checkpointing left on at inference: ``checkpoint`` (non-reentrant) around
        a block and ``checkpoint_sequential`` over a Sequential."""

        def __init__(self) -> None:
            super().__init__()
            self.block = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
            self.stack = nn.Sequential(*(nn.Sequential(nn.Linear(8, 8), nn.SiLU()) for _ in range(4)))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = x + torch.utils.checkpoint.checkpoint(self.block, x, use_reentrant=False)
            return h, torch.utils.checkpoint.checkpoint_sequential(self.stack, 2, h, use_reentrant=False)

    class FixedPoint(nn.Module):
        """``torch.while_loop``: a fixed-point iteration ``h = tanh(W h + x)`` until the step is
        small or 30 steps, counting its steps; the body closes over a module."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            with torch.no_grad():
                self.linear.weight.mul_(0.3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            def not_done(step: torch.Tensor, h: torch.Tensor, change: torch.Tensor) -> torch.Tensor:
                return (step < 30) & (change > 1e-4)

            def iterate(step: torch.Tensor, h: torch.Tensor, change: torch.Tensor) -> tuple[torch.Tensor, ...]:
                new = torch.tanh(self.linear(h) + x)
                return step + 1, new, (new - h).abs().amax()

            start = (torch.zeros((), dtype=torch.int64), torch.zeros_like(x), torch.ones(()))
            steps, h, _ = torch.while_loop(not_done, iterate, start)
            return h, steps

    Pair = collections.namedtuple("Pair", ["low", "high"])

    class VarArgs(nn.Module):
        """``forward(x, *rest, scale=1.0, **extras)``; returns torch's structseqs (``max``,
        ``topk``) as they come, an OrderedDict and a namedtuple."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, *rest: torch.Tensor, scale: float = 1.0, **extras: torch.Tensor) -> Any:
            h = self.linear(x + sum(rest)) * scale
            named = collections.OrderedDict((name, h * value) for name, value in sorted(extras.items()))
            return h.max(-1), h.topk(2), named, Pair(*h.aminmax(dim=-1))

    def varargs_inputs(shape: int) -> Any:
        batch = _batch(shape)
        rest = [_randn(shape + i, batch, 8) for i in (1, 2)]
        return _call(_randn(shape, batch, 8), *rest, scale=(2.0, 0.5)[shape], bias=_randn(shape, 8),
                     gain=_randn(shape + 5, batch, 1))  # fmt: skip

    class Branches(nn.Module):
        """A string choosing a head from a ModuleDict and a bool switching normalisation, both
        changing between calls; a Sequential sliced and indexed."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
            self.heads = nn.ModuleDict({"classify": nn.Linear(16, 5), "regress": nn.Linear(16, 1)})

        def forward(self, x: torch.Tensor, head: str = "classify", normalize: bool = False) -> tuple[torch.Tensor, ...]:
            h = self.body[2:](self.body[0](x).relu())
            if normalize:
                h = F.normalize(h, dim=-1)
            out = self.heads[head](h)
            return (out.log_softmax(-1) if head == "classify" else out.squeeze(-1)), h

    def branch_inputs(shape: int) -> Any:
        return _call(_randn(shape, _batch(shape), 8), ("classify", "regress")[shape], normalize=bool(shape))

    class ReturnsState(nn.Module):
        """Returns its parameters and buffers as they are and through views (eager: the
        module's own tensors), beside results computed from them."""

        table: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 4)
            self.register_buffer("table", torch.randn(5, 4))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            weight = self.linear.weight
            return self.linear(x), weight, self.linear.bias, self.table, self.table[1], weight.t()

    return [
        OutsideModel("module_hooks", "forward pre-hooks (one with kwargs), forward hooks replacing an output and "
                     "writing a buffer, hook-based weight_norm/spectral_norm/prune", Hooked,
                     lambda shape: _call(_randn(shape, _batch(shape), (5, 3)[shape], 8))),
        OutsideModel("custom_parametrization", "register_parametrization: symmetric, chained with a right "
                     "inverse, on a buffer; parametrize.cached()", Parametrized, _features_of(8)),
        OutsideModel("custom_ops", "torch.library.custom_op with two results and a float, one writing an "
                     "intermediate and the input (mutates_args)", CustomOps, _features_of(8)),
        OutsideModel("autograd_functions", "autograd.Function (ctx form and setup_context form) in forward",
                     Functions, _features_of(8)),
        OutsideModel("vmap_ensemble", "stack_module_state + vmap(functional_call), vmap(dot, in_dims), "
                     "vmap(outer)", Ensemble, lambda shape: _call(_randn(shape, _batch(shape) + 1, 8),
                                                                   _randn(shape + 1, 8))),
        OutsideModel("checkpointed", "torch.utils.checkpoint (non-reentrant) and checkpoint_sequential at "
                     "inference", Checkpointed, _features_of(8)),
        OutsideModel("while_loop_fixed_point", "torch.while_loop until convergence, counting steps, body "
                     "closing over a module", FixedPoint, _features_of(8), atol=1e-4),
        OutsideModel("varargs_structseq", "*args and **kwargs forward, structseq (max, topk), OrderedDict and "
                     "namedtuple outputs", VarArgs, varargs_inputs),
        OutsideModel("str_bool_branches", "a str picking a ModuleDict head and a bool, both changing between "
                     "calls; Sequential slices", Branches, branch_inputs),
        OutsideModel("returns_state", "returns parameters and buffers themselves and views of them",
                     ReturnsState, _features_of(8)),
    ]  # fmt: skip


def _values() -> list[OutsideModel]:
    """Dtypes, layouts and ops the earlier rounds did not call."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Float8(nn.Module):
        """Per-tensor scaled float8 (e4m3 and e5m2) casts with saturation, as fp8 training
        emulates them; the bytes returned as uint8."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            scale = 448.0 / x.abs().amax().clamp(min=1e-6)
            e4m3 = (x * scale).clamp(-448, 448).to(torch.float8_e4m3fn)
            e5m2 = (x * 1000).to(torch.float8_e5m2)
            return (
                e4m3.to(torch.float32) / scale, e5m2.float() / 1000, e4m3.view(torch.uint8), e5m2.view(torch.uint8),
                x.to(torch.float8_e4m3fn).to(torch.bfloat16),
            )  # fmt: skip

    class ComplexLayers(nn.Module):
        """Complex-valued Linear and Conv1d (``dtype=torch.cfloat``), modReLU, a Hermitian
        product ``x @ x.mH``, a complex tensor built from two real inputs."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8, dtype=torch.cfloat)
            self.conv = nn.Conv1d(4, 4, 3, padding=1, dtype=torch.cfloat)
            self.bias = nn.Parameter(torch.randn(8) * 0.1)

        def forward(self, re: torch.Tensor, im: torch.Tensor) -> tuple[torch.Tensor, ...]:
            z = self.linear(torch.complex(re, im))
            magnitude = z.abs()
            activated = F.relu(magnitude + self.bias) * z / (magnitude + 1e-6)
            convolved = self.conv(activated.unsqueeze(1).expand(-1, 4, -1))
            return activated, convolved, activated @ activated.mH, convolved.angle(), torch.view_as_real(z)

    def complex_inputs(shape: int) -> Any:
        return _call(_randn(shape, _batch(shape), 8), _randn(shape + 1, _batch(shape), 8))

    class FakeQuant(nn.Module):
        """Quantisation-aware inference: activations fake-quantised with the scale and zero point
        an observer calibrated, a weight per channel, a result per tensor. (A ``FakeQuantize``
        module itself cannot be captured: it reads its enabled flags from buffers.)"""

        channel_scale: torch.Tensor
        scale: torch.Tensor
        zero_point: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            observer = torch.ao.quantization.MinMaxObserver(quant_min=0, quant_max=255)
            observer(torch.linspace(-3, 3, 64))  # calibrated once
            scale, zero_point = observer.calculate_qparams()
            self.register_buffer("scale", scale)
            self.register_buffer("zero_point", zero_point.to(torch.int32))
            self.register_buffer("channel_scale", torch.rand(8) * 0.05 + 0.01)  # an observer's, not learnt

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            weight = torch.fake_quantize_per_channel_affine(
                self.linear.weight, self.channel_scale, torch.zeros(8, dtype=torch.int32), 0, -128, 127
            )
            quantised = torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero_point, 0, 255)
            h = F.linear(quantised, weight, self.linear.bias)
            return h, torch.fake_quantize_per_tensor_affine(h, 0.05, 3, 0, 255), weight

    class Unbatched(nn.Module):
        """Stock layers given unbatched inputs: Conv1d (C, L), GRU and LSTM (L, H) with states,
        MultiheadAttention and TransformerEncoderLayer (L, E), InstanceNorm1d (C, L)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(8, 8, 3, padding=1)
            self.norm = nn.InstanceNorm1d(8, affine=True)
            self.gru = nn.GRU(8, 6, num_layers=2, bidirectional=True)
            self.lstm = nn.LSTM(8, 6)
            self.attention = nn.MultiheadAttention(8, 2)
            self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)

        def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, ...]:
            line = self.norm(self.conv(x.t())).t()
            sequence, hidden = self.gru(line, h0)
            cells, (h, c) = self.lstm(line, (h0[:1, :6], h0[1:2, :6]))
            attended, weights = self.attention(line, line, line)
            return sequence, hidden, cells, h, c, attended, weights, self.layer(line)

    def unbatched_inputs(shape: int) -> Any:
        return _call(_randn(shape, (7, 4)[shape], 8), _randn(shape + 1, 4, 6))

    class ViewWrites(nn.Module):
        """Writes through views of intermediates: a strided slice, a diagonal, a transposed
        view, boolean-mask and integer-index assignment (``h[idx] += v`` does not accumulate
        repeated indices), ``transpose_``/``unsqueeze_`` on an intermediate; then reads the base."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 16)

        def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(x).view(-1, 4, 4)
            h[..., ::2].mul_(2)
            h.diagonal(dim1=-2, dim2=-1).fill_(-1)
            h.transpose(-1, -2)[..., 0].add_(10)
            flat = self.linear(x)
            flat[flat < 0] = 0.0
            flat[:, index] += 1.0
            turned = self.linear(x)
            turned.transpose_(0, 1)
            turned.unsqueeze_(0)
            return h, flat, turned, h.sum((1, 2))

    def view_write_inputs(shape: int) -> Any:
        return _call(_randn(shape, _batch(shape), 8), torch.tensor(([1, 3, 3, 0], [5, 5, 2])[shape]))

    class Scatters(nn.Module):
        """The functional ``*_scatter`` ops (select, slice, diagonal, as_strided), sliding
        windows by ``Tensor.unfold`` (overlapping reads) and by ``as_strided`` of an
        intermediate, ``movedim``/``swapaxes``."""

        def forward(self, x: torch.Tensor, wave: torch.Tensor) -> tuple[torch.Tensor, ...]:
            square = x[:, :4, :4]
            frames = wave.unfold(-1, 8, 3)
            doubled = wave * 2
            windows = doubled.as_strided((doubled.shape[0], 4, 5), (doubled.stride(0), 2, 1))
            return (
                torch.select_scatter(x, x[:, 0] * -1, 1, 2), torch.slice_scatter(x, x[:, ::2] + 5, 1, 0, None, 2),
                torch.diagonal_scatter(square, square.diagonal(dim1=1, dim2=2) * 0, 0, 1, 2),
                torch.as_strided_scatter(x, torch.zeros(2, 2), (2, 2), (1, 1)), frames, frames.mean(-1),
                windows, windows.sum(-1), x.movedim(0, -1), x.swapaxes(1, 2).cumsum(1),
            )  # fmt: skip

    def scatter_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 5, 6), _randn(shape + 1, batch, (32, 27)[shape]))

    class Losses(nn.Module):
        """Losses returned from forward: cross entropy with class weights, ignore_index, label
        smoothing and soft targets, KL (log target), Huber, margin ranking, triplet,
        cosine embedding, multi-label soft margin, Poisson NLL, BCE with
        pos_weight, multi margin, 2-D NLL. (CTC is left out: export cannot capture
        ``_ctc_loss``, whose fake kernel is missing, with lengths as tensors or as ints; nor
        Gaussian NLL, which checks ``torch.any(var < 0)`` in Python.)"""

        weights: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(8, 5)
            self.register_buffer("weights", torch.rand(5) + 0.5)  # class weights, not learnt

        def forward(self, x: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, ...]:
            logits = self.head(x)  # (batch, time, classes)
            flat, flat_labels = logits.flatten(0, 1), labels.flatten()
            log_probs = logits.log_softmax(-1)
            soft = flat_labels.roll(1).clamp(min=0)
            return (
                F.cross_entropy(flat, flat_labels, weight=self.weights, ignore_index=-100, label_smoothing=0.1),
                F.cross_entropy(flat, F.one_hot(soft, 5).float() * 0.9 + 0.02, reduction="none"),
                F.kl_div(log_probs, log_probs.flip(1), log_target=True, reduction="batchmean"),
                F.huber_loss(logits, logits.flip(0), delta=0.5), F.smooth_l1_loss(logits, logits * 0.5, beta=0.3),
                F.margin_ranking_loss(flat[:, 0], flat[:, 1], flat_labels.clamp(min=0).remainder(2) * 2.0 - 1),
                F.triplet_margin_loss(flat, flat.roll(1, 0), flat.flip(0), margin=0.5, p=1.5),
                F.cosine_embedding_loss(flat, flat.flip(0), torch.ones(flat.shape[0]).index_fill(0, soft[:1], -1)),
                F.multilabel_soft_margin_loss(flat, F.one_hot(soft, 5).float()),
                F.poisson_nll_loss(flat.exp(), F.one_hot(soft, 5).float(), log_input=False, full=True),
                F.binary_cross_entropy_with_logits(flat, F.one_hot(soft, 5).float(), pos_weight=self.weights),
                F.multi_margin_loss(flat, soft, p=2, margin=0.7),
                F.nll_loss(log_probs.permute(0, 2, 1), soft.view_as(labels)),
            )  # fmt: skip

    def loss_inputs(shape: int) -> Any:
        batch, time = _batch(shape), (8, 6)[shape]
        labels = torch.randint(0, 5, (batch, time), generator=_seeded(shape))
        labels[0, -1] = -100
        return _call(_randn(shape, batch, time, 8), labels)

    class Statistics(nn.Module):
        """quantile/nanquantile (tensor q, interpolation modes), var_mean/std_mean with
        corrections, aminmax, histc, count_nonzero, norms over dims (``torch.cov`` and ``corrcoef``
        are left out: export cannot capture them, their ``aten.equal`` check reads the data)."""

        def forward(self, x: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, ...]:
            holes = x.masked_fill(x > 1.2, float("nan"))
            return (
                torch.quantile(x, q, dim=-1), torch.quantile(x, 0.3, dim=0, interpolation="midpoint"),
                torch.nanquantile(holes, q, dim=-1, keepdim=True), *torch.var_mean(x, dim=1, correction=0),
                *torch.std_mean(x, dim=(0, 1), keepdim=True), *torch.aminmax(x, dim=0), torch.histc(x, 7, -2, 2),
                torch.count_nonzero(x > 0, dim=-1), torch.linalg.matrix_norm(x[None], ord="nuc"), x.norm(p=3, dim=-1),
                torch.logsumexp(x, dim=(0, 1)), x.prod(-1, dtype=torch.float64), holes.nanmean(0),
            )  # fmt: skip

    def statistic_inputs(shape: int) -> Any:
        return _call(_randn(shape, _batch(shape) + 4, 6), torch.tensor(((0.1, 0.5, 0.9), (0.25, 0.75, 1.0))[shape]))

    class Factories(nn.Module):
        """Tensors made in forward from an input's sizes: tril/triu_indices, cartesian_prod,
        meshgrid (xy and ij), linspace/logspace, arange with a float step, eye
        (n, m), vander, constants from Python lists, full_like/new_full."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            n = x.shape[-1]
            rows, cols = torch.tril_indices(n, n, -1)
            steps = torch.arange(0, 1, 0.25)
            gx, gy = torch.meshgrid(torch.linspace(-1, 1, n), torch.arange(x.shape[0], dtype=torch.float32),
                                    indexing="xy")  # fmt: skip
            weights = torch.tensor([0.5, -1.0, 2.0])
            return (
                x[:, rows] * x[:, cols], torch.triu_indices(3, n, 1),
                torch.cartesian_prod(x[0, :3], steps), gx + gy, torch.meshgrid(steps, steps, indexing="ij")[0],
                torch.logspace(0, 2, n, base=2.0), torch.eye(n, n + 2) @ torch.ones(n + 2), torch.vander(x[0, :3], 4),
                x[:, :3] * weights, torch.full_like(x, 7, dtype=torch.int32), x.new_full((2, n), -1.5),
                torch.as_tensor([[1, 2], [3, 4]]) + x.shape[0],
            )  # fmt: skip

    class Resampling(nn.Module):
        """1-D linear and nearest-exact, 3-D trilinear (align_corners) and nearest, bicubic with
        antialias, UpsamplingNearest2d, grid_sample of a 3-D volume and of an image with a grid
        built from meshgrid plus offsets a convolution predicts (deformable sampling)."""

        def __init__(self) -> None:
            super().__init__()
            self.offsets = nn.Conv2d(2, 2, 3, padding=1)
            self.up = nn.UpsamplingNearest2d(scale_factor=2)

        def forward(self, line: torch.Tensor, image: torch.Tensor, volume: torch.Tensor) -> tuple[torch.Tensor, ...]:
            batch, _, height, width = image.shape
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
            base = torch.stack([xs, ys], -1).expand(batch, -1, -1, -1)
            grid = base + self.offsets(image).permute(0, 2, 3, 1).tanh() * 0.1
            theta = torch.eye(3, 4).expand(batch, 3, 4) * 0.9
            return (
                F.interpolate(line, scale_factor=1.7, mode="linear", align_corners=False),
                F.interpolate(line, size=5, mode="nearest-exact"),
                F.interpolate(volume, scale_factor=(1.5, 2, 0.5), mode="trilinear", align_corners=True),
                F.interpolate(volume, size=(2, 3, 3), mode="nearest"),
                F.interpolate(image, scale_factor=0.6, mode="bicubic", antialias=True, align_corners=True),
                self.up(image),
                F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=True),
                F.grid_sample(volume, F.affine_grid(theta, list(volume.shape), align_corners=False),
                              mode="nearest", padding_mode="zeros", align_corners=False),
            )  # fmt: skip

    def resampling_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 2, (9, 6)[shape]), _randn(shape + 1, batch, 2, (8, 6)[shape], 7),
                     _randn(shape + 2, batch, 2, 4, 5, (6, 4)[shape]))  # fmt: skip

    class Transposed(nn.Module):
        """ConvTranspose1d (grouped, stride 3), ConvTranspose3d, ConvTranspose2d called with
        ``output_size``, ``F.conv_transpose2d`` on a parameter, a strided convolution whose
        stride exceeds its kernel, cropping by negative padding."""

        def __init__(self) -> None:
            super().__init__()
            self.line = nn.ConvTranspose1d(4, 6, 4, stride=3, groups=2, padding=1)
            self.volume = nn.ConvTranspose3d(2, 3, (2, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1))
            self.image = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1)
            self.weight = nn.Parameter(torch.randn(4, 2, 2, 2) * 0.2)
            self.skip = nn.Conv2d(4, 4, 1, stride=3)

        def forward(self, line: torch.Tensor, image: torch.Tensor, volume: torch.Tensor) -> tuple[torch.Tensor, ...]:
            big = (image.shape[-2] * 2, image.shape[-1] * 2)
            return (
                self.line(line), self.volume(volume), self.image(image, output_size=big),
                F.conv_transpose2d(image, self.weight, stride=2, dilation=2), self.skip(image),
                F.pad(image, (-1, -1, 0, -2)),
            )  # fmt: skip

    def transposed_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 4, (7, 5)[shape]), _randn(shape + 1, batch, 4, (6, 5)[shape], 7),
                     _randn(shape + 2, batch, 2, 3, 4, (4, 5)[shape]))  # fmt: skip

    return [
        OutsideModel("float8_casts", "scaled float8 e4m3/e5m2 casts with saturation, bytes as uint8",
                     Float8, _features_of(16)),
        OutsideModel("complex_layers", "complex Linear/Conv1d (dtype=cfloat), modReLU, x @ x.mH, torch.complex",
                     ComplexLayers, complex_inputs, atol=1e-4),
        OutsideModel("fake_quant", "fake_quantize per tensor (observer-calibrated tensor qparams, float "
                     "qparams) and per channel", FakeQuant, _features_of(8)),
        OutsideModel("unbatched_layers", "unbatched inputs to Conv1d, InstanceNorm1d, GRU/LSTM with states, "
                     "MultiheadAttention, TransformerEncoderLayer", Unbatched, unbatched_inputs, atol=1e-4),
        OutsideModel("view_writes", "writes through strided/diagonal/transposed views of intermediates, mask and "
                     "index assignment (h[idx] += v), transpose_/unsqueeze_", ViewWrites, view_write_inputs),
        OutsideModel("scatter_views", "select/slice/diagonal/as_strided_scatter, Tensor.unfold frames, as_strided "
                     "windows of an intermediate, movedim/swapaxes", Scatters, scatter_inputs),
        OutsideModel("losses", "cross entropy (weights, ignore_index, smoothing, soft targets), KL, Huber, "
                     "ranking/triplet/cosine, Poisson NLL, BCE pos_weight, 2-D NLL", Losses, loss_inputs,
                     atol=1e-4),
        OutsideModel("statistics", "quantile/nanquantile, var_mean/std_mean, aminmax, histc, count_nonzero, "
                     "nuclear and p-norms, nanmean", Statistics, statistic_inputs, atol=1e-4),
        OutsideModel("factories", "tril/triu_indices, cartesian_prod, meshgrid xy/ij, logspace, "
                     "eye(n, m), vander, constants from lists", Factories,
                     lambda shape: _call(_randn(shape, 3, (5, 4)[shape]))),
        OutsideModel("resampling_1d_3d", "linear/nearest-exact 1-D, trilinear/nearest 3-D, bicubic antialias, "
                     "grid_sample 3-D and with conv-predicted offsets", Resampling, resampling_inputs, atol=1e-4),
        OutsideModel("conv_transpose_sizes", "ConvTranspose1d grouped stride 3, ConvTranspose3d, output_size=, "
                     "F.conv_transpose2d dilated, stride > kernel, negative pads", Transposed, transposed_inputs,
                     atol=1e-4),
    ]  # fmt: skip


def _whole_models() -> list[OutsideModel]:
    """Small whole models as their users write them."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class TransformerSeqFirst(nn.Module):
        """nn.Transformer sequence-first with every mask (source float mask, causal target,
        memory mask, three padding masks), pre-norm and a callable activation. The ``*_is_causal``
        flags are given, as code meant for export gives them: without them ``nn.Transformer``
        compares the source mask with a causal one, which export cannot capture."""

        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Transformer(32, 4, 2, 2, 64, dropout=0.1, activation=F.silu, norm_first=True)

        def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_padding: torch.Tensor,
                    tgt_padding: torch.Tensor) -> torch.Tensor:  # fmt: skip
            s, t = src.shape[0], tgt.shape[0]
            src_mask = torch.zeros(s, s).masked_fill(torch.ones(s, s, dtype=torch.bool).triu(3), -1e4)
            memory_mask = torch.zeros(t, s, dtype=torch.bool)
            memory_mask[:, 0] = True  # no target position reads the first source token
            return self.model(
                src, tgt, src_mask=src_mask, tgt_mask=nn.Transformer.generate_square_subsequent_mask(t),
                memory_mask=memory_mask, src_key_padding_mask=src_padding, tgt_key_padding_mask=tgt_padding,
                memory_key_padding_mask=src_padding, src_is_causal=False, tgt_is_causal=True, memory_is_causal=False,
            )  # fmt: skip

    def seq_first_inputs(shape: int) -> Any:
        batch, s, t = _batch(shape), (10, 7)[shape], (6, 5)[shape]
        src_padding, tgt_padding = torch.zeros(batch, s, dtype=torch.bool), torch.zeros(batch, t, dtype=torch.bool)
        src_padding[-1, -2:], tgt_padding[-1, -1:] = True, True
        return _call(_randn(shape, s, batch, 32), _randn(shape + 1, t, batch, 32), src_padding, tgt_padding)

    class Fourier(nn.Module):
        """A Fourier neural operator's layer: rfft2, the lowest modes mixed by a complex einsum
        written into a zero spectrum's corners, irfft2 to the input's size, plus a 1x1 conv."""

        def __init__(self) -> None:
            super().__init__()
            self.modes = 3
            self.low = nn.Parameter(torch.randn(4, 4, 3, 3, dtype=torch.cfloat) / 16)
            self.high = nn.Parameter(torch.randn(4, 4, 3, 3, dtype=torch.cfloat) / 16)
            self.pointwise = nn.Conv2d(4, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            spectrum = torch.fft.rfft2(x, norm="ortho")
            m = self.modes
            out = torch.zeros(x.shape[0], 4, x.shape[-2], x.shape[-1] // 2 + 1, dtype=torch.cfloat)
            out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", spectrum[:, :, :m, :m], self.low)
            out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", spectrum[:, :, -m:, :m], self.high)
            return F.gelu(torch.fft.irfft2(out, s=x.shape[-2:], norm="ortho") + self.pointwise(x))

    class Dlrm(nn.Module):
        """DLRM's interaction: EmbeddingBags over offsets (include_last_offset, max and sum), a
        dense MLP, pairwise dot products picked by triu_indices, concatenated into a top MLP."""

        def __init__(self) -> None:
            super().__init__()
            self.bags = nn.ModuleList([nn.EmbeddingBag(40, 8, mode="sum", include_last_offset=True),
                                       nn.EmbeddingBag(30, 8, mode="max", include_last_offset=True)])  # fmt: skip
            self.bottom = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
            self.top = nn.Sequential(nn.Linear(8 + 3, 8), nn.ReLU(), nn.Linear(8, 1))

        def forward(self, dense: torch.Tensor, ids: list[torch.Tensor], offsets: list[torch.Tensor]) -> torch.Tensor:
            features = [self.bottom(dense)] + [bag(i, o) for bag, i, o in zip(self.bags, ids, offsets)]
            stacked = torch.stack(features, 1)
            products = stacked @ stacked.transpose(1, 2)
            rows, cols = torch.triu_indices(3, 3, 1)
            return self.top(torch.cat([features[0], products[:, rows, cols]], 1)).sigmoid()

    def dlrm_inputs(shape: int) -> Any:
        batch = _batch(shape)
        counts = ([3], [2, 1, 4])[shape]
        offsets = torch.tensor([0, *torch.tensor(counts).cumsum(0).tolist()])
        ids = [torch.randint(0, vocab, (sum(counts),), generator=_seeded(shape)) for vocab in (40, 30)]
        return _call(_randn(shape, batch, 4), ids, [offsets, offsets.clone()])

    class EdgeConv(nn.Module):
        """DGCNN's EdgeConv: k nearest neighbours by cdist + topk, neighbours gathered by
        advanced indexing with a broadcast batch index, an edge MLP, max over neighbours."""

        def __init__(self) -> None:
            super().__init__()
            self.edge = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16))

        def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            distances = torch.cdist(points, points)
            neighbours = distances.topk(4, dim=-1, largest=False).indices  # (batch, n, k)
            batch = torch.arange(points.shape[0])[:, None, None]
            gathered = points[batch, neighbours]  # (batch, n, k, 3)
            centre = points.unsqueeze(2).expand_as(gathered)
            features = self.edge(torch.cat([centre, gathered - centre], -1)).amax(2)
            return features, neighbours

    return [
        OutsideModel("transformer_seq_first", "nn.Transformer sequence-first, every mask (float source, causal, "
                     "memory, three padding masks), norm_first, callable activation", TransformerSeqFirst,
                     seq_first_inputs, atol=1e-4),
        OutsideModel("fourier_operator", "FNO layer: rfft2, complex einsum of low modes written into a zero "
                     "spectrum's corners, irfft2, 1x1 conv", Fourier,
                     lambda shape: _call(_randn(shape, _batch(shape), 4, (12, 10)[shape], 12)), atol=1e-4),
        OutsideModel("dlrm_interaction", "DLRM: EmbeddingBag offsets (include_last_offset, sum/max), lists of "
                     "tensors in, pairwise dots picked by triu_indices", Dlrm, dlrm_inputs),
        OutsideModel("edgeconv_knn", "DGCNN EdgeConv: cdist + topk neighbours, advanced indexing with a broadcast "
                     "batch index, max over neighbours", EdgeConv,
                     lambda shape: _call(_randn(shape, _batch(shape), (12, 9)[shape], 3))),
    ]  # fmt: skip


def _series_inputs(shape: int) -> Any:
    """Autoformer's past values and time features (context 16 + lags up to 3), future time features."""
    import torch

    batch, past, future = _batch(shape), 19, 4
    mask = torch.ones(batch, past)
    mask[-1, :2] = 0
    return _call(past_values=_randn(shape, batch, past), past_time_features=_randn(shape + 1, batch, past, 2),
                 past_observed_mask=mask, future_time_features=_randn(shape + 2, batch, future, 2),
                 future_values=_randn(shape + 3, batch, future))  # fmt: skip


def _codec_inputs(shape: int) -> Any:
    return _call(input_values=_randn(shape, _batch(shape), 1, (960, 640)[shape]))


def _transformers() -> list[OutsideModel]:
    """transformers families the earlier rounds did not build: ModernBERT (local and global
    attention, rotary), Switch Transformers (routed experts in an encoder-decoder), LongT5
    (transient-global attention), EnCodec (a neural audio codec: convolutions, an LSTM,
    residual vector quantisation), Mamba-2, Gemma 3 (sliding and global layers), Qwen3-MoE,
    EfficientNet, RecurrentGemma (Griffin's gated linear recurrence), Nystromformer
    (landmark attention, an iterative pseudo-inverse), Depth Anything, Autoformer
    (auto-correlation by FFT, series decomposition)."""
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                   vocab_size=1000, use_cache=False)  # fmt: skip
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    t5 = dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=1000,
              use_cache=False)  # fmt: skip
    models: list[tuple[str, str, str, str, dict[str, Any], Callable[[int], Any]]] = [
        ("hf_modernbert", "ModernBertModel", "ModernBertConfig", "last_hidden_state",
         dict(encoder, global_attn_every_n_layers=2, local_attention=8, pad_token_id=0, bos_token_id=1, eos_token_id=2,
              cls_token_id=1, sep_token_id=2), _tokens(1000)),
        ("hf_switch_transformers", "SwitchTransformersForConditionalGeneration", "SwitchTransformersConfig", "logits",
         dict(t5, num_experts=4, expert_capacity=8, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1),
         _tokens(1000, decoder=(6, 4))),
        ("hf_longt5", "LongT5Model", "LongT5Config", "last_hidden_state",
         dict(t5, encoder_attention_type="transient-global", local_radius=4, global_block_size=4),
         _tokens(1000, decoder=(6, 4))),
        ("hf_encodec", "EncodecModel", "EncodecConfig", "audio_values",
         dict(hidden_size=32, num_filters=8, num_residual_layers=1, upsampling_ratios=[4, 4], codebook_size=64,
              codebook_dim=32, target_bandwidths=[6.0], sampling_rate=8000, num_lstm_layers=1), _codec_inputs),
        ("hf_mamba2", "Mamba2Model", "Mamba2Config", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, vocab_size=1000, num_heads=8, head_dim=16, state_size=16,
              n_groups=1, chunk_size=8, expand=2, use_cache=False), _tokens(1000, mask=False)),
        ("hf_gemma3", "Gemma3ForCausalLM", "Gemma3TextConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, sliding_window=8, sliding_window_pattern=2),
         _tokens(1000)),
        ("hf_qwen3_moe", "Qwen3MoeForCausalLM", "Qwen3MoeConfig", "logits",
         dict(decoder, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
              decoder_sparse_step=1), _tokens(1000)),
        ("hf_efficientnet", "EfficientNetModel", "EfficientNetConfig", "pooler_output",
         dict(image_size=32, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320), _pixels((32, 40))),
        ("hf_recurrent_gemma", "RecurrentGemmaForCausalLM", "RecurrentGemmaConfig", "logits",
         dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, intermediate_size=128,
              vocab_size=1000, lru_width=64, attention_window_size=16, block_types=["recurrent", "attention"],
              use_cache=False), _tokens(1000, mask=False)),
        ("hf_nystromformer", "NystromformerModel", "NystromformerConfig", "last_hidden_state",
         dict(encoder, num_landmarks=4, segment_means_seq_len=32, conv_kernel_size=3),
         _tokens(1000, (32, 32), mask=False)),
        ("hf_depth_anything", "DepthAnythingForDepthEstimation", "DepthAnythingConfig", "predicted_depth",
         dict(backbone_config=dict(model_type="dinov2", hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                                   intermediate_size=64, image_size=28, patch_size=14,
                                   out_indices=[1, 2, 3, 4], reshape_hidden_states=False),
              neck_hidden_sizes=[8, 16, 32, 32], fusion_hidden_size=16, reassemble_hidden_size=32,
              head_hidden_size=8), _pixels((28, 42))),
        ("hf_autoformer", "AutoformerModel", "AutoformerConfig", "last_hidden_state",
         dict(prediction_length=4, context_length=16, lags_sequence=[1, 2, 3], num_time_features=2, d_model=16,
              encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
              encoder_ffn_dim=32, decoder_ffn_dim=32, moving_average=5, autocorrelation_factor=2),
         _series_inputs),
    ]  # fmt: skip
    return [
        OutsideModel(name, f"transformers {cls}, small, {out}", _hf(cls, config_class, out, **cfg), inputs,
                     **HF_TOLERANCE)
        for name, cls, config_class, out, cfg, inputs in models
    ]  # fmt: skip
