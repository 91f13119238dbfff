"""The sixth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
calls whose inputs alias each other or are 0-dim, no-op conversions and dtype-reinterpreting
views that eager returns as the input itself or a view of it, dropout in eval, Python scalars
and 0-dim tensors in type promotion, float64/bfloat16 state beside float32 inputs, shapes that
are Python ints, a length 0 at preparing, NaN and infinities, cumulative ops with ties, pools
returning indices, recurrent cells, distributions, pytree inputs, writes into strided inputs, a
sparse adjacency built in forward;
and ``transformers`` families not in the earlier rounds.

Kept apart from ``outside_models.py`` (which holds the sweep and the first five rounds) so each
file stays readable; importing it is cheap (builders import torch when they run).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import HF_TOLERANCE, OutsideModel, _batch, _call, _hf, _pixels, _randn, _seeded, _tokens


def sixth_round() -> list[OutsideModel]:
    """The sixth round's models, torch.nn ones first."""
    return _aliasing_and_views() + _numbers() + _stock() + _transformers()


def _aliasing_and_views() -> list[OutsideModel]:
    """Calls and results whose memory eager shares in ways the earlier rounds did not call."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class NoopConversions(nn.Module):
        """Conversions that eager answers with the input itself when it already is what is asked
        (``contiguous``, ``float``, ``to``, ``type_as``), or with a view of it."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                x.contiguous(), x.float(), x.to(torch.float32), x.type_as(x), x.view_as(x), x.expand_as(x),
                x.reshape(x.shape), x.detach(), x[...], x.to(memory_format=torch.contiguous_format), x + 0,
            )  # fmt: skip

    class DtypeViews(nn.Module):
        """Views that reinterpret the input's bytes: ``view(dtype)``, a complex input's
        ``real``/``imag`` and ``view_as_real``; an absolute value by clearing the sign bit."""

        def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
            bits = x.view(torch.int32)
            return (
                bits, x.view(torch.uint8), (bits & 0x7FFFFFFF).view(torch.float32), z.real, z.imag,
                torch.view_as_real(z), torch.view_as_real(z).sum(-1), z.conj().imag,
            )  # fmt: skip

    def dtype_view_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 8), _randn(shape + 1, batch, 4, dtype=torch.complex64))

    class WritesOneReadsOther(nn.Module):
        """Writes its first argument in place, then reads the second: called with two tensors and
        with the same tensor twice, eager's second read sees the write."""

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            before = a + b
            a.mul_(2)
            return before, b + 1, a * b, b.sum()

    def same_tensor_twice(first_aliased: bool) -> Callable[[int], Any]:
        def make(shape: int) -> Any:
            a = _randn(shape, _batch(shape), 8)
            return _call(a, a) if (shape == 0) == first_aliased else _call(a, _randn(shape + 1, _batch(shape), 8))

        return make

    class DropoutEval(nn.Module):
        """Dropout of every kind in eval: eager returns the input itself; ``nn.Identity`` too."""

        def __init__(self) -> None:
            super().__init__()
            self.dropouts = nn.ModuleList([nn.Dropout(0.3), nn.AlphaDropout(0.3), nn.FeatureAlphaDropout(0.3),
                                           nn.Dropout1d(0.3), nn.Identity()])  # fmt: skip

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (*(dropout(x) for dropout in self.dropouts), F.dropout(x, 0.5, training=self.training) * 2)

    class WritesStridedInputs(nn.Module):
        """In-place writes into a transposed input, a sliced one (a storage offset and a step)
        and a channels-last one; two of them returned."""

        def forward(self, t: torch.Tensor, s: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
            t.add_(1)
            s.mul_(-2)
            c.relu_()
            return t.sum(0), s, c * 2

    def strided_write_inputs(shape: int) -> Any:
        batch = _batch(shape)
        transposed = _randn(shape, 6, batch).t()
        sliced = _randn(shape + 1, batch, 20)[:, 2:18:2]
        channels_last = _randn(shape + 2, batch, 3, 4, 5).contiguous(memory_format=torch.channels_last)
        return _call(transposed, sliced, channels_last)

    class Batch(typing.NamedTuple):
        ids: torch.Tensor
        features: torch.Tensor
        length: int

    class PytreeCalls(nn.Module):
        """A NamedTuple argument, a list of tensors of different lengths padded in forward, a
        ParameterList/ParameterDict; returns a dict with int keys and empty containers."""

        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(20, 8)
            self.scales = nn.ParameterList([nn.Parameter(torch.randn(8)) for _ in range(2)])
            self.biases = nn.ParameterDict({"a": nn.Parameter(torch.randn(8)), "b": nn.Parameter(torch.randn(8))})

        def forward(self, batch: Batch, pieces: list[torch.Tensor]) -> tuple[Any, ...]:
            h = self.embedding(batch.ids)[:, : batch.length] + batch.features
            padded = torch.nn.utils.rnn.pad_sequence(pieces, batch_first=True, padding_value=-1.0)
            scaled = {i: h * scale for i, scale in enumerate(self.scales)}
            return scaled, padded + self.biases["a"], (), [], {}, {"b": self.biases["b"] * 1}

    def pytree_inputs(shape: int) -> Any:
        batch = _batch(shape)
        ids = torch.randint(0, 20, (batch, 6), generator=_seeded(shape))
        pieces = [_randn(shape + i, n, 8) for i, n in enumerate(((3, 5, 1), (2, 2, 4))[shape])]
        return _call(Batch(ids, _randn(shape, batch, 4, 8), 4), pieces)

    class ZeroDimInputs(nn.Module):
        """0-dim tensor arguments: a float scale, an int64 index, a bool flag."""

        def forward(self, x: torch.Tensor, t: torch.Tensor, i: torch.Tensor, flag: torch.Tensor) -> tuple[Any, ...]:
            return (
                x * t, x[i], x[:, i], torch.where(flag, x, -x), t + 1, t, x.sum() * t, i * 2,
                x.gather(1, i.expand(1, 1)),
            )  # fmt: skip

    def zero_dim_inputs(shape: int) -> Any:
        return _call(_randn(shape, 3, 4), torch.tensor((0.5, -2.0)[shape]), torch.tensor((0, 2)[shape]),
                     torch.tensor((True, False)[shape]))  # fmt: skip

    return [
        OutsideModel("noop_conversions", "contiguous/float/to/type_as/view_as/expand_as/reshape/detach that eager "
                     "answers with the input itself or a view; a contiguous input, then a transposed one",
                     NoopConversions, lambda shape: _call(_randn(shape, 8, _batch(shape)).t() if shape
                                                          else _randn(shape, _batch(shape), 8))),
        OutsideModel("dtype_views", "view(int32/uint8), sign-bit abs, complex real/imag/view_as_real of inputs",
                     DtypeViews, dtype_view_inputs),
        OutsideModel("same_tensor_twice", "writes one argument, reads the other: prepared on the same tensor "
                     "passed twice, then on two", WritesOneReadsOther, same_tensor_twice(True)),
        OutsideModel("aliased_later", "the same model prepared on two tensors, then given the same tensor twice",
                     WritesOneReadsOther, same_tensor_twice(False)),
        OutsideModel("dropout_eval", "Dropout/AlphaDropout/FeatureAlphaDropout/Dropout1d/Identity in eval",
                     DropoutEval, lambda shape: _call(_randn(shape, _batch(shape), 4, 6))),
        OutsideModel("writes_strided_inputs", "in-place writes into transposed, sliced and channels-last inputs",
                     WritesStridedInputs, strided_write_inputs),
        OutsideModel("pytree_calls", "NamedTuple argument, list of tensors padded in forward, ParameterList/Dict, "
                     "dict with int keys and empty containers out", PytreeCalls, pytree_inputs),
        OutsideModel("zero_dim_inputs", "0-dim float/int64/bool tensor arguments (scale, index, flag)",
                     ZeroDimInputs, zero_dim_inputs),
    ]  # fmt: skip


def _numbers() -> list[OutsideModel]:
    """Arithmetic whose dtype, NaN or tie handling a kernel or a lowering may answer otherwise."""
    import torch
    from torch import nn

    class ScalarPromotion(nn.Module):
        """Python scalars and 0-dim tensors in type promotion: a 0-dim float64 does not promote
        a float32 tensor, a Python float does promote an int one."""

        half_scale: torch.Tensor
        long_shift: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("half_scale", torch.tensor(0.5, dtype=torch.float64))
            self.register_buffer("long_shift", torch.tensor(3))

        def forward(self, x: torch.Tensor, n: torch.Tensor, small: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                n * 2.5, n / 2, n // -2, n % -3, 2**n.clamp(0, 5), 2.0**n.clamp(-3, 3), n.bool() + True,
                x * self.half_scale, small * self.half_scale, small + self.long_shift, x.half() + self.half_scale,
                n.to(torch.int32) + self.long_shift, x + 1j, torch.true_divide(n, n.abs() + 1), -n.abs(),
            )  # fmt: skip

    def promotion_inputs(shape: int) -> Any:
        batch = _batch(shape)
        ints = torch.randint(-9, 9, (batch, 6), generator=_seeded(shape))
        return _call(_randn(shape, batch, 6), ints, ints.to(torch.int8))

    class MixedPrecisionState(nn.Module):
        """A float64 Linear and LayerNorm, a bfloat16 and a float16 parameter, a float64 vector
        buffer (which promotes) and a float64 0-dim buffer (which does not), beside float32 inputs."""

        vector: torch.Tensor
        scalar: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8).double()
            self.norm = nn.LayerNorm(8).double()
            self.bf16 = nn.Parameter(torch.randn(8).to(torch.bfloat16))
            self.fp16 = nn.Parameter(torch.randn(8).half())
            self.register_buffer("vector", torch.randn(8, dtype=torch.float64))
            self.register_buffer("scalar", torch.tensor(1.5, dtype=torch.float64))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.norm(self.linear(x.double()))
            return h, h.float() * self.bf16, x * self.fp16, x + self.vector, x * self.scalar, self.bf16 * self.fp16

    class NanInf(nn.Module):
        """NaN and infinities through reductions, sorting, softmax of a fully masked row, clamp,
        maximum/fmax, argmax, logsumexp."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            masked = x.masked_fill(x.isnan(), float("-inf"))
            return (
                x.max(-1).values, x.amax(-1), x.argmax(-1), x.sort(-1).values, x.sort(-1).indices,
                masked.softmax(-1), masked.logsumexp(-1), x.clamp(-1, 1), x.relu(), torch.maximum(x, x.flip(-1)),
                torch.fmax(x, x.flip(-1)), x.nansum(-1), x.nanmean(-1), x.isfinite(), torch.nan_to_num(x, 0.0, 9, -9),
                x.sum(-1), x.cumsum(-1), x.topk(2).values,
            )  # fmt: skip

    def nan_inputs(shape: int) -> Any:
        x = _randn(shape, _batch(shape) + 2, 6)
        x[0, 1], x[1, 2], x[0, 4], x[-1, :] = float("nan"), float("inf"), float("-inf"), float("-inf")
        return _call(x)

    class CumulativeTies(nn.Module):
        """cummax/cummin with ties (which index a tie gives), logcumsumexp, cumprod through a zero,
        median and nanmedian along a dim, argmin, searchsorted left and right, bucketize."""

        def forward(self, x: torch.Tensor, boundaries: torch.Tensor) -> tuple[torch.Tensor, ...]:
            r = torch.round(x)
            return (
                *torch.cummax(r, -1), *torch.cummin(r, -1), torch.logcumsumexp(x, -1), torch.cumprod(r, -1),
                *torch.median(r, -1), *torch.nanmedian(r, -1), r.argmin(-1), r.argmax(-1),
                torch.searchsorted(boundaries, r), torch.searchsorted(boundaries, r, right=True),
                torch.bucketize(r, boundaries, right=True), torch.msort(r),
            )  # fmt: skip

    def tie_inputs(shape: int) -> Any:
        return _call(_randn(shape, _batch(shape) + 1, 9) * 1.5, torch.tensor([-1.0, 0.0, 0.0, 1.0, 2.0]))

    class IntShapes(nn.Module):
        """Python ints that are shapes: topk's k, interpolate's size, a view's first size."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, k: int, size: int) -> tuple[torch.Tensor, ...]:
            h = self.linear(x)
            image = h.view(h.shape[0], 2, 2, 2)
            return h.topk(k).values, torch.nn.functional.interpolate(image, size=size), h.view(k, -1), h.new_zeros(k)

    def int_shape_inputs(shape: int) -> Any:
        k = (2, 3)[shape]
        return _call(_randn(shape, k * 2, 8), k, (3, 5)[shape])

    class EmptyThenLength(nn.Module):
        """Prepared on a sequence of length 0, then called on one of length 5."""

        def __init__(self) -> None:
            super().__init__()
            self.linear, self.norm = nn.Linear(8, 8), nn.LayerNorm(8)
            self.token = nn.Parameter(torch.randn(1, 1, 8))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.norm(self.linear(x)).softmax(-1)
            with_token = torch.cat([self.token.expand(x.shape[0], 1, 8), h], dim=1)
            return h, with_token, h.sum(1), h.cumsum(1), with_token.amax(1), h.mean(1)

    return [
        OutsideModel("scalar_promotion", "Python scalars and 0-dim float64/int64 buffers in promotion with int, "
                     "int8, half and float inputs, complex scalar", ScalarPromotion, promotion_inputs),
        OutsideModel("mixed_precision_state", "float64 Linear/LayerNorm, bf16/fp16 parameters, float64 vector and "
                     "0-dim buffers beside float32 inputs", MixedPrecisionState,
                     lambda shape: _call(_randn(shape, _batch(shape), 8)), rtol=1e-2, atol=1e-2),
        OutsideModel("nan_inf", "NaN/inf through max/sort/softmax of a masked row/clamp/fmax/argmax/nansum/topk",
                     NanInf, nan_inputs),
        OutsideModel("cumulative_ties", "cummax/cummin ties, logcumsumexp, cumprod, median/nanmedian, "
                     "searchsorted/bucketize ties", CumulativeTies, tie_inputs),
        OutsideModel("int_shapes", "Python int arguments used as shapes (topk k, interpolate size, view)",
                     IntShapes, int_shape_inputs),
        OutsideModel("empty_then_length", "prepared on a sequence of length 0, then of length 5",
                     EmptyThenLength, lambda shape: _call(_randn(shape, _batch(shape), (0, 5)[shape], 8))),
    ]  # fmt: skip


