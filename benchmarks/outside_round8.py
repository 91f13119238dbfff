"""The eighth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
how inputs reach a model rather than what it computes (batch 1 against batch 7 where ``squeeze``
changes the rank, an empty batch first, stride-0 and partially overlapping inputs, an input's
metadata changed in place, sparse and jagged inputs), precision paths (bfloat16 and float16
transformer layers, float64 recurrent layers with projections, channels-last 3-D networks),
linear algebra and signal ops the earlier rounds left out (SVD, pseudo-inverse, LU, triangular
solves, the matrix exponential, Householder products, eigenvalues, Hermitian FFTs, shifts,
gradients), attention with per-head masks and queries shorter than keys, a CTC greedy decoder,
segment reductions and data-dependent sizes; and ``transformers`` models returning their
attentions and hidden states, encoder-decoders with ``decoder_input_ids``, and families not in
the earlier rounds.

Kept apart from ``outside_models.py`` like the sixth and seventh rounds; importing it is cheap
(builders import torch when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import (
    HF_TOLERANCE,
    OutsideModel,
    _call,
    _hf,
    _pixels,
    _randn,
    _seeded,
    _tokens,
)


def eighth_round() -> list[OutsideModel]:
    """The eighth round's models, torch.nn ones first."""
    return _inputs() + _precision() + _operators() + _transformers()


def _batch_one_or(other: int) -> Callable[[int], int]:
    """Batch 1 at shape 0 (where ``squeeze`` drops the batch and export specialises a size of
    1), ``other`` at shape 1."""
    return lambda shape: 1 if shape == 0 else other