def _stock() -> list[OutsideModel]:
    """Stock torch.nn pieces and torch.distributions the earlier rounds did not call."""
    import torch
    from torch import distributions, nn
    from torch.nn import functional as F

    class PoolsIndices(nn.Module):
        """Pools returning indices and their unpooling, a fractional max pool with fixed samples,
        Lp pools, average pools without padding counted or with a divisor."""

        samples: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.pool1, self.unpool1 = nn.MaxPool1d(3, 2, ceil_mode=True, return_indices=True), nn.MaxUnpool1d(3, 2)
            self.pool3, self.unpool3 = nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2)
            self.adaptive1, self.adaptive2 = nn.AdaptiveMaxPool1d(3, True), nn.AdaptiveMaxPool2d((2, 3), True)
            self.register_buffer("samples", torch.rand(1, 4, 2))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            line = x.flatten(2)
            pooled1, index1 = self.pool1(line)
            pooled3, index3 = self.pool3(x.unsqueeze(2).expand(-1, -1, 2, -1, -1))
            samples = self.samples.expand(x.shape[0], -1, -1)
            return (
                pooled1, index1, self.unpool1(pooled1, index1, output_size=line.shape[-1:]), pooled3, index3,
                self.unpool3(pooled3, index3), *self.adaptive1(line), *self.adaptive2(x),
                *F.fractional_max_pool2d(x, 2, output_size=(3, 3), return_indices=True, _random_samples=samples),
                F.lp_pool1d(line, 3, 2), F.lp_pool2d(x, 1.5, 2), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                F.avg_pool2d(x, 2, divisor_override=3), F.avg_pool1d(line, 3, 2, ceil_mode=True),
            )  # fmt: skip

    class Cells(nn.Module):
        """RNNCell (tanh, relu) and GRUCell unrolled; a two-layer bidirectional relu nn.RNN with h0."""

        def __init__(self) -> None:
            super().__init__()
            self.tanh, self.relu = nn.RNNCell(8, 12), nn.RNNCell(8, 12, nonlinearity="relu")
            self.gru = nn.GRUCell(8, 12)
            self.rnn = nn.RNN(8, 6, num_layers=2, nonlinearity="relu", bidirectional=True, dropout=0.2)

        def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, ...]:
            a = b = c = torch.zeros(x.shape[1], 12)
            for step in x.unbind(0):
                a, b, c = self.tanh(step, a), self.relu(step, b), self.gru(step, c)
            sequence, hidden = self.rnn(x, h0)
            return a, b, c, sequence, hidden

    def cell_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, (4, 6)[shape], batch, 8), _randn(shape + 1, 4, batch, 6))

    class Activations(nn.Module):
        """RMSNorm, GLU, Softmax2d, Softmin, shrinks, Threshold, RReLU (eval), PReLU per channel,
        CELU, Mish, Unflatten, circular/reflection/replication/zero pads of 1-D and 3-D."""

        def __init__(self) -> None:
            super().__init__()
            self.pieces = nn.ModuleList([
                nn.RMSNorm(6), nn.GLU(1), nn.Softmax2d(), nn.Softmin(1), nn.Hardshrink(0.3), nn.Softshrink(0.3),
                nn.Tanhshrink(), nn.Threshold(0.1, -5.0), nn.RReLU(), nn.PReLU(4), nn.CELU(0.7), nn.Mish(),
                nn.LogSigmoid(), nn.CircularPad2d((1, 2, 0, 1)), nn.ReplicationPad2d(1),
            ])  # fmt: skip
            self.unflatten = nn.Unflatten(1, (2, 2))
            self.pad3 = nn.ReflectionPad3d(1)
            self.zero3 = nn.ZeroPad3d((1, 0, 0, 1, 1, 0))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            volume = self.unflatten(x)
            return (*(piece(x) for piece in self.pieces), volume, self.pad3(volume), self.zero3(volume))

    class PolicyHeads(nn.Module):
        """torch.distributions as a policy's heads: Normal, Categorical, Bernoulli and a
        MultivariateNormal with a Cholesky factor; log_prob, entropy, mean, probs."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(8, 16)
            self.tril = nn.Parameter(torch.eye(3) + 0.1 * torch.randn(3, 3).tril(-1))

        def forward(self, obs: torch.Tensor, action: torch.Tensor, choice: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = torch.tanh(self.body(obs))
            mean, log_std, logits = h[:, :3], h[:, 3:6], h[:, 6:11]
            normal = distributions.Normal(mean, log_std.exp(), validate_args=False)
            categorical = distributions.Categorical(logits=logits, validate_args=False)
            bernoulli = distributions.Bernoulli(logits=h[:, 11:], validate_args=False)
            scale = self.tril.tril(-1) + torch.diag(F.softplus(self.tril.diagonal()))
            joint = distributions.MultivariateNormal(mean, scale_tril=scale, validate_args=False)
            return (
                normal.log_prob(action).sum(-1), normal.entropy(), categorical.log_prob(choice),
                categorical.entropy(), categorical.probs, bernoulli.log_prob((action[:, :1] > 0).float().expand(-1, 5)),
                joint.log_prob(action), joint.entropy(),
            )  # fmt: skip

    def policy_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 8), _randn(shape + 1, batch, 3), torch.randint(0, 5, (batch,)))

    class MathMisc(nn.Module):
        """cdist by both of its paths (mm for more than 25 rows, direct below), tensordot, kron,
        block_diag, diff with prepend, trapezoid, renorm, frexp, ldexp, copysign, hypot, lerp,
        addcdiv, xlogy, special functions, digamma at the poles."""

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            mantissa, exponent = torch.frexp(a)
            return (
                torch.cdist(a, b), torch.cdist(a[:, :5], b[:, :5]), torch.cdist(a, b, p=1.0),
                torch.tensordot(a, b, dims=([1], [1])), torch.kron(a[:2, :2], b[:2, :2]),
                torch.block_diag(a[:2], b[:1]), torch.diff(a, dim=0, prepend=a[:1]), torch.trapezoid(a, dim=1),
                torch.renorm(a, 2, 0, 1.0), mantissa, exponent, torch.ldexp(a, exponent), torch.copysign(a, -b[:1]),
                torch.hypot(a, a.flip(0)), torch.lerp(a, a.flip(0), a.sigmoid()), torch.addcdiv(a, a, a.abs() + 1),
                torch.xlogy(a.relu(), a.abs()), torch.special.entr(a.abs()), torch.special.i0(a),
                torch.special.ndtri(a.sigmoid()), torch.special.log_ndtr(a), torch.digamma(torch.round(a)),
            )  # fmt: skip

    def math_inputs(shape: int) -> Any:
        rows = (30, 27)[shape]
        return _call(_randn(shape, rows, 6), _randn(shape + 1, rows - 2, 6))

    class GraphConvolution(nn.Module):
        """A graph network's layer as users write one: a sparse COO adjacency built in forward from
        an edge list and multiplied by ``torch.sparse.mm``, degrees and messages by ``index_add_``
        at repeated node indices."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, edges: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
            nodes = x.shape[0]
            adjacency = torch.sparse_coo_tensor(edges, weight, (nodes, nodes))
            degree = torch.zeros(nodes).index_add_(0, edges[0], weight)
            messages = torch.zeros_like(x).index_add_(0, edges[1], x[edges[0]] * weight[:, None])
            return torch.sparse.mm(adjacency, self.linear(x)), degree, messages, adjacency.to_dense()

    def graph_inputs(shape: int) -> Any:
        nodes, edges = (5, 6), (7, 11)
        index = torch.randint(0, nodes[shape], (2, edges[shape]), generator=_seeded(shape))
        weight = torch.rand(edges[shape], generator=_seeded(shape))
        return _call(_randn(shape, nodes[shape], 8), index, weight)

    return [
        OutsideModel("pools_indices", "MaxPool1d/3d indices + MaxUnpool, AdaptiveMaxPool1d/2d indices, "
                     "fractional max pool with fixed samples, LpPool, avg pools (no pad count, divisor)",
                     PoolsIndices, lambda shape: _call(_randn(shape, _batch(shape), 4, 8, (8, 10)[shape]))),
        OutsideModel("rnn_cells", "RNNCell tanh/relu and GRUCell unrolled, 2-layer bidirectional relu RNN with h0",
                     Cells, cell_inputs),
        OutsideModel("activations_pads", "RMSNorm, GLU, Softmax2d, Softmin, shrinks, Threshold, RReLU, PReLU, "
                     "CELU, Mish, circular/replication/reflection/zero pads 2-D and 3-D", Activations,
                     lambda shape: _call(_randn(shape, _batch(shape), 4, (5, 7)[shape], 6))),
        OutsideModel("policy_heads", "torch.distributions Normal/Categorical/Bernoulli/MultivariateNormal "
                     "log_prob and entropy", PolicyHeads, policy_inputs),
        OutsideModel("math_misc", "cdist (mm and direct paths), tensordot, kron, block_diag, diff, trapezoid, "
                     "renorm, frexp/ldexp, special functions, digamma at poles", MathMisc, math_inputs, atol=1e-4),
        OutsideModel("gnn_sparse", "sparse COO adjacency built in forward from edges, sparse.mm, index_add_ "
                     "degrees and messages", GraphConvolution, graph_inputs),
    ]  # fmt: skip


def _vision_encoder_decoder() -> Any:
    """A ViT encoder with a GPT-2 decoder cross-attending to it, as ``VisionEncoderDecoderModel``
    pairs them (image captioning), returning the logits."""
    import importlib

    from srbench_models.hf import OutputOf

    transformers = importlib.import_module("transformers")
    encoder = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, image_size=32, patch_size=8)  # fmt: skip
    decoder = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, add_cross_attention=True,
                                      is_decoder=True, use_cache=False)  # fmt: skip
    config = transformers.VisionEncoderDecoderConfig.from_encoder_decoder_configs(encoder, decoder)
    config.decoder_start_token_id, config.pad_token_id = 0, 0
    return OutputOf(transformers.VisionEncoderDecoderModel(config=config), "logits")


def _captioning_inputs(shape: int) -> Any:
    import torch

    batch = _batch(shape)
    ids = torch.randint(0, 1000, (batch, (7, 4)[shape]), generator=_seeded(shape))
    return _call(pixel_values=_randn(shape, batch, 3, 32, 32), decoder_input_ids=ids, use_cache=False)


def _detection_inputs(shape: int) -> Any:
    import torch

    batch, size = _batch(shape), (64, 48)[shape]
    mask = torch.ones(batch, size, size, dtype=torch.int64)
    mask[-1, :, size - 16 :] = 0  # the last image padded on its right
    return _call(pixel_values=_randn(shape, batch, 3, size, size), pixel_mask=mask)