def _inputs() -> list[OutsideModel]:
    """How inputs reach a model: their batch, strides, overlaps and layouts."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    seven = _batch_one_or(7)

    class Squeezed(nn.Module):
        """``squeeze()`` drops the batch at batch 1 (another rank than at batch 7), a Python
        branch on the batch, ``flatten(0, 1)`` and a mean over the batch."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(x)
            single = h * 2 if x.shape[0] == 1 else h.softmax(0)
            return h.squeeze(), single, h.flatten(0, 1), h.mean(0, keepdim=True), x.squeeze(0)

    class EmptyFirst(nn.Module):
        """Prepared on an empty batch, called at batch 7: convolution, batch norm, layer norm,
        softmax, a mean over the batch (NaN at 0) and a sum (0)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.norm = nn.BatchNorm2d(8)
            self.head = nn.Sequential(nn.Flatten(), nn.LayerNorm(8 * 36), nn.Linear(8 * 36, 5))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.norm(self.conv(x)).relu()
            logits = self.head(h)
            return logits.softmax(-1), h.mean(0), logits.sum(0), logits.argmax(-1)

    def empty_first_inputs(shape: int) -> Any:
        return _call(_randn(shape, (0, 7)[shape], 3, 6, 6))

    class Overlapping(nn.Module):
        """Writes its first argument and reads its second, which overlaps it in memory at shape
        0 (two slices of one tensor) and not at shape 1."""

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            a.mul_(2).add_(1)
            return b * 3, a.sum(-1)

    def overlapping_inputs(shape: int) -> Any:
        base = _randn(shape, 4, 10)
        if shape == 0:
            return _call(base[:, :6], base[:, 3:9])
        return _call(base[:, :6].clone(), _randn(shape + 5, 4, 6))

    class Expanded(nn.Module):
        """Stride-0 (expanded) inputs: read by a convolution and a matmul, returned as a view,
        a ``contiguous()`` copy and a transpose."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(4, 4, 3, padding=1)
            self.linear = nn.Linear(6, 6)

        def forward(self, x: torch.Tensor, row: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return self.conv(x), self.linear(row), row[0], row.contiguous(), x.transpose(1, 2), x + row[:1, None]

    def expanded_inputs(shape: int) -> Any:
        batch = seven(shape)
        return _call(_randn(shape, 1, 4, 6).expand(batch, 4, 6), _randn(shape + 2, 6).expand(batch, 6))

    class MetadataWrites(nn.Module):
        """Changes an input's shape in place (``unsqueeze_``, ``t_``), as eager leaves it."""

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x.unsqueeze_(0)
            y.t_()
            return x * 2, y @ y.t()

    class SparseInput(nn.Module):
        """A sparse COO adjacency as an argument (the sixth round built one in forward)."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, adjacency: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return torch.sparse.mm(adjacency, self.linear(x)).relu()

    def sparse_inputs(shape: int) -> Any:
        nodes = (5, 9)[shape]
        generator = _seeded(shape)
        edges = torch.randint(0, nodes, (2, 3 * nodes), generator=generator)
        values = torch.rand(3 * nodes, generator=generator)
        adjacency = torch.sparse_coo_tensor(edges, values, (nodes, nodes)).coalesce()
        return _call(adjacency, _randn(shape, nodes, 8))

    class Jagged(nn.Module):
        """A jagged nested tensor (``layout=torch.jagged``) of sequences of other lengths."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.gelu(self.linear(x)).to_padded_tensor(0.0)

    def jagged_inputs(shape: int) -> Any:
        lengths = ((3,), (2, 5, 4))[shape]
        parts = [_randn(shape + i, n, 8) for i, n in enumerate(lengths)]
        return _call(torch.nested.nested_tensor(parts, layout=torch.jagged))

    def batch_seven_features(width: int) -> Callable[[int], Any]:
        return lambda shape: _call(_randn(shape, seven(shape), 3, width))

    return [
        OutsideModel("squeeze_batch_one", "squeeze() dropping batch 1 (rank differs at batch 7), a branch on the "
                     "batch, flatten(0, 1), squeeze(0) of the input", Squeezed, batch_seven_features(8)),
        OutsideModel("empty_batch_first", "prepared at batch 0, called at batch 7: conv, batch norm, layer norm, "
                     "softmax, mean (NaN) and sum over the batch", EmptyFirst, empty_first_inputs, atol=1e-4),
        OutsideModel("overlapping_arguments", "writes its first argument, reads a second overlapping it (two slices "
                     "of one tensor) at shape 0, separate at shape 1", Overlapping, overlapping_inputs),
        OutsideModel("expanded_inputs", "stride-0 (expanded) inputs to conv1d and linear, returned as a view, "
                     "contiguous() and transposed; batch 1 then 7", Expanded, expanded_inputs),
        OutsideModel("input_metadata_writes", "unsqueeze_ and t_ on inputs (their shape changed in place)",
                     MetadataWrites, lambda shape: _call(_randn(shape, 3, 4), _randn(shape + 1, 4, (2, 5)[shape]))),
        OutsideModel("sparse_coo_input", "a sparse COO adjacency argument to torch.sparse.mm", SparseInput,
                     sparse_inputs),
        OutsideModel("jagged_input", "a jagged nested tensor argument, to_padded_tensor out", Jagged, jagged_inputs),
    ]  # fmt: skip


def _precision() -> list[OutsideModel]:
    """Half, bfloat16 and float64 layers, and channels-last 3-D networks."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Seq2SeqLayers(nn.Module):
        """A pre-norm GELU encoder layer and a decoder layer with causal and padding masks."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu", batch_first=True,
                                                      norm_first=True)  # fmt: skip
            self.decoder = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True)

        def forward(self, source: torch.Tensor, target: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
            memory = self.encoder(source, src_key_padding_mask=padding)
            causal = nn.Transformer.generate_square_subsequent_mask(target.shape[1], dtype=target.dtype)
            return self.decoder(target, memory, tgt_mask=causal, tgt_is_causal=True,
                                memory_key_padding_mask=padding)  # fmt: skip

    def seq2seq(dtype: Any) -> Callable[[], Any]:
        return lambda: Seq2SeqLayers().to(dtype)

    def seq2seq_inputs(dtype: Any) -> Callable[[int], Any]:
        def make(shape: int) -> Any:
            batch, length = (1, 4)[shape], (10, 7)[shape]
            padding = torch.zeros(batch, length, dtype=torch.bool)
            padding[-1, length - 2 :] = True
            return _call(_randn(shape, batch, length, 32, dtype=dtype), _randn(shape + 1, batch, 5, 32, dtype=dtype),
                         padding)  # fmt: skip

        return make

    class HalfBlock(nn.Module):
        """A float16 block on the CPU: layer norm, attention by scaled_dot_product_attention with
        a boolean mask, GELU MLP, a float32 softmax of float16 logits, an RMS norm."""

        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(32)
            self.qkv = nn.Linear(32, 96)
            self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(approximate="tanh"), nn.Linear(64, 32))
            self.rms = nn.RMSNorm(32)

        def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            q, k, v = self.qkv(self.norm(x)).unflatten(-1, (3, 4, 8)).permute(2, 0, 3, 1, 4)
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
            h = x + attended.transpose(1, 2).flatten(2)
            h = self.rms(h + self.mlp(h))
            return h, F.softmax(h[..., :8], -1, dtype=torch.float32)

    def half_inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (6, 9)[shape]
        keep = torch.ones(batch, length, dtype=torch.bool)
        keep[-1, -2:] = False
        return _call(_randn(shape, batch, length, 32, dtype=torch.float16), keep)

    class DoubleRecurrent(nn.Module):
        """float64, sequence-first: a bidirectional two-layer LSTM with projections given its
        states, a bidirectional GRU, a three-layer tanh RNN."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(6, 12, num_layers=2, bidirectional=True, proj_size=5)
            self.gru = nn.GRU(10, 7, bidirectional=True)
            self.rnn = nn.RNN(14, 4, num_layers=3)

        def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> tuple[torch.Tensor, ...]:
            out, (h, c) = self.lstm(x, (h0, c0))
            out, g = self.gru(out)
            out, r = self.rnn(out)
            return out, h, c, g, r

    def recurrent_inputs(shape: int) -> Any:
        batch, steps = (1, 7)[shape], (5, 3)[shape]
        dtype = torch.float64
        return _call(_randn(shape, steps, batch, 6, dtype=dtype), _randn(shape + 1, 4, batch, 5, dtype=dtype),
                     _randn(shape + 2, 4, batch, 12, dtype=dtype))  # fmt: skip

    class Volumes(nn.Module):
        """A channels-last-3d network (weights and input): Conv3d, BatchNorm3d, MaxPool3d with
        indices and its unpooling, a transposed Conv3d, trilinear upsampling, AvgPool3d."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv3d(3, 8, 3, padding=1)
            self.norm = nn.BatchNorm3d(8)
            self.pool = nn.MaxPool3d(2, return_indices=True)
            self.unpool = nn.MaxUnpool3d(2)
            self.up = nn.ConvTranspose3d(8, 4, 2, stride=2)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.norm(self.conv(x)).relu()
            pooled, indices = self.pool(h)
            restored = self.unpool(pooled, indices, output_size=h.shape[2:])
            up = self.up(pooled)
            smooth = F.interpolate(pooled, scale_factor=1.5, mode="trilinear", recompute_scale_factor=True)
            return up, restored, F.avg_pool3d(h, 2), smooth

    def volumes() -> Any:
        model: Any = Volumes()  # Module.to's stubs leave out memory_format
        return model.to(memory_format=torch.channels_last_3d)

    def volume_inputs(shape: int) -> Any:
        size = (4, 6)[shape]
        x = _randn(shape, (1, 3)[shape], 3, size, size, size)
        return _call(x.to(memory_format=torch.channels_last_3d))

    class Fractional(nn.Module):
        """Channels-last resampling by fractional factors: nearest-exact, bilinear with corners
        aligned, bicubic, area to a size, pixel (un)shuffle."""

        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Upsample(scale_factor=1.5, mode="nearest-exact")
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.conv(x)
            shuffled = F.pixel_unshuffle(F.pixel_shuffle(h, 2), 2)
            return (self.up(h), F.interpolate(h, scale_factor=0.75, mode="bilinear", align_corners=True),
                    F.interpolate(h, scale_factor=1.25, mode="bicubic", recompute_scale_factor=True),
                    F.interpolate(h, size=(3, 5), mode="area"), shuffled)  # fmt: skip

    def fractional() -> Any:
        model: Any = Fractional()
        return model.to(memory_format=torch.channels_last)

    def fractional_inputs(shape: int) -> Any:
        size = (8, 10)[shape]
        return _call(_randn(shape, (1, 3)[shape], 4, size, size).to(memory_format=torch.channels_last))

    return [
        OutsideModel("bfloat16_seq2seq_layers", "bfloat16 pre-norm GELU encoder layer and decoder layer, causal and "
                     "padding masks", seq2seq(torch.bfloat16), seq2seq_inputs(torch.bfloat16), rtol=2e-2, atol=2e-2),
        OutsideModel("float16_block", "float16 on the CPU: layer norm, SDPA with a boolean mask, tanh-GELU MLP, RMS "
                     "norm, a float32 softmax of float16 logits", lambda: HalfBlock().half(), half_inputs,
                     rtol=2e-2, atol=2e-2),
        OutsideModel("float64_recurrent", "float64 sequence-first bidirectional 2-layer LSTM with proj_size and "
                     "given states, bidirectional GRU, 3-layer RNN; batch 1 then 7", lambda: DoubleRecurrent().double(),
                     recurrent_inputs, rtol=1e-9, atol=1e-10),
        OutsideModel("channels_last_3d", "channels_last_3d weights and input: Conv3d, BatchNorm3d, MaxPool3d indices "
                     "and unpool, ConvTranspose3d, trilinear x1.5, AvgPool3d", volumes, volume_inputs, atol=1e-4),
        OutsideModel("fractional_resampling", "channels-last nearest-exact x1.5, bilinear align_corners x0.75, bicubic "
                     "x1.25 recomputed, area to a size, pixel (un)shuffle", fractional, fractional_inputs, atol=1e-4),
    ]  # fmt: skip