def _decision_inputs(shape: int) -> Any:
    import torch

    batch, length = _batch(shape), (8, 5)[shape]
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[-1, :2] = 0  # the last trajectory padded at its start
    return _call(states=_randn(shape, batch, length, 4), actions=_randn(shape + 1, batch, length, 2),
                 rewards=_randn(shape + 2, batch, length, 1), returns_to_go=_randn(shape + 3, batch, length, 1),
                 timesteps=torch.arange(length).expand(batch, length), attention_mask=mask)  # fmt: skip


def _transformers() -> list[OutsideModel]:
    """transformers families the earlier rounds did not build: detection with a transformer
    (DETR: a ResNet backbone, sine positions from a pixel mask), an image-to-text encoder-decoder,
    rotary positions in a speech conformer, hybrid Mamba/attention with experts (Jamba), Falcon's
    Mamba, multi-head latent attention with grouped routing (DeepSeek-V3), differential
    attention, divided space-time attention (TimeSformer), a dense depth head (DPT), a time
    series mixer and a decision transformer (reinforcement learning)."""
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                   vocab_size=1000, use_cache=False)  # fmt: skip
    models: list[tuple[str, str, str, str, dict[str, Any], Callable[[int], Any]]] = [
        ("hf_detr", "DetrForObjectDetection", "DetrConfig", "logits",
         dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
              backbone_config=dict(model_type="resnet", embedding_size=16, hidden_sizes=[16, 32, 32, 64],
                                   depths=[1, 1, 1, 1], out_features=["stage4"]),
              d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
              encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10, num_labels=5), _detection_inputs),
        ("hf_wav2vec2_conformer", "Wav2Vec2ConformerModel", "Wav2Vec2ConformerConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
              conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
              num_conv_pos_embedding_groups=4, position_embeddings_type="rotary", conv_depthwise_kernel_size=7),
         lambda shape: _call(input_values=_randn(shape, _batch(shape), (4000, 2400)[shape]))),
        ("hf_jamba", "JambaForCausalLM", "JambaConfig", "logits",
         dict(decoder, num_key_value_heads=2, num_experts=2, num_experts_per_tok=1, expert_layer_period=2,
              expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1, mamba_d_state=8, mamba_expand=2,
              use_mamba_kernels=False), _tokens(1000)),
        ("hf_falcon_mamba", "FalconMambaModel", "FalconMambaConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, vocab_size=1000, state_size=8, use_cache=False),
         _tokens(1000, mask=False)),
        ("hf_deepseek_v3", "DeepseekV3ForCausalLM", "DeepseekV3Config", "logits",
         dict(decoder, num_key_value_heads=4, moe_intermediate_size=32, n_shared_experts=1, n_routed_experts=4,
              num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1, kv_lora_rank=16,
              q_lora_rank=32, qk_rope_head_dim=8, v_head_dim=16, qk_nope_head_dim=8), _tokens(1000)),
        ("hf_diffllama", "DiffLlamaForCausalLM", "DiffLlamaConfig", "logits",
         dict(decoder, num_key_value_heads=2), _tokens(1000)),
        ("hf_timesformer", "TimesformerModel", "TimesformerConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
              patch_size=8, num_frames=2),
         lambda shape: _call(pixel_values=_randn(shape, _batch(shape), 2, 3, 32, 32))),
        ("hf_dpt", "DPTForDepthEstimation", "DPTConfig", "predicted_depth",
         dict(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64, image_size=32,
              patch_size=8, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[8, 16, 32, 32],
              fusion_hidden_size=16, reassemble_factors=[4, 2, 1, 0.5]), _pixels((32, 32))),
        ("hf_patchtsmixer", "PatchTSMixerModel", "PatchTSMixerConfig", "last_hidden_state",
         dict(context_length=32, patch_length=8, patch_stride=8, num_input_channels=3, d_model=16, num_layers=2),
         lambda shape: _call(past_values=_randn(shape, _batch(shape), 32, 3))),
        ("hf_decision_transformer", "DecisionTransformerModel", "DecisionTransformerConfig", "action_preds",
         dict(state_dim=4, act_dim=2, hidden_size=64, n_layer=2, n_head=4, max_ep_len=64, use_cache=False),
         _decision_inputs),
    ]  # fmt: skip
    cases = [
        OutsideModel(name, f"transformers {cls}, small, {out}", _hf(cls, config_class, out, **cfg), inputs,
                     **HF_TOLERANCE)
        for name, cls, config_class, out, cfg, inputs in models
    ]  # fmt: skip
    return [
        *cases,
        OutsideModel("hf_vision_encoder_decoder", "transformers VisionEncoderDecoderModel (ViT + GPT-2 with cross "
                     "attention), small, logits", _vision_encoder_decoder, _captioning_inputs, **HF_TOLERANCE),
    ]  # fmt: skip