def _operators() -> list[OutsideModel]:
    """Linear algebra, signal ops, attention masks, decoding and segment reductions."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Decompositions(nn.Module):
        """SVD (reduced) and its values, pseudo-inverse, LU factors and a solve with them, a
        triangular solve, the matrix exponential, ``multi_dot``, QR's Householder form and its
        product, eigenvalues of a general matrix (complex), rank and condition number."""

        def __init__(self) -> None:
            super().__init__()
            self.mix = nn.Linear(4, 4)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            m = self.mix(a) + 4 * torch.eye(4)
            u, s, vh = torch.linalg.svd(m, full_matrices=False)
            lu, pivots = torch.linalg.lu_factor(m)
            solved = torch.linalg.lu_solve(lu, pivots, b)
            lower = torch.linalg.solve_triangular(m.tril(), b, upper=False)
            reflectors, tau = torch.geqrf(m)
            q = torch.linalg.householder_product(reflectors, tau)
            chain = torch.linalg.multi_dot([m[0], m[0].T, m[0]])
            return (u.abs(), s, vh.abs(), torch.linalg.svdvals(m), torch.linalg.pinv(m), solved, lower,
                    torch.linalg.matrix_exp(m * 0.1), chain, q.abs(), torch.linalg.eigvals(m).abs().sort(-1).values,
                    torch.linalg.matrix_rank(m), torch.linalg.cond(m))  # fmt: skip

    def decomposition_inputs(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(_randn(shape, batch, 4, 4), _randn(shape + 1, batch, 4, 2))

    class Spectra(nn.Module):
        """Hermitian FFTs, ``fftshift``/``ifftshift``, ``fft2`` normalised forward, ``rfftn``
        to a size, ``rot90``, ``torch.gradient`` with spacing, ``diff`` with prepend, ``pdist``,
        ``cumulative_trapezoid``."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            half = torch.fft.ihfft(x, dim=-1)
            spectrum = torch.fft.fftshift(torch.fft.fft2(x, norm="forward"), dim=(-2, -1))
            back = torch.fft.ifft2(torch.fft.ifftshift(spectrum, dim=(-2, -1)), norm="forward").real
            (gradient,) = torch.gradient(x[0], spacing=0.5, dim=-1)
            return (torch.fft.hfft(half, n=x.shape[-1]), spectrum.abs(), back, torch.fft.rfftn(x, s=(4, 6)).abs(),
                    torch.rot90(x, 1, (1, 2)), gradient, torch.diff(x, dim=-1, prepend=x[..., :1] * 0),
                    F.pdist(x[0]), torch.cumulative_trapezoid(x, dx=0.25, dim=-1))  # fmt: skip

    class HeadMasks(nn.Module):
        """Cross attention with ``kdim``/``vdim`` and a per-head float mask (batch * heads, L,
        S) together with a float padding mask, weights per head; SDPA with queries shorter than
        keys under ``is_causal`` and with an additive mask of fully masked rows."""

        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(16, 4, kdim=6, vdim=10, batch_first=True)

        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, head_mask: torch.Tensor,
                    padding: torch.Tensor) -> tuple[torch.Tensor, ...]:  # fmt: skip
            out, weights = self.attention(q, k, v, attn_mask=head_mask, key_padding_mask=padding,
                                          average_attn_weights=False)  # fmt: skip
            heads = out.unflatten(-1, (4, 4)).transpose(1, 2)
            causal = F.scaled_dot_product_attention(heads[:, :, :2], heads, heads, is_causal=True)
            additive = torch.zeros(heads.shape[2], heads.shape[2])
            additive[0] = float("-inf")
            masked = F.scaled_dot_product_attention(heads, heads, heads, attn_mask=additive, scale=0.3)
            return out, weights, causal, masked.nan_to_num(-1.0)

    def head_mask_inputs(shape: int) -> Any:
        batch, length, source = (1, 3)[shape], (5, 4)[shape], (7, 9)[shape]
        padding = torch.zeros(batch, source)
        padding[-1, -2:] = float("-inf")
        head_mask = _randn(shape + 3, batch * 4, length, source)
        return _call(_randn(shape, batch, length, 16), _randn(shape + 1, batch, source, 6),
                     _randn(shape + 2, batch, source, 10), head_mask, padding)  # fmt: skip

    class GreedyCtc(nn.Module):
        """A CTC head decoded greedily: log_softmax over the vocabulary as (T, N, C), frames
        kept where they differ from the previous one and are not blank, lengths from the mask,
        a float64 log-probability of the best path."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Conv1d(8, 16, 3, padding=1)
            self.head = nn.Linear(16, 6)

        def forward(self, features: torch.Tensor, frames: torch.Tensor) -> tuple[torch.Tensor, ...]:
            hidden = self.encoder(features).transpose(1, 2)
            log_probs = self.head(hidden).log_softmax(-1).transpose(0, 1)  # (T, N, C)
            best, labels = log_probs.max(-1)
            valid = torch.arange(log_probs.shape[0])[:, None] < frames[None, :]
            previous = F.pad(labels[:-1], (0, 0, 1, 0), value=-1)
            keep = (labels != previous) & (labels != 0) & valid
            decoded = labels.masked_fill(~keep, -1).T
            return log_probs, decoded, keep.sum(0), (best.double() * valid).sum(0)

    def ctc_inputs(shape: int) -> Any:
        batch, steps = (1, 4)[shape], (12, 9)[shape]
        frames = torch.full((batch,), steps, dtype=torch.int64)
        frames[-1] = steps - 3
        return _call(_randn(shape, batch, 8, steps), frames)

    class Segments(nn.Module):
        """Segment reductions: ``segment_reduce`` by lengths (sum, max, mean), ``scatter_reduce``
        by ``amin`` and ``prod`` without the destination, ``index_reduce`` by mean, ``index_put``
        accumulating, ``index_add`` with alpha."""

        def forward(self, x: torch.Tensor, lengths: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
            sums = torch.segment_reduce(x, "sum", lengths=lengths)
            maxima = torch.segment_reduce(x, "max", lengths=lengths, initial=-5.0)
            means = torch.segment_reduce(x, "mean", lengths=lengths)
            target = torch.zeros(4, x.shape[1])
            rows = index[:, None].expand_as(x)
            minima = target.scatter_reduce(0, rows, x, "amin", include_self=False)
            products = torch.ones(4, x.shape[1]).scatter_reduce(0, rows, x, "prod", include_self=False)
            averaged = target.index_reduce(0, index, x, "mean", include_self=False)
            accumulated = target.index_put((index,), x, accumulate=True)
            added = target.index_add(0, index, x, alpha=0.5)
            return sums, maxima, means, minima, products, averaged, accumulated, added

    def segment_inputs(shape: int) -> Any:
        lengths = torch.tensor(((2, 0, 3, 1), (1, 4, 2, 2))[shape])
        rows = int(lengths.sum())
        index = torch.randint(0, 4, (rows,), generator=_seeded(shape))
        return _call(_randn(shape, rows, 5), lengths, index)

    class DataDependent(nn.Module):
        """Sizes read from the data: ``repeat_interleave`` by a tensor, ``bincount``,
        ``unique_consecutive`` with counts, ``argwhere``."""

        def forward(self, x: torch.Tensor, repeats: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values, counts = torch.unique_consecutive(labels, return_counts=True)
            return (x.repeat_interleave(repeats, dim=0), torch.bincount(labels, minlength=3), values, counts,
                    torch.argwhere(x > 0))  # fmt: skip

    def data_dependent_inputs(shape: int) -> Any:
        batch = (2, 4)[shape]
        repeats = torch.randint(0, 3, (batch,), generator=_seeded(shape))
        labels = torch.randint(0, 4, (9,), generator=_seeded(shape)).sort().values
        return _call(_randn(shape, batch, 3), repeats, labels)

    class LegacyNorms(nn.Module):
        """Rarely used normalisations: ``CrossMapLRN2d`` (a legacy autograd Function),
        ``LocalResponseNorm`` on a 3-D input, ``InstanceNorm1d`` tracking running statistics,
        ``GroupNorm`` of one group, ``LayerNorm`` without a bias over two dimensions."""

        def __init__(self) -> None:
            super().__init__()
            self.cross_map = nn.CrossMapLRN2d(3)
            self.local = nn.LocalResponseNorm(2)
            self.instance = nn.InstanceNorm1d(6, affine=True, track_running_stats=True)
            self.group = nn.GroupNorm(1, 6)
            self.layer = nn.LayerNorm((6, 5), bias=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            flat = x.flatten(2)[..., :5]
            return (self.cross_map(x), self.local(flat), self.instance(flat), self.group(x),
                    self.layer(flat))  # fmt: skip

    def legacy_norms() -> Any:
        model = LegacyNorms()
        instance: Any = model.instance  # running statistics typed as optional
        with torch.no_grad():
            instance.running_mean.uniform_(-1, 1)
            instance.running_var.uniform_(0.5, 2)
        return model

    class QuantizedTensors(nn.Module):
        """Quantized tensors made in forward: per tensor (quint8) and per channel (qint8),
        their integer representation, dequantized, and a quantized ReLU."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            q = torch.quantize_per_tensor(x, 0.05, 64, torch.quint8)
            scales = torch.linspace(0.02, 0.08, x.shape[1])
            per_channel = torch.quantize_per_channel(x, scales, torch.zeros(x.shape[1], dtype=torch.int64), 1,
                                                     torch.qint8)  # fmt: skip
            return q.int_repr(), q.dequantize(), per_channel.dequantize(), torch.relu(q).dequantize()

    class Unsigned(nn.Module):
        """The wider unsigned dtypes (uint16, uint32, uint64; few kernels take them): casts,
        concatenation and slices, and back to int64 and float."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            wide = (x.abs() * 1000).to(torch.uint16)
            word = wide.to(torch.uint32)
            both = torch.cat((wide, wide[:, :2]), -1)
            return wide, word, both, word.to(torch.uint64), word.to(torch.int64) + 1, wide.float() / 7

    return [
        OutsideModel("linalg_decompositions", "svd (reduced), svdvals, pinv, lu_factor + lu_solve, solve_triangular, "
                     "matrix_exp, multi_dot, geqrf + householder_product, eigvals, matrix_rank, cond", Decompositions,
                     decomposition_inputs, rtol=1e-3, atol=1e-4),
        OutsideModel("spectral_calculus", "ihfft/hfft, fftshift/ifftshift, fft2 norm=forward, rfftn s=, rot90, "
                     "gradient with spacing, diff prepend, pdist, cumulative_trapezoid", Spectra,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 6, (8, 10)[shape])), atol=1e-4),
        OutsideModel("per_head_masks", "MHA with kdim/vdim, a per-head 3-D float mask and a float padding mask, "
                     "weights per head; SDPA causal with fewer queries than keys, an additive mask with a fully "
                     "masked row, scale=", HeadMasks, head_mask_inputs, atol=1e-4),
        OutsideModel("ctc_greedy_decode", "log_softmax as (T, N, C), greedy decode: repeats and blanks masked, "
                     "lengths from a mask, float64 path score", GreedyCtc, ctc_inputs),
        OutsideModel("segment_reductions", "segment_reduce by lengths (sum, max with initial, mean, an empty "
                     "segment), scatter_reduce amin/prod, index_reduce mean, index_put accumulate, index_add alpha",
                     Segments, segment_inputs),
        OutsideModel("data_dependent_sizes", "repeat_interleave by a tensor, bincount, unique_consecutive with "
                     "counts, argwhere", DataDependent, data_dependent_inputs),
        OutsideModel("legacy_norms", "CrossMapLRN2d, LocalResponseNorm on 3-D, InstanceNorm1d tracking running "
                     "stats, GroupNorm(1), LayerNorm without bias over two dims", legacy_norms,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 6, 4, (4, 5)[shape])), atol=1e-4),
        OutsideModel("quantized_tensors", "quantize_per_tensor (quint8) and per_channel (qint8) in forward, "
                     "int_repr, dequantize, quantized relu", QuantizedTensors,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 4, 5))),
        OutsideModel("unsigned_dtypes", "uint16/uint32/uint64: casts, cat and slices, back to int64 and float",
                     Unsigned, lambda shape: _call(_randn(shape, (1, 3)[shape], 6))),
    ]  # fmt: skip


def _whisper_inputs(shape: int) -> Any:
    """Whisper's log-mel ``input_features`` (twice ``max_source_positions`` frames, as Whisper
    requires) and ``decoder_input_ids`` of two lengths."""
    import torch

    batch = (1, 3)[shape]
    ids = torch.randint(0, 1000, (batch, (6, 4)[shape]), generator=_seeded(shape))
    return _call(input_features=_randn(shape, batch, 16, 100), decoder_input_ids=ids)


def _ctc_wave(shape: int) -> Any:
    """Raw audio with an ``attention_mask`` (the last clip shorter)."""
    import torch

    batch, length = (1, 3)[shape], (1600, 1200)[shape]
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[-1, length - 300 :] = 0
    return _call(input_values=_randn(shape, batch, length), attention_mask=mask)


def _transformers() -> list[OutsideModel]:
    """transformers models returning their attentions and hidden states (whole outputs),
    encoder-decoders given ``decoder_input_ids``, and families not in the earlier rounds."""
    flags = dict(output_attentions=True, output_hidden_states=True)
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                   vocab_size=1000, use_cache=False)  # fmt: skip
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    seq2seq = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                   encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000, use_cache=False)  # fmt: skip
    audio = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                 conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                 num_conv_pos_embedding_groups=4)  # fmt: skip
    vit = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
               patch_size=8)  # fmt: skip
    models: list[tuple[str, str, str, str | None, dict[str, Any], Callable[[int], Any]]] = [
        ("hf_t5_all_outputs", "T5ForConditionalGeneration", "T5Config", None,
         dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4, vocab_size=1000,
              use_cache=False), _tokens(1000, decoder=(6, 4), extra=flags)),
        ("hf_bart_all_outputs", "BartModel", "BartConfig", None, seq2seq, _tokens(1000, decoder=(6, 4), extra=flags)),
        ("hf_whisper_seq2seq", "WhisperForConditionalGeneration", "WhisperConfig", "logits",
         dict(seq2seq, num_mel_bins=16, max_source_positions=50, max_target_positions=64, pad_token_id=0,
              bos_token_id=1, eos_token_id=1, decoder_start_token_id=1), _whisper_inputs),
        ("hf_gpt2_attentions", "GPT2LMHeadModel", "GPT2Config", None,
         dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, use_cache=False), _tokens(1000, extra=flags)),
        ("hf_vit_interpolated", "ViTModel", "ViTConfig", None, vit,
         _pixels_with((32, 48), dict(flags, interpolate_pos_encoding=True))),
        ("hf_swin_hidden_states", "SwinModel", "SwinConfig", None,
         dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
         _pixels_with((32, 32), flags)),
        ("hf_segformer_semantic", "SegformerForSemanticSegmentation", "SegformerConfig", "logits",
         dict(num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
              patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
              decoder_hidden_size=32, num_labels=5), _pixels((32, 48))),
        ("hf_wav2vec2_ctc", "Wav2Vec2ForCTC", "Wav2Vec2Config", "logits",
         dict(audio, feat_extract_norm="layer", do_stable_layer_norm=True, vocab_size=32), _ctc_wave),
        ("hf_sew_d", "SEWDModel", "SEWDConfig", "last_hidden_state",
         dict(audio, squeeze_factor=2, position_buckets=16, max_position_embeddings=64), _ctc_wave),
        ("hf_unispeech_sat", "UniSpeechSatModel", "UniSpeechSatConfig", "last_hidden_state", audio, _ctc_wave),
        ("hf_granite", "GraniteForCausalLM", "GraniteConfig", "logits",
         dict(decoder, num_key_value_heads=2, embedding_multiplier=2.0, residual_multiplier=0.5,
              attention_multiplier=0.25, logits_scaling=4.0), _tokens(1000)),
        ("hf_olmo2", "Olmo2ForCausalLM", "Olmo2Config", "logits", dict(decoder, num_key_value_heads=2), _tokens(1000)),
        ("hf_nemotron", "NemotronForCausalLM", "NemotronConfig", "logits",
         dict(decoder, num_key_value_heads=2, partial_rotary_factor=0.5), _tokens(1000)),
        ("hf_xglm", "XGLMForCausalLM", "XGLMConfig", "logits",
         dict(d_model=64, num_layers=2, attention_heads=4, ffn_dim=128, vocab_size=1000, use_cache=False),
         _tokens(1000)),
        ("hf_rembert", "RemBertModel", "RemBertConfig", "last_hidden_state",
         dict(encoder, input_embedding_size=32, output_embedding_size=48), _tokens(1000)),
        ("hf_prophetnet", "ProphetNetModel", "ProphetNetConfig", "last_hidden_state",
         dict(hidden_size=64, encoder_ffn_dim=128, decoder_ffn_dim=128, num_encoder_layers=2, num_decoder_layers=2,
              num_encoder_attention_heads=4, num_decoder_attention_heads=4, ngram=2, num_buckets=16,
              relative_max_distance=32, vocab_size=1000, use_cache=False), _tokens(1000, decoder=(6, 4))),
        ("hf_cvt", "CvtModel", "CvtConfig", "last_hidden_state",
         dict(embed_dim=[16, 32, 48], num_heads=[1, 2, 2], depth=[1, 2, 3], drop_path_rate=[0.0, 0.0, 0.0]),
         _pixels((32, 40))),
        ("hf_yolos", "YolosForObjectDetection", "YolosConfig", None,
         dict(vit, image_size=[32, 32], num_detection_tokens=5, num_labels=3), _pixels((32, 32))),
        ("hf_clipseg", "CLIPSegForImageSegmentation", "CLIPSegConfig", "logits",
         dict(text_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                               vocab_size=1000, max_position_embeddings=40),
              vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 image_size=32, patch_size=8),
              projection_dim=16, extract_layers=[0, 1], reduce_dim=16, decoder_num_attention_heads=2,
              decoder_intermediate_size=32), _tokens(1000, (12, 9), pixels=32)),
    ]  # fmt: skip
    return [
        OutsideModel(name, f"transformers {cls}, small, {out or 'whole output'}", _hf(cls, config_class, out, **cfg),
                     inputs, **HF_TOLERANCE)
        for name, cls, config_class, out, cfg, inputs in models
    ]  # fmt: skip


def _pixels_with(sizes: tuple[int, int], extra: dict[str, Any]) -> Callable[[int], Any]:
    """``pixel_values`` of those sizes at batch 1 then 3, with keyword flags."""
    return lambda shape: _call(pixel_values=_randn(shape, (1, 3)[shape], 3, sizes[shape], sizes[shape]), **extra)
