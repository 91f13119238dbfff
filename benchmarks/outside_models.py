"""srbench's static runtime on models it was not built against: conformance and speed beside eager.

The zoo is what srbench was developed on; this sweep is what a new user brings. It builds 644
models that are not in the zoo: the first five rounds' 139 here, and the sixth round's 31 in
``benchmarks/outside_round6.py``, the seventh's 37 in ``benchmarks/outside_round7.py``, the
eighth's 40 in ``benchmarks/outside_round8.py``, the ninth's 22 in ``benchmarks/outside_round9.py``:
diffusers, PyTorch Geometric and einops models, the tenth's 24 in ``benchmarks/outside_round10.py``:
kornia, x-transformers, perceiver-pytorch, MONAI, PEFT, e3nn and torchdiffeq models, the eleventh's
22 in ``benchmarks/outside_round11.py``: gpytorch, botorch, normflows, zuko, torchmetrics,
sentence-transformers, rotary-embedding-torch and performer-pytorch models and hand-written
patterns, the twelfth's 21 in ``benchmarks/outside_round12.py``: ncps, mambapy, torchsde, pyro,
tab-transformer-pytorch, rtdl-revisiting-models, vector-quantize-pytorch, local-attention,
linear-attention-transformer, siren-pytorch and pytorch-tabnet models, the thirteenth's 25 in
``benchmarks/outside_round13.py``: julius, asteroid-filterbanks, nnAudio, lucidrains' single-module
libraries, FrEIA and transformers architectures no earlier round built, the fourteenth's 24 in
``benchmarks/outside_round14.py``: lucidrains' attention, mixture and recurrent libraries, EGNN and
the E(n)-transformer, torchcde, pytorch-tcn, X-UNet and transformers architectures no earlier round
built, the fifteenth's 28 in ``benchmarks/outside_round15.py``: lucidrains' language, memory, vision,
multimodal, geometric and time-series libraries, two hand-written decoders keeping their key-value
caches as the caller's, and transformers architectures no earlier round built, the sixteenth's 26 in
``benchmarks/outside_round16.py``: lucidrains' language, set, vision, geometric and recurrent libraries
(complex states among them), three hand-written models (state buffers written in place, optional
keywords, parameters of three dtypes) and transformers architectures no earlier round built, the
seventeenth's 25 in ``benchmarks/outside_round17.py``: lucidrains' and others' libraries (states and
memories in and out, a backbone as an argument, a Python int of slots), six hand-written models (a
beam search step's dict of tuples, channels-last int and bool outputs, int8 weights, complex tensors,
a ring buffer written into the caller's tensors, a dtype per call) and transformers architectures no
earlier round built, a greedy loop on a ``DynamicCache`` among them, the eighteenth's 23 in
``benchmarks/outside_round18.py``: pytorch-crf, entmax and torch-dct, hand-written models
(``flex_attention``, forces by autograd, ``torch.map`` and ``torch.cond``, enum and dataclass
arguments, a uint8 image pipeline, TorchScript pieces) and transformers architectures no earlier
round built, the nineteenth's 17 in ``benchmarks/outside_round19.py``: accelerate's hooks,
hand-written models (``torch.func`` derivatives, a meta tensor, parameters among the outputs, a list
collated in the model, ``sdpa_kernel``, conjugated views, a signed zero, integer edges) and
transformers architectures no earlier round built, and the twentieth's 19 in
``benchmarks/outside_round20.py``: stock pieces (``MultiheadAttention``'s variants, a
``PackedSequence`` out, modules fused for inference, dynamic and static quantization), hand-written
models (optional masks in a list, ``out=`` arguments, a registered dataclass out, ``torch.special``,
selection edges) and transformers architectures no earlier round built, the twenty-first's 18
in ``benchmarks/outside_round21.py``: hand-written models (a float mask broadcast over grouped
heads, queries left no key, lazy modules, compiler-disabled helpers, a head chosen by name,
running statistics in non-persistent buffers, the caller's slices written in place, left padding,
boolean-mask indexing, ``.item()`` as an int, ``einsum`` ellipses, a generator's stages, nested
autocast) and transformers
architectures no earlier round built, the twenty-second's 19 in
``benchmarks/outside_round22.py``: hand-written models (ATen overloads called directly, custom
operators defined by schema, SDPA's causal bias objects, forward-mode AD, a ``__call__`` of its
own, a ``torch.Size`` argument, a function mode, buffers rebound, the caller's float16 and int64
tensors written, two-original parametrizations, a nested tensor built in ``forward``, ``scatter``
reduce strings, ``linalg``'s ``_ex`` routines) and transformers architectures no earlier round
built, and the twenty-third's 18 in ``benchmarks/outside_round23.py``: hand-written models (a list
and a dict argument changed by ``forward``, numpy and complex scalar arguments, a model rewritten
by ``torch.fx``, wrapped by ``torch.compile`` and by ``nn.DataParallel``, the inputs' overlapping
views out, Python numbers out, ``index_reduce_``/``put_``/``take``, RReLU and local response norm,
pruning and the old hook-based norms, ``.data`` in ``forward``) and transformers architectures no
earlier round built, and the twenty-fourth's 17 in ``benchmarks/outside_round24.py``: hand-written
models (views written after they were taken and returned, bits written through dtype views, a
conjugate view, integer rounding and wrap-around, ``out=`` arguments resized, state across calls,
a generator argument, calls of another dtype, keyword orders collected by ``**kwargs`` and seen
by a ``functools.wraps`` decorator) and transformers architectures no earlier round built, and the
twenty-fifth's 12 in ``benchmarks/outside_round25.py``: hand-written models (values and indices
out, fixed bins, sizes from data, one tensor out twice, flipped and channels_last outputs, the
caller's tensor written by broadcast operands and a view of it taken before, empty and long calls,
mixed-dtype promotion, a 0-dim tensor then a float), and the twenty-sixth's 10 in
``benchmarks/outside_round26.py``: hand-written models (inputs laid out otherwise at the second
call, one tensor as two arguments, views of parameters out, branches on strides, ``where`` with
scalars, complex values written, empty cumulations), and the twenty-seventh's 13 in
``benchmarks/outside_round27.py``: hand-written models (lifted constants written, ``as_strided``
of offset views, no-op conversions written, overlapping argument slices, pieces of ``chunk``/
``split``/``unbind`` written, eight dims, a batch of 0 second, float16 near overflow, random ops
of fixed values, autocast accumulated in place, a chunked ``vmap``, an unsafe parametrization),
and the twenty-eighth's 14 in ``benchmarks/outside_round28.py``: libraries' models (transformers
heads for token labels, answer spans, multiple choice, labelled images and video, seq2seq and a
mixture of experts; transformers' ExecuTorch wrappers keeping a static key-value cache in buffers;
snntorch's spiking neurons; geoopt's hyperbolic manifolds); unavailable where those
extras are not installed. Each model runs from torch's settings as the sweep started, and what its
own libraries change at import (``benchmarks/outside_globals.py``), whatever ran before it;
offline and randomly initialised: stock ``torch.nn`` pieces and small hand-written models that
exercise one semantic each (masks, recurrent layers, 1-D/3-D and transposed convolutions, normalisations, pixel shuffle,
resampling, pytree inputs and outputs, calls written in other forms, in-place ops, view chains,
indexing, sorting, half, int8, float8, complex and float64 paths, linalg, aliased and 0-dim
arguments, distributions, sparse adjacency, hooks, custom operators, ``vmap``), and
``transformers`` models from small configs (``HF_HUB_OFFLINE=1``, nothing downloaded). Each
model has two calls: shape 0 at batch 1, shape 1 at another batch and, where the model has one,
another length or size.

For each model, in one process, one model at a time, one intra-op thread:

1. ``torch.export`` itself, under ``no_grad`` as srbench's capture runs it: a model it cannot
   capture is reported as such (``not capturable``, with export's first line), and not counted
   as srbench's failure;
2. srbench's static runtime under seven option sets (the defaults; ``enable_out_variant=False``;
   ``cleanup_activations=False``; ``manage_output_tensors=True``; ``decompose=True``;
   ``streams=2``; ``streams=4``), each prepared on shape 0 and
   checked against eager by the suites' equivalence protocol (``srbench.measure.equivalence``:
   shape 0, shape 1, shape 0 again; inputs as eager leaves them; outputs of one run not
   overwritten by the next unless outputs are managed), then once more at each shape for which
   outputs share memory with which inputs and outputs (``srbench.measure.aliasing``: an output
   that is an input, a view of one, or another output, as eager's are; at shape 0 only before
   the sixth round) and for each output's strides (``srbench.measure.layout``: its memory
   format, as eager's), and
   through the ``srbench`` runtime plugin as suites call it, and from two threads at once
   (``threads2``, ``threads2_forced``: one prepared module, a runtime per thread, 20 overlapping
   calls each, ``benchmarks/outside_threads.py``), and with its floating arguments relaid (``relaid``:
   the defaults' runtime prepared on the contiguous call, then called transposed, sliced from a wider
   buffer and channels-last, each against eager's answer to that layout, ``benchmarks/outside_relaid.py``);
3. the time per call of eager (under ``torch.inference_mode``, as the eager runtime plugin) and
   of srbench with default options, medians of interleaved rounds on shape 0; the ratio
   srbench / eager is what the table shows. On a shared machine these ratios move by several
   per cent between runs: read them as such.

    .venv/bin/python benchmarks/outside_models.py                       # every model, table on stdout
    .venv/bin/python benchmarks/outside_models.py --only gru,hf_llama --rounds 60
    .venv/bin/python benchmarks/outside_models.py --markdown --json results/outside.json
    .venv/bin/python benchmarks/outside_models.py --order fresh --checks default,decompose --rounds 0

With ``--order fresh`` (``benchmarks/outside_fresh.py``) srbench is prepared before any eager call,
on an instance of its own per option set, and compared with a twin built alike that eager calls:
what a model's first call does (a cache filled, a buffer registered) is then srbench's to see.

Exit status 0 when every capturable model is equivalent under every option set, 1 otherwise.
What the sweep found, and what still fails, is in ``docs/outside-models.md`` (the README says where it stands); each
fix is kept by a test in ``tests/test_static_outside.py`` (the first round),
``tests/test_static_outside_calls.py`` (the second), ``tests/test_static_outside_round3.py``,
``tests/test_static_outside_round4.py``, ``tests/test_static_outside_round5.py``,
``tests/test_static_outside_round6.py``, ``tests/test_static_outside_round7.py``,
``tests/test_static_outside_round8.py``, ``tests/test_static_outside_round9.py``,
``tests/test_static_outside_round10.py``, ``tests/test_static_outside_round11.py``,
``tests/test_static_outside_round12.py`` to ``tests/test_static_outside_round28.py`` on the
smallest model that showed it.
This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from srbench.formatting import error_summary

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Outcome(enum.Enum):
    """What happened to a model under one option set."""

    EQUIVALENT = "ok"
    WRONG = "wrong result"
    ERROR = "error"
    NOT_CAPTURABLE = "not capturable"  # torch.export itself refuses the model
    UNAVAILABLE = "unavailable"  # the model cannot be built or run eagerly here (a missing package or class)
    # the check's protocol needs one steady answer per call, and eager's answers drift from call to
    # call (state the model moves at every call: see drifting_answers); not a failure
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class OutsideModel:
    """One model from outside the zoo: how to build it, its two calls, and its tolerance."""

    name: str
    description: str
    build: Callable[[], Any]
    make_inputs: Callable[[int], Any]  # shape (0 or 1) -> srbench.inputs.Inputs
    rtol: float = 1e-4
    atol: float = 1e-5


@dataclass(frozen=True)
class Check:
    outcome: Outcome
    detail: str = ""


@dataclass(frozen=True)
class Row:
    """One model's results: a check per option set and the time per call of eager and srbench."""

    name: str
    description: str
    checks: dict[str, Check] = field(default_factory=dict)
    eager_us: float | None = None
    srbench_us: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.eager_us is None or self.srbench_us is None else self.srbench_us / self.eager_us

    @property
    def failed(self) -> bool:
        return any(check.outcome in (Outcome.WRONG, Outcome.ERROR) for check in self.checks.values())

    def summary(self) -> str:
        """``ok``, or each kind of failure with the option sets it happened under and its first
        detail: a wrong result under some options and an error under others are both said (the
        ninth round's VQModel gave NaN under six option sets, which its error under ``decompose``
        alone hid)."""
        outcomes = {check.outcome for check in self.checks.values()}
        said = []
        for outcome in (Outcome.UNAVAILABLE, Outcome.NOT_CAPTURABLE, Outcome.NOT_APPLICABLE, Outcome.WRONG,
                        Outcome.ERROR):  # fmt: skip
            if outcome in outcomes:
                bad = [name for name, check in self.checks.items() if check.outcome is outcome]
                first = next(check.detail for check in self.checks.values() if check.outcome is outcome)
                where = "" if len(bad) == len(self.checks) else f" ({', '.join(bad)})"
                said.append(f"{outcome.value}{where}: {first}")
        return "; ".join(said) or Outcome.EQUIVALENT.value

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "checks": {name: {"outcome": c.outcome.value, "detail": c.detail} for name, c in self.checks.items()},
            "eager_us": self.eager_us,
            "srbench_us": self.srbench_us,
            "ratio": self.ratio,
        }


# --------------------------------------------------------------------------------------------
# The models. Builders import torch (and transformers) when they run.
# --------------------------------------------------------------------------------------------


def _seeded(shape: int) -> Any:
    import torch

    return torch.Generator().manual_seed(4321 + shape)


def _batch(shape: int) -> int:
    """Batch 1 for shape 0, 3 for shape 1: every model runs at batch 1 and at a batch > 1."""
    return 1 if shape == 0 else 3


def _randn(shape: int, *size: int, dtype: Any = None) -> Any:
    import torch

    return torch.randn(*size, generator=_seeded(shape), dtype=dtype)


def _call(*args: Any, **kwargs: Any) -> Any:
    from srbench.inputs import Inputs

    return Inputs(args, kwargs)


def _torch_models() -> list[OutsideModel]:
    import torch
    from torch import nn
    from torch.nn import functional as F

    def causal(length: int) -> torch.Tensor:
        return torch.triu(torch.full((length, length), float("-inf")), diagonal=1)

    def padding_mask(batch: int, length: int) -> torch.Tensor:
        mask = torch.zeros(batch, length, dtype=torch.bool)
        mask[-1, length - 3 :] = True  # the last sequence is padded at its end
        return mask

    class Decoder(nn.Module):
        """nn.TransformerDecoder with a causal target mask and a padded memory."""

        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerDecoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
            self.decoder = nn.TransformerDecoder(layer, 2)

        def forward(self, tgt: torch.Tensor, memory: torch.Tensor, memory_padding: torch.Tensor) -> torch.Tensor:
            mask = causal(tgt.shape[1])
            return self.decoder(tgt, memory, tgt_mask=mask, memory_key_padding_mask=memory_padding, tgt_is_causal=True)

    def decoder_inputs(shape: int) -> Any:
        batch, length = _batch(shape), (12, 7)[shape]
        return _call(_randn(shape, batch, length, 64), _randn(shape, batch, 10, 64), padding_mask(batch, 10))

    class FullTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Transformer(64, 4, 2, 2, 128, dropout=0.1, batch_first=True)

        def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            return self.model(src, tgt, tgt_mask=causal(tgt.shape[1]), tgt_is_causal=True)

    def seq2seq_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, (16, 9)[shape], 64), _randn(shape, batch, (8, 5)[shape], 64))

    class MaskedAttention(nn.Module):
        """nn.MultiheadAttention with a causal float mask and a key padding mask, weights returned."""

        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(64, 4, batch_first=True)

        def forward(self, x: torch.Tensor, padding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            causal_mask = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
            return self.attention(x, x, x, attn_mask=causal_mask, key_padding_mask=padding)

    def attention_inputs(shape: int) -> Any:
        batch, length = _batch(shape), (12, 20)[shape]
        return _call(_randn(shape, batch, length, 64), padding_mask(batch, length))

    class Recurrent(nn.Module):
        """A GRU followed by a bidirectional two-layer LSTM, with an initial hidden state."""

        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(16, 32, batch_first=True)
            self.lstm = nn.LSTM(32, 24, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x: torch.Tensor, h0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y, _ = self.gru(x, h0)
            z, (hn, cn) = self.lstm(y)
            return z, hn + cn.sum(0)

    def recurrent_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, (10, 6)[shape], 16), _randn(shape, 1, batch, 32))

    class Audio(nn.Module):
        """A 1-D convolutional front end on a waveform (strided Conv1d, GroupNorm, GELU, pooling)."""

        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv1d(1, 16, 10, stride=5),
                nn.GroupNorm(4, 16),
                nn.GELU(),
                nn.Conv1d(16, 32, 3, stride=2, padding=1),
                nn.BatchNorm1d(32),
                nn.ReLU(),
                nn.Conv1d(32, 32, 3, padding=2, dilation=2),
                nn.ReLU(),
                nn.AdaptiveAvgPool1d(1),
                nn.Flatten(),
                nn.Linear(32, 10),
            )

        def forward(self, wave: torch.Tensor) -> torch.Tensor:
            return self.features(wave)

    class Volume(nn.Module):
        """Conv3d + BatchNorm3d + MaxPool3d on a small video clip."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv3d(3, 8, 3, padding=1),
                nn.BatchNorm3d(8),
                nn.ReLU(inplace=True),
                nn.MaxPool3d(2),
                nn.Conv3d(8, 16, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool3d(1),
                nn.Flatten(),
                nn.Linear(16, 5),
            )

        def forward(self, clip: torch.Tensor) -> torch.Tensor:
            return self.body(clip)

    def block(cin: int, cout: int, norm: Callable[[int], nn.Module]) -> nn.Module:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), norm(cout), nn.ReLU(inplace=True))

    class UNet(nn.Module):
        """Two levels down, up by ConvTranspose2d and by bilinear Upsample, skips concatenated."""

        def __init__(self) -> None:
            super().__init__()
            self.down1 = block(3, 16, lambda c: nn.InstanceNorm2d(c, affine=True))
            self.down2 = block(16, 32, lambda c: nn.GroupNorm(4, c))
            self.bottom = block(32, 32, nn.BatchNorm2d)
            self.up2 = nn.ConvTranspose2d(32, 32, 2, stride=2)
            self.merge2 = block(64, 16, nn.BatchNorm2d)
            self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.merge1 = block(32, 8, nn.BatchNorm2d)
            self.head = nn.Conv2d(8, 2, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d1 = self.down1(x)
            d2 = self.down2(F.max_pool2d(d1, 2))
            b = self.bottom(F.max_pool2d(d2, 2))
            u2 = self.merge2(torch.cat([self.up2(b), d2], dim=1))
            u1 = self.merge1(torch.cat([self.up1(u2), d1], dim=1))
            return self.head(u1)

    def image_inputs(sizes: tuple[int, int], channels: int = 3) -> Callable[[int], Any]:
        return lambda shape: _call(_randn(shape, _batch(shape), channels, sizes[shape], sizes[shape]))

    class VggLike(nn.Module):
        """Conv-BN-ReLU stages and a classifier head written as older CNNs do: ``x.view(n, -1)``."""

        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                block(3, 16, nn.BatchNorm2d), nn.MaxPool2d(2), block(16, 32, nn.BatchNorm2d), nn.MaxPool2d(2)
            )
            self.classifier = nn.Sequential(nn.Linear(32 * 8 * 8, 64), nn.ReLU(inplace=True), nn.Linear(64, 10))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.features(x)
            return self.classifier(x.view(x.size(0), -1))

    class SeparableShuffle(nn.Module):
        """Depthwise-separable convolutions and a PixelShuffle upsampler (a super-resolution net)."""

        def __init__(self) -> None:
            super().__init__()

            def separable(cin: int, cout: int) -> nn.Module:
                return nn.Sequential(
                    nn.Conv2d(cin, cin, 3, padding=1, groups=cin, bias=False),
                    nn.Conv2d(cin, cout, 1, bias=False),
                    nn.BatchNorm2d(cout),
                    nn.Hardswish(),
                )

            self.stem = nn.Conv2d(3, 16, 3, padding=1)
            self.body = nn.Sequential(separable(16, 32), separable(32, 32), separable(32, 12))
            self.shuffle = nn.PixelShuffle(2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.shuffle(self.body(self.stem(x)))
            return y + F.interpolate(x, scale_factor=2.0, mode="nearest")

    class EmbedAttention(nn.Module):
        """Embedding, hand-written attention by einsum, masked_fill on padding, a causal mask."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 32, padding_idx=0)
            self.qkv = nn.Linear(32, 96)
            self.out = nn.Linear(32, 32)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids)
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            scores = torch.einsum("bqd,bkd->bqk", q, k) / 32**0.5
            length = ids.shape[1]
            future = torch.ones(length, length, dtype=torch.bool, device=ids.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
            scores = scores.masked_fill((ids == 0)[:, None, :], -1e4)
            return self.out(torch.einsum("bqk,bkd->bqd", scores.softmax(-1), v))

    def id_inputs(lengths: tuple[int, int], vocab: int = 100) -> Callable[[int], Any]:
        def make(shape: int) -> Any:
            ids = torch.randint(1, vocab, (_batch(shape), lengths[shape]), generator=_seeded(shape))
            ids[-1, -2:] = 0  # padding
            return _call(ids)

        return make

    class RenormedEmbedding(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(100, 8, max_norm=1.0)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.embedding(ids).sum(1)

    class MaskLogic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.linear(x)
            low, high, odd = y < -0.5, y > 0.5, (torch.arange(16) % 2).bool()
            kept = (low | high) & ~odd
            flipped = kept ^ (y.abs() > 1.0)
            return y.masked_fill(kept, 0.0), torch.where(flipped & (y.sum() > 0), y, -y)

    class MixedOutputs(nn.Module):
        """Returns a dict holding tensors, a tuple of tensors, a Python int and a float."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> dict[str, Any]:
            y = self.linear(x)
            return {"logits": y, "pair": (y.relu(), y.sum(-1)), "count": x.shape[0] * 2, "scale": 0.5}

    class CallStyles(nn.Module):
        """A list of tensors, a keyword-only tensor, a Python float and int and a bool flag."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(
            self, xs: list[torch.Tensor], *, bias: torch.Tensor, scale: float = 1.0, repeat: int = 1, flip: bool = False
        ) -> tuple[torch.Tensor, torch.Tensor]:
            total = torch.stack(xs).sum(0) * scale
            for _ in range(repeat):
                total = self.linear(total) + bias
            if flip:
                total = -total
            return total, torch.cat(xs, dim=0)

    def call_style_inputs(shape: int) -> Any:
        batch = _batch(shape)
        xs = [_randn(shape, batch, 8), _randn(shape + 7, batch, 8), _randn(shape + 9, batch, 8)]
        return _call(xs, bias=_randn(shape + 11, 8), scale=0.5, repeat=2, flip=True)

    class InPlace(nn.Module):
        """In-place ops on intermediates and on a clone of the input (add_, mul_, relu_, clamp_)."""

        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(32, 32)
            self.b = nn.Linear(32, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            h.add_(x).relu_()
            y = self.b(h)
            y.mul_(0.5).add_(h, alpha=2.0)
            z = x.clone()
            z[:, :4] = 0.0
            z.clamp_(-1.0, 1.0)
            F.relu(y, inplace=True)
            return y + z

    def features(width: int) -> Callable[[int], Any]:
        return lambda shape: _call(_randn(shape, _batch(shape), width))

    class ViewChains(nn.Module):
        """Views, reshapes and transposes in a chain, some copying, some not (narrow, unbind, flip)."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(24, 24)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            b = x.shape[0]
            y = self.linear(x).view(b, 4, 6).transpose(1, 2).reshape(b, 24)
            z = y.view(b, 2, 3, 4).permute(0, 3, 1, 2).contiguous().flatten(1)
            first, second = z.narrow(1, 0, 12), z[:, 12:]
            rows = torch.stack(z.unflatten(1, (6, 4)).unbind(1), dim=-1)
            return (first * second.flip(-1)).unsqueeze(1).expand(b, 3, 12).mT, rows.squeeze(0)

    class Indexing(nn.Module):
        """index_select, gather, scatter / scatter_add, topk, sort, argmax and take_along_dim."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(16, 16)
            self.register_buffer("columns", torch.tensor([3, 1, 4, 1, 5, 9, 2, 6]))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = self.linear(x)
            picked = y.index_select(1, self.columns)
            values, indices = y.topk(4, dim=-1)
            ordered, order = y.sort(dim=-1, descending=True)
            gathered = y.gather(1, order[:, :5])
            scattered = torch.zeros_like(y).scatter(1, indices, values)
            added = torch.zeros(x.shape[0], 4).scatter_add(1, indices % 4, values)
            return picked, gathered, scattered, added, ordered[:, 0] + y.argmax(-1), order

    class Doubles(nn.Module):
        """A float64 MLP and an int64 path (cumsum, floor division, remainder, bincount-free)."""

        def __init__(self) -> None:
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4)).double()

        def forward(self, x: torch.Tensor, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            steps = counts.cumsum(-1) // 3 + counts % 5 * counts.max()
            return self.mlp(x) * steps[:, :4].to(torch.float64), steps

    def double_inputs(shape: int) -> Any:
        batch = _batch(shape)
        counts = torch.randint(0, 50, (batch, 6), generator=_seeded(shape))
        return _call(_randn(shape, batch, 16, dtype=torch.float64), counts)

    def seq(width: int, lengths: tuple[int, int]) -> Callable[[int], Any]:
        return lambda shape: _call(_randn(shape, _batch(shape), lengths[shape], width))

    return [
        OutsideModel("transformer_decoder", "nn.TransformerDecoder, 2 layers, d 64, causal + memory padding",
                     Decoder, decoder_inputs, atol=1e-4),
        OutsideModel("transformer_full", "nn.Transformer, 2+2 layers, d 64, causal target",
                     FullTransformer, seq2seq_inputs, atol=1e-4),
        OutsideModel("mha_masks", "nn.MultiheadAttention, causal bool mask + key_padding_mask, weights out",
                     MaskedAttention, attention_inputs),
        OutsideModel("gru_bilstm", "nn.GRU(16, 32) then bidirectional 2-layer nn.LSTM(32, 24), h0 given",
                     Recurrent, recurrent_inputs),
        OutsideModel("conv1d_audio", "Conv1d front end (stride 5, GroupNorm, dilation), 1 s at 4 kHz",
                     Audio, lambda shape: _call(_randn(shape, _batch(shape), 1, (4000, 2400)[shape]))),
        OutsideModel("conv3d_clip", "Conv3d + BatchNorm3d + MaxPool3d, 8x32x32 clip",
                     Volume, lambda shape: _call(_randn(shape, _batch(shape), 3, 8, (32, 24)[shape], 32))),
        OutsideModel("unet_small", "UNet: InstanceNorm/GroupNorm, ConvTranspose2d, Upsample, skip cat",
                     UNet, image_inputs((64, 48))),
        OutsideModel("vgg_view_head", "Conv-BN-ReLU stages, classifier on x.view(x.size(0), -1), 32x32",
                     VggLike, image_inputs((32, 32))),
        OutsideModel("separable_shuffle", "depthwise-separable convs, Hardswish, PixelShuffle, interpolate",
                     SeparableShuffle, image_inputs((48, 32))),
        OutsideModel("embed_einsum_attention", "Embedding + einsum attention + masked_fill (causal, padding)",
                     EmbedAttention, id_inputs((24, 16))),
        OutsideModel("mixed_outputs", "returns a dict of tensors, a tuple, a Python int and float",
                     MixedOutputs, features(16)),
        OutsideModel("call_styles", "list of tensors, keyword tensor, Python float/int/bool arguments",
                     CallStyles, call_style_inputs),
        OutsideModel("inplace_ops", "add_, relu_, mul_, clamp_, index assignment on a clone",
                     InPlace, features(32)),
        OutsideModel("view_chains", "view/transpose/reshape/permute/narrow/unbind/flip/expand/mT",
                     ViewChains, features(24)),
        OutsideModel("indexing_sorting", "index_select, gather, scatter(_add), topk, sort, argmax",
                     Indexing, features(16)),
        OutsideModel("float64_int64", "float64 MLP, int64 cumsum / floor division / remainder",
                     Doubles, double_inputs, rtol=1e-7, atol=1e-9),
        OutsideModel("transformer_encoder_masked", "nn.TransformerEncoder (norm_first, gelu) + padding mask",
                     _masked_encoder, lambda shape: _call(_randn(shape, _batch(shape), (20, 12)[shape], 64),
                                                          padding_mask(_batch(shape), (20, 12)[shape])),
                     atol=1e-4),
        OutsideModel("transformer_encoder_nested", "nn.TransformerEncoder as constructed by default (nested "
                     "tensors) + final norm, padding mask", _nested_encoder,
                     lambda shape: _call(_randn(shape, _batch(shape), (20, 12)[shape], 64),
                                         padding_mask(_batch(shape), (20, 12)[shape])), atol=1e-4),
        OutsideModel("bool_mask_logic", "&, |, ^ and ~ of boolean masks, masked_fill and where on them",
                     MaskLogic, features(16)),
        OutsideModel("lstm_cell_loop", "nn.LSTMCell unrolled in Python over 6 steps",
                     _cell_loop, seq(12, (6, 6))),
        OutsideModel("empty_batch", "mixed_outputs' model called with a batch of 2, then of 0",
                     MixedOutputs, lambda shape: _call(_randn(shape, (2, 0)[shape], 16))),
        OutsideModel("embedding_max_norm", "nn.Embedding(max_norm=1): renormalises its weight in place",
                     RenormedEmbedding, id_inputs((10, 6))),
    ]  # fmt: skip


def _masked_encoder() -> Any:
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, 128, activation="gelu", norm_first=True, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

        def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
            return self.encoder(x, src_key_padding_mask=padding)

    return Encoder()


def _nested_encoder() -> Any:
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(64))

        def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
            return self.encoder(x, src_key_padding_mask=padding)

    return Encoder()


def _cell_loop() -> Any:
    import torch
    from torch import nn

    class CellLoop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.LSTMCell(12, 20)
            self.head = nn.Linear(20, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = c = torch.zeros(x.shape[0], 20)
            outputs = []
            for step in range(x.shape[1]):
                h, c = self.cell(x[:, step], (h, c))
                outputs.append(self.head(h))
            return torch.stack(outputs, dim=1)

    return CellLoop()


def _torch_pieces() -> list[OutsideModel]:
    """The second round: stock pieces the first did not cover, and calls written unusually."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Pieces(nn.Module):
        """EmbeddingBag in three modes, a projected bidirectional LSTM, Unfold/Fold, grid_sample."""

        def __init__(self) -> None:
            super().__init__()
            self.bags = nn.ModuleList(nn.EmbeddingBag(50, 8, mode=mode) for mode in ("sum", "mean", "max"))
            self.lstm = nn.LSTM(8, 10, num_layers=2, bidirectional=True, batch_first=True, proj_size=6)

        def forward(self, ids: torch.Tensor, image: torch.Tensor, theta: torch.Tensor) -> tuple[torch.Tensor, ...]:
            bags = torch.stack([bag(ids) for bag in self.bags], dim=1)
            sequence, (hidden, _) = self.lstm(bags)
            columns = F.unfold(image, kernel_size=3, padding=1)
            folded = F.fold(columns, output_size=image.shape[-2:], kernel_size=3, padding=1)
            grid = F.affine_grid(theta, list(image.shape), align_corners=False)
            return sequence, hidden, folded, F.grid_sample(image, grid, mode="bicubic", padding_mode="reflection")

    def piece_inputs(shape: int) -> Any:
        batch = _batch(shape)
        ids = torch.randint(0, 50, (batch, 5), generator=_seeded(shape))
        return _call(ids, _randn(shape, batch, 3, 8, (8, 6)[shape]), _randn(shape + 1, batch, 2, 3) * 0.5)

    class Resampling(nn.Module):
        """interpolate in six modes, adaptive and Lp pooling, PixelUnshuffle, ChannelShuffle, pads."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                F.interpolate(x, size=(11, 13), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bicubic"),
                F.interpolate(x, scale_factor=0.5, mode="area"),
                F.interpolate(x, scale_factor=2, mode="nearest-exact"),
                F.interpolate(x, scale_factor=0.5, mode="bilinear", antialias=True),
                F.adaptive_max_pool2d(x, (3, 5)) + F.lp_pool2d(x, 2, 2)[..., :3, :5].sum(),
                F.pixel_unshuffle(x, 2),
                nn.ChannelShuffle(2)(x),
                F.pad(x, (1, 2, 3, 0), mode="reflect") + F.pad(x, (1, 2, 3, 0), mode="circular"),
            )

    class Numerics(nn.Module):
        """float16/bfloat16/int8/bool paths, FFT and complex outputs, linalg (whose error checks
        become effect tokens under decompose)."""

        def forward(self, x: torch.Tensor, q: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
            half, brain = x.half(), x.bfloat16()
            spectrum = torch.fft.rfft(x, dim=-1)
            spd = a @ a.mT + 4 * torch.eye(a.shape[-1])
            return (
                half * 2 + half.exp(), brain.relu().float(), (q >> 1) & 7, q.clamp(-5, 5), (x > 0).any(-1),
                spectrum, torch.fft.irfft(spectrum * 2, n=x.shape[-1]), torch.view_as_real(spectrum),
                torch.linalg.inv(spd), torch.linalg.solve(spd, a), torch.linalg.cholesky(spd),
            )  # fmt: skip

    def numeric_inputs(shape: int) -> Any:
        batch = _batch(shape)
        q = torch.randint(-100, 100, (batch, 8), generator=_seeded(shape), dtype=torch.int8)
        return _call(_randn(shape, batch, 16), q, _randn(shape + 1, batch, 4, 4))

    class Forms(nn.Module):
        """Called as ``forward(x, y)`` first and ``forward(x, y=y, scale=1.0)`` next (one call to
        eager); returns its input's ``torch.Size``, a string argument, and a transposed result."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(
            self, x: torch.Tensor, y: torch.Tensor, mode: str = "amax", *, scale: float = 1.0
        ) -> tuple[Any, ...]:
            h = self.linear(x) * scale
            return getattr(h, mode)(-1), x.shape, mode, (x.t() + (y * 3).sum(0, keepdim=True).t()).abs()

    def form_inputs(shape: int) -> Any:
        x, y = _randn(shape, _batch(shape), 8), _randn(shape + 1, _batch(shape), 8)
        return _call(x, y) if shape == 0 else _call(x, y=y, scale=1.0)

    class Swap(nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return b, a

    return [
        OutsideModel("bags_lstm_fold_grid", "EmbeddingBag sum/mean/max, LSTM(proj_size) bidirectional, "
                     "Unfold/Fold, affine_grid + grid_sample", Pieces, piece_inputs),
        OutsideModel("resampling", "interpolate (6 modes, antialias), adaptive/Lp pools, PixelUnshuffle, "
                     "ChannelShuffle, reflect/circular pads", Resampling,
                     lambda shape: _call(_randn(shape, _batch(shape), 4, 8, (8, 10)[shape]))),
        OutsideModel("numerics", "float16/bfloat16/int8/bool, rfft/irfft/view_as_real, linalg inv/solve/cholesky",
                     Numerics, numeric_inputs, rtol=1e-3, atol=1e-3),
        OutsideModel("call_forms", "positional then keyword call, default given, Size and str outputs, "
                     "transposed output", Forms, form_inputs),
        OutsideModel("inputs_swapped", "returns its two inputs swapped: no op at all", Swap,
                     lambda shape: _call(_randn(shape, 2), _randn(shape + 1, 3 + shape))),
    ]  # fmt: skip


class Mode(enum.Enum):
    """An enum argument (the third round's ``call_containers``)."""

    SUM = "sum"
    MAX = "max"


def _third_round() -> list[OutsideModel]:
    """The third round: dtypes and layouts of whole models, parametrizations, shared parameters,
    containers, enums and ``None`` in and out, aliases of inputs, strided inputs, integer and
    index arithmetic, data-dependent shapes, state written in forward, ``torch.cond``."""
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.nn.utils import parametrizations, rnn

    def conv_net(channels: int = 3) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4), nn.GELU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64, 10), nn.LayerNorm(10),
        )  # fmt: skip

    def typed(dtype: torch.dtype) -> Callable[[], nn.Module]:
        return lambda: conv_net().to(dtype)

    def typed_images(dtype: torch.dtype) -> Callable[[int], Any]:
        return lambda shape: _call(_randn(shape, _batch(shape), 3, (16, 12)[shape], 16).to(dtype))

    def channels_last() -> nn.Module:
        net = conv_net()
        for parameter in net.parameters():  # as Module.to(memory_format=...), which its stubs lack
            if parameter.dim() == 4:
                parameter.data = parameter.data.contiguous(memory_format=torch.channels_last)
        return net

    def channels_last_images(shape: int) -> Any:
        image = _randn(shape, _batch(shape), 3, (16, 12)[shape], 16)
        return _call(image.to(memory_format=torch.channels_last))

    class SpectralFilter(nn.Module):
        """fft2 of an image times a complex parameter, back by ifft2; complex in, complex out."""

        def __init__(self) -> None:
            super().__init__()
            self.filter = nn.Parameter(torch.randn(4, 8, 5, dtype=torch.complex64))

        def forward(self, x: torch.Tensor, phase: torch.Tensor) -> tuple[torch.Tensor, ...]:
            spectrum = torch.fft.rfft2(x) * self.filter
            rotated = spectrum * torch.polar(torch.ones_like(phase), phase)
            back = torch.fft.irfft2(rotated, s=x.shape[-2:])
            full = torch.fft.ifft(torch.fft.fft(x.to(torch.complex64), dim=-1), dim=-1)
            return (
                back,
                rotated.abs().log1p(),
                rotated.angle(),
                full.conj(),
                torch.view_as_complex(torch.stack([back, x], dim=-1)),
            )

    def spectral_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 4, 8, 8), _randn(shape + 1, 8, 5))

    class Parametrized(nn.Module):
        """weight_norm, spectral_norm and orthogonal parametrizations (evaluated in eval mode)."""

        def __init__(self) -> None:
            super().__init__()
            self.a = parametrizations.weight_norm(nn.Linear(16, 32))
            self.b = parametrizations.spectral_norm(nn.Linear(32, 32))
            self.c = parametrizations.orthogonal(nn.Linear(32, 32))
            self.conv = parametrizations.weight_norm(nn.Conv1d(1, 4, 3, padding=1), dim=0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.c(torch.tanh(self.b(F.relu(self.a(x)))))
            return self.conv(h.unsqueeze(1)).flatten(1)

    class Tied(nn.Module):
        """An embedding tied to the output projection, one layer applied twice, one module
        registered under two names."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 32)
            self.layer = nn.Linear(32, 32)
            self.again = self.layer
            self.head = nn.Linear(32, 100, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids)
            x = torch.tanh(self.layer(x))
            x = torch.tanh(self.again(x) + x)
            return self.head(x) + F.embedding(ids, self.head.weight).sum(-1, keepdim=True)

    class Containers(nn.Module):
        """A dict of tensors, nested tuples and lists, an optional tensor left ``None``, an enum
        and a keyword-only bool; returns nested lists, ``None`` entries and a dict."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(
            self,
            batch: dict[str, torch.Tensor],
            pairs: tuple[tuple[torch.Tensor, torch.Tensor], list[torch.Tensor]],
            mask: torch.Tensor | None = None,
            mode: Mode = Mode.SUM,
            *,
            negate: bool = False,
        ) -> dict[str, Any]:
            (a, b), rest = pairs
            x = self.linear(batch["x"] + batch["y"] * a)
            if mask is not None:
                x = x.masked_fill(mask, 0.0)
            pooled = x.sum(0) if mode is Mode.SUM else x.amax(0)
            if negate:
                pooled = -pooled
            return {"pooled": pooled, "nested": [[x, b + rest[0]], [rest[1] * 2, None]], "none": None}

    def container_inputs(shape: int) -> Any:
        batch = _batch(shape)
        tensors = [_randn(shape + i, batch, 8) for i in range(6)]
        return _call(
            {"x": tensors[0], "y": tensors[1]}, ((tensors[2], tensors[3]), [tensors[4], tensors[5]]),
            None, Mode.MAX, negate=True,
        )  # fmt: skip

    class Aliases(nn.Module):
        """Returns an input unchanged, views of inputs, one tensor twice, a view of an output."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(x)
            return x, x[:, :3], y.t(), h, h, h[0], h.view(-1), x.reshape(-1), y.unsqueeze(0).expand(2, -1, -1)

    def alias_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 8), _randn(shape + 1, 4, batch + 1))

    class Strided(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, t: torch.Tensor, e: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(t) + e
            return h * s, (t + 1).sum(0), e.contiguous() + s

    def strided_inputs(shape: int) -> Any:
        """A transposed input, an expanded (stride 0) input and a strided slice with an offset."""
        batch = _batch(shape)
        transposed = _randn(shape, 8, batch).t()
        expanded = _randn(shape + 1, 1, 8).expand(batch, 8)
        sliced = _randn(shape + 2, batch, 20)[:, 3:19:2]
        return _call(transposed, expanded, sliced)

    class ZeroSize(nn.Module):
        """A dimension of size 0 that is not the batch: empty features, concatenations, sums."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor, empty: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.linear(torch.cat([x, empty], dim=1))
            return h, empty.sum(-1), empty * 2, empty.mean(-1), torch.cat([empty, empty], dim=1)

    def zero_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 8), torch.empty(batch, 0))

    class Bytes(nn.Module):
        """uint8 image arithmetic, bitwise ops and shifts, integer division in both rounding modes."""

        def forward(self, image: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, ...]:
            wide = image.to(torch.int16)
            bright = (wide * 3 // 2).clamp(0, 255).to(torch.uint8)
            mixed = (image ^ 0x5A) | (image & 0x0F) << 2
            return (
                bright, mixed, image >> 3, ~image, torch.bitwise_left_shift(q, 1),
                torch.div(q, 3, rounding_mode="trunc"), torch.div(q, 3, rounding_mode="floor"),
                q % 7, torch.fmod(q, 7), (image.float() / 255).mean(), image.sum(dtype=torch.int64),
                image.max(), torch.remainder(image, 10),
            )  # fmt: skip

    def byte_inputs(shape: int) -> Any:
        batch = _batch(shape)
        image = torch.randint(0, 256, (batch, 3, 8, 8), generator=_seeded(shape), dtype=torch.uint8)
        return _call(image, torch.randint(-1000, 1000, (batch, 16), generator=_seeded(shape), dtype=torch.int32))

    class Scatters(nn.Module):
        """index_put (accumulating), index_add, scatter_reduce, masked_scatter, cumulative ops,
        bucketize/searchsorted, one_hot, sort with stable ties."""

        def __init__(self) -> None:
            super().__init__()
            self.edges: torch.Tensor
            self.register_buffer("edges", torch.linspace(-2, 2, 9))

        def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
            target = torch.zeros(x.shape[0], 6)
            put = target.index_put((torch.arange(x.shape[0])[:, None], index), x[:, : index.shape[1]], accumulate=True)
            added = torch.zeros(6, x.shape[1]).index_add(0, index[0], x[:1].expand(index.shape[1], -1), alpha=0.5)
            reduced = torch.zeros(x.shape[0], 6).scatter_reduce(
                1, index, x[:, : index.shape[1]], "amax", include_self=False
            )
            mean = torch.ones(x.shape[0], 6).scatter_reduce(1, index, x[:, : index.shape[1]], "mean")
            masked = torch.zeros_like(x).masked_scatter(x > 0, x * 10)
            buckets = torch.bucketize(x, self.edges)
            found = torch.searchsorted(self.edges, x.contiguous(), right=True)
            ordered, order = torch.sort(x.round(), dim=-1, stable=True)
            return (
                put, added, reduced, mean, masked, x.cumsum(-1), x.cumprod(-1), x.logcumsumexp(-1),
                x.cummax(-1)[0], buckets, found, F.one_hot(buckets, 10), ordered, order,
            )  # fmt: skip

    def scatter_inputs(shape: int) -> Any:
        batch = _batch(shape)
        index = torch.randint(0, 6, (batch, 4), generator=_seeded(shape))
        return _call(_randn(shape, batch, 12), index)

    class DataDependent(nn.Module):
        """Shapes decided by the data: nonzero, masked_select, unique, boolean-mask indexing."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            positive = x > 0
            return x[positive], torch.nonzero(positive), torch.unique(x.round()), x.masked_select(~positive)

    class WritesState(nn.Module):
        """Writes its inputs in place through views, and a buffer it then reads (the last
        input's mean); counts its calls in another buffer the outputs do not read."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)
            self.last_mean: torch.Tensor
            self.calls: torch.Tensor
            self.register_buffer("last_mean", torch.zeros(8))
            self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            self.last_mean.copy_(x.mean(0))
            x[:, 0].add_(1.0)  # a column of the input, in place
            y.t()[0].mul_(2.0)  # the first column of y, through a transposed view
            y.clamp_(max=1.5)
            return self.linear(x) + self.last_mean + y.sum(-1, keepdim=True)

    class Branches(nn.Module):
        """``torch.cond`` on the data, branches of different ops, and an operand closed over."""

        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Linear(8, 8)
            self.down = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            def positive(v: torch.Tensor) -> torch.Tensor:
                return self.up(v).relu()

            def negative(v: torch.Tensor) -> torch.Tensor:
                return self.down(v).sigmoid() * 2

            return torch.cond(x.sum() > 0, positive, negative, (x,)) + torch.cond(
                x.shape[0] > 2, lambda v: v * 3, lambda v: v - 1, (x,)
            )

    def branch_inputs(shape: int) -> Any:
        x = _randn(shape, _batch(shape), 8)
        return _call(x.abs() if shape == 0 else -x.abs())

    class Attention(nn.Module):
        """nn.MultiheadAttention: sequence-first, kdim/vdim, bias_kv, zero_attn, need_weights off
        (the fast path's conditions), per-head weights, and a float additive mask."""

        def __init__(self) -> None:
            super().__init__()
            self.cross = nn.MultiheadAttention(32, 4, kdim=16, vdim=24, add_bias_kv=True, add_zero_attn=True)
            self.self_attention = nn.MultiheadAttention(32, 2, batch_first=True)

        def forward(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, padding: torch.Tensor) -> Any:
            crossed, per_head = self.cross(x, k, v, average_attn_weights=False)
            y = crossed.transpose(0, 1)
            bias = torch.zeros(y.shape[1], y.shape[1]).masked_fill(
                torch.ones(y.shape[1], y.shape[1], dtype=torch.bool).tril().logical_not(), float("-inf")
            )
            out, none = self.self_attention(y, y, y, key_padding_mask=padding, need_weights=False, attn_mask=bias)
            return out, per_head, none

    def mha_inputs(shape: int) -> Any:
        batch, length = _batch(shape), (10, 7)[shape]
        padding = torch.zeros(batch, length, dtype=torch.bool)
        padding[-1, -2:] = True
        return _call(
            _randn(shape, length, batch, 32), _randn(shape + 1, 6, batch, 16), _randn(shape + 2, 6, batch, 24),
            padding,
        )  # fmt: skip

    class NormsPools(nn.Module):
        """LocalResponseNorm, InstanceNorm with running statistics, AdaptiveMaxPool2d's indices
        into MaxUnpool2d, ceil_mode pooling, AvgPool without padding counted, fractional powers."""

        def __init__(self) -> None:
            super().__init__()
            self.lrn = nn.LocalResponseNorm(3)
            self.instance = nn.InstanceNorm2d(4, track_running_stats=True)
            self.pool = nn.MaxPool2d(2, return_indices=True, ceil_mode=False)
            self.unpool = nn.MaxUnpool2d(2)
            self.avg = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)
            self.adaptive = nn.AdaptiveMaxPool2d((3, 2), return_indices=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            pooled, indices = self.pool(self.instance(self.lrn(x)))
            top, where = self.adaptive(x)
            return self.unpool(pooled, indices, output_size=x.shape), self.avg(x), top, where

    class Bags(nn.Module):
        """EmbeddingBag with offsets and per_sample_weights, an Embedding with padding_idx, one_hot."""

        def __init__(self) -> None:
            super().__init__()
            self.bag = nn.EmbeddingBag(50, 8, mode="sum", padding_idx=1)
            self.embed = nn.Embedding(50, 8, padding_idx=0)

        def forward(self, ids: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
            bags = self.bag(ids, offsets, per_sample_weights=weights)
            return bags + self.embed(ids[offsets]) + F.one_hot(ids[offsets] % 8, 8)

    def bag_inputs(shape: int) -> Any:
        count = (12, 20)[shape]
        ids = torch.randint(0, 50, (count,), generator=_seeded(shape))
        ids[:3] = torch.tensor([0, 1, 0])
        offsets = torch.tensor([0, 4, 9] if shape == 0 else [0, 2, 3, 11, 15])
        return _call(ids, offsets, torch.rand(count, generator=_seeded(shape)))

    class Packed(nn.Module):
        """A GRU over padded sequences packed with pack_padded_sequence (unsorted lengths)."""

        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(8, 16, batch_first=True)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            out, hidden = self.gru(packed)
            padded, _ = rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
            return padded, hidden

    def packed_inputs(shape: int) -> Any:
        batch = _batch(shape)
        lengths = torch.tensor([6] if shape == 0 else [3, 6, 2])
        return _call(_randn(shape, batch, 6, 8), lengths)

    class ConvolutionViews(nn.Module):
        """A convolution's result returned as it is, twice, and through views of it."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.Conv2d(32, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            )  # fmt: skip

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = self.body(x)
            return y, y, y.view(y.shape[0], -1), y.flatten(2), y.permute(0, 2, 3, 1)[..., :4]

    class Convolutions(nn.Module):
        """padding='same' with dilation, reflect/circular padding modes, grouped ConvTranspose2d
        with output_padding and dilation, Conv1d without bias."""

        def __init__(self) -> None:
            super().__init__()
            self.same = nn.Conv2d(4, 8, 3, padding="same", dilation=2)
            self.reflect = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect", groups=2)
            self.circular = nn.Conv2d(8, 8, (3, 5), padding=(1, 2), padding_mode="circular", groups=8)
            self.up = nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=4, dilation=1)
            self.line = nn.Conv1d(4, 6, 5, stride=2, bias=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.up(self.circular(self.reflect(self.same(x))))
            return y, self.line(y.flatten(2))

    return [
        OutsideModel("bfloat16_convnet", "a whole Conv-BN-grouped/dilated conv-Linear-LayerNorm net in bfloat16",
                     typed(torch.bfloat16), typed_images(torch.bfloat16), rtol=2e-2, atol=2e-2),
        OutsideModel("float16_convnet", "the same net in float16 on the CPU",
                     typed(torch.float16), typed_images(torch.float16), rtol=5e-3, atol=5e-3),
        OutsideModel("channels_last_convnet", "the same net, weights and inputs channels_last",
                     channels_last, channels_last_images),
        OutsideModel("complex_spectral", "rfft2 x complex parameter, polar, irfft2, fft/ifft, complex outputs",
                     SpectralFilter, spectral_inputs),
        OutsideModel("parametrized", "weight_norm, spectral_norm, orthogonal parametrizations (eval)",
                     Parametrized, _features_of(16)),
        OutsideModel("tied_parameters", "embedding tied to the head, a layer applied twice under two names",
                     Tied, _ids((10, 6), 100)),
        OutsideModel("call_containers", "dict and nested tuple/list inputs, None argument, enum, keyword-only "
                     "bool; nested list, None and dict outputs", Containers, container_inputs),
        OutsideModel("output_aliases", "returns an input, views of inputs, one tensor twice, views of outputs",
                     Aliases, alias_inputs),
        OutsideModel("strided_inputs", "transposed, expanded (stride 0) and sliced (offset, step 2) inputs",
                     Strided, strided_inputs),
        OutsideModel("zero_size_dims", "a size-0 feature dimension: cat, sum, mean, elementwise",
                     ZeroSize, zero_inputs),
        OutsideModel("uint8_bitwise", "uint8 arithmetic, xor/or/and/not/shifts, div trunc/floor, % and fmod",
                     Bytes, byte_inputs),
        OutsideModel("scatter_cumulative", "index_put(accumulate), index_add, scatter_reduce, masked_scatter, "
                     "cum ops, bucketize, searchsorted, one_hot, stable sort", Scatters, scatter_inputs),
        OutsideModel("data_dependent_shapes", "boolean indexing, nonzero, unique, masked_select",
                     DataDependent, _features_of(12)),
        OutsideModel("writes_inputs_and_state", "in-place writes to input views, a buffer written then read, "
                     "a call counter", WritesState, lambda shape: _call(_randn(shape, _batch(shape), 8),
                                                                        _randn(shape + 1, _batch(shape), 8))),
        OutsideModel("torch_cond", "torch.cond on the data and on a shape, branches closing over modules",
                     Branches, branch_inputs),
        OutsideModel("mha_variants", "MultiheadAttention seq-first, kdim/vdim, bias_kv, zero_attn, per-head "
                     "weights; need_weights=False with padding and float masks", Attention, mha_inputs),
        OutsideModel("norms_pools", "LocalResponseNorm, InstanceNorm (running stats), MaxPool indices + "
                     "MaxUnpool, ceil_mode AvgPool, AdaptiveMaxPool indices", NormsPools,
                     lambda shape: _call(_randn(shape, _batch(shape), 4, (12, 10)[shape], 10))),
        OutsideModel("embedding_bag_offsets", "EmbeddingBag(offsets, per_sample_weights, padding_idx), "
                     "Embedding(padding_idx), one_hot", Bags, bag_inputs),
        OutsideModel("packed_gru", "GRU on pack_padded_sequence (unsorted lengths), pad_packed_sequence",
                     Packed, packed_inputs),
        OutsideModel("conv_returned_views", "a Conv-BN-ReLU result returned twice and through view, flatten, "
                     "permute and a slice", ConvolutionViews, _images((32, 24))),
        OutsideModel("conv_variants", "padding='same' dilated, reflect/circular padding, grouped "
                     "ConvTranspose2d with output_padding, Conv1d", Convolutions,
                     lambda shape: _call(_randn(shape, _batch(shape), 4, (12, 9)[shape], 10))),
    ]  # fmt: skip


def _fourth_round() -> list[OutsideModel]:
    """The fourth round: state sharing storage, linear algebra and signal ops, masks and
    positions made in forward, more stock pieces, autocast and grad contexts, dataclass outputs."""
    import dataclasses

    import torch
    from torch import nn
    from torch.nn import functional as F

    class SharedStorageState(nn.Module):
        """``part`` is registered as a slice of ``full``; forward writes ``full`` and reads ``part``."""

        full: torch.Tensor
        part: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("full", torch.zeros(8))
            self.register_buffer("part", self.full[:4])

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.full.copy_(torch.cat([x.mean(0), x.amax(0)]))
            return x * self.part.exp().sum(), self.part * 2

    class Algebra(nn.Module):
        """einsum with repeated indices, stft/istft, linalg qr/solve/cholesky/det/slogdet/norms,
        baddbmm/addmm/addbmm/addmv with beta and alpha."""

        window: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("window", torch.hann_window(16))
            self.weight = nn.Parameter(torch.randn(4, 4))
            self.bias = nn.Parameter(torch.randn(4))

        def forward(self, a: torch.Tensor, b: torch.Tensor, wave: torch.Tensor) -> tuple[torch.Tensor, ...]:
            spd = a @ a.mT + torch.eye(a.shape[-1]) * 4
            q, r = torch.linalg.qr(a)
            spec = torch.stft(wave, 16, 4, window=self.window, return_complex=True)
            return (
                torch.einsum("bii->bi", a), torch.einsum("bij,bij->b", a, a), q, r, torch.linalg.solve(spd, b),
                torch.linalg.cholesky(spd), torch.linalg.det(spd), torch.linalg.slogdet(spd)[1],
                torch.linalg.norm(a, dim=(-2, -1)), torch.linalg.vector_norm(b, ord=3, dim=-1), spec.abs(),
                torch.istft(spec, 16, 4, window=self.window, length=wave.shape[-1]),
                torch.baddbmm(a, a, a, beta=0.5, alpha=2.0), torch.addmm(self.bias, a[0], self.weight, beta=0.0,
                alpha=-1.5), torch.addbmm(a[0], a, a, beta=0.3, alpha=0.7), torch.addmv(self.bias, self.weight,
                a[0, 0], beta=2),
            )  # fmt: skip

    class MasksPositions(nn.Module):
        """tril/triu masks from torch.ones(device=x.device), roll, flip, arange positions with dtype
        changes, clamp with tensor bounds, nan_to_num and isnan masks, integer overflow."""

        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(64, 8)

        def forward(self, x: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> tuple[torch.Tensor, ...]:
            n = x.shape[-1]
            lower = torch.tril(torch.ones(n, n, device=x.device, dtype=torch.bool))
            upper = torch.triu(torch.ones(n, n, device=x.device), diagonal=1)
            positions = torch.arange(n, device=x.device).unsqueeze(0).expand(x.shape[0], -1)
            angles = positions.to(torch.float32)[..., None] / 10000 ** (torch.arange(0, 8, 2) / 8)
            ratio, logs = x / (x - x.round()), torch.log(x)
            wide = (x * 1000003).to(torch.int32)
            return (
                torch.roll(x[:, None] * x[..., None], (1, -2), (1, 2)).masked_fill(~lower, 0.0),
                x.flip(-1)[:, None] * upper, self.embedding(positions) + torch.cat([angles.sin(), angles.cos()], -1),
                positions.to(torch.int32).cumsum(1).to(torch.int16), x.clamp(low, high), torch.clamp(x, max=high[0]),
                torch.nan_to_num(ratio, nan=0.0, posinf=1e3, neginf=-1e3), torch.nan_to_num(logs),
                torch.isnan(logs) | torch.isinf(ratio), wide * wide * 7, x.to(torch.int8) * 50,
                (wide << 20) >> 3,
            )  # fmt: skip

    class Pieces(nn.Module):
        """Bilinear, CosineSimilarity, PairwiseDistance, ChannelShuffle, unfold/Fold,
        AdaptiveLogSoftmaxWithLoss.log_prob, interpolate by scale factors with align_corners."""

        def __init__(self) -> None:
            super().__init__()
            self.bilinear = nn.Bilinear(8, 6, 5)
            self.cosine, self.distance = nn.CosineSimilarity(dim=1), nn.PairwiseDistance(p=1.5, keepdim=True)
            self.shuffle, self.fold = nn.ChannelShuffle(2), nn.Fold((6, 6), 3, padding=1)
            self.softmax = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 12], div_value=2.0)

        def forward(self, x: torch.Tensor, y: torch.Tensor, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                self.bilinear(x, y), self.cosine(x, x.flip(0)), self.distance(x, x * 0.5), self.shuffle(image),
                self.fold(F.unfold(image, 3, padding=1) * 0.5), self.softmax.log_prob(x),
                F.interpolate(image, scale_factor=1.5, mode="bilinear", align_corners=True),
                F.interpolate(image, scale_factor=0.5, mode="bicubic", align_corners=False),
                F.interpolate(image, scale_factor=(2, 3), mode="bilinear", recompute_scale_factor=True),
            )  # fmt: skip

    @dataclasses.dataclass
    class Result:
        logits: torch.Tensor
        hidden: torch.Tensor

    if Result not in torch.utils._pytree.SUPPORTED_NODES:
        torch.utils._pytree.register_dataclass(Result)

    class Contexts(nn.Module):
        """A shared encoder called twice on two sizes, an autocast(bfloat16) region, no_grad and
        enable_grad blocks, an input updated in place and returned, a registered dataclass out."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
            self.head, self.inner = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> tuple[Result, torch.Tensor]:
            a = self.encoder(x).mean((2, 3))
            b = self.encoder(F.avg_pool2d(x, 2)).mean((2, 3))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = self.inner(a + b).relu()
            with torch.no_grad():
                g = self.head(h.float())
            with torch.enable_grad():
                g = g * self.head(a).sigmoid()
            x.mul_(0.5).add_(g.mean())
            return Result(g, h), x

    def algebra_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 4, 4), _randn(shape + 3, batch, 4, 2), _randn(shape, batch, (64, 48)[shape]))

    def mask_inputs(shape: int) -> Any:
        n = (6, 7)[shape]
        return _call(_randn(shape, _batch(shape), n) * 3, -_randn(shape + 1, n).abs(), _randn(shape + 2, n).abs())

    def piece_inputs(shape: int) -> Any:
        batch = (2, 3)[shape]
        return _call(_randn(shape, batch, 8), _randn(shape + 1, batch, 6), _randn(shape + 2, batch, 4, 6, 6))

    return [
        OutsideModel("shared_storage_state", "a buffer registered as a slice of another: forward writes one, "
                     "reads the other", SharedStorageState, _features_of(4)),
        OutsideModel("algebra_signal", "einsum repeated indices, stft/istft, linalg qr/solve/cholesky/det/slogdet/"
                     "norms, baddbmm/addmm/addbmm/addmv beta/alpha", Algebra, algebra_inputs, rtol=1e-4, atol=1e-4),
        OutsideModel("masks_positions", "tril/triu masks built in forward, roll, flip, arange positions and dtype "
                     "changes, tensor clamp bounds, nan_to_num/isnan, int overflow", MasksPositions, mask_inputs),
        OutsideModel("stock_pieces", "Bilinear, CosineSimilarity, PairwiseDistance, ChannelShuffle, unfold/Fold, "
                     "AdaptiveLogSoftmaxWithLoss.log_prob, interpolate scale factors", Pieces, piece_inputs),
        OutsideModel("contexts_dataclass", "a shared encoder called on two sizes, autocast(bfloat16), no_grad/"
                     "enable_grad, an input updated in place and returned, a dataclass out", Contexts,
                     _images((16, 12)), rtol=1e-2, atol=1e-2),
    ]  # fmt: skip


def _fifth_round() -> list[OutsideModel]:
    """The fifth round, the first to compare output strides: attention whose eager path or
    lowering lays its result out otherwise, norms and convolutions of strided inputs,
    channels-last inputs to a contiguous model, dtype promotion, int8 arithmetic, ties, duplicate
    indices, overlapping and restrided inputs, None in nested outputs, Python scalars that change."""
    import collections

    import torch
    from torch import nn
    from torch.nn import functional as F

    class Attention(nn.Module):
        """MultiheadAttention on itself (eager's fast path at batch > 1), then SDPA with a boolean
        mask, a float mask and a scale, causal, and grouped-query heads."""

        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x: torch.Tensor, mask: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y, weights = self.attention(x, x, x)
            q = y.unflatten(-1, (4, 8)).transpose(1, 2)
            return (
                y,
                weights,
                F.scaled_dot_product_attention(q, q, q, attn_mask=mask),
                F.scaled_dot_product_attention(q, q, q, attn_mask=bias, scale=0.3),
                F.scaled_dot_product_attention(q, q, q, is_causal=True),
                F.scaled_dot_product_attention(q, q[:, :2], q[:, :2], enable_gqa=True),
            )

    def attention_inputs(shape: int) -> Any:
        batch, length = _batch(shape), (6, 9)[shape]
        mask = torch.rand(batch, 1, length, length, generator=_seeded(shape)) > 0.3
        mask[..., 0] = True
        return _call(_randn(shape, batch, length, 32), mask, _randn(shape, 1, 4, length, length))

    class StridedNorms(nn.Module):
        """BatchNorm1d and LayerNorm of a transposed sequence, a convolution of a permuted
        (channels-last strided) map, GroupNorm and InstanceNorm of it."""

        def __init__(self) -> None:
            super().__init__()
            self.batch_norm, self.layer_norm = nn.BatchNorm1d(8), nn.LayerNorm(6)
            self.conv, self.group_norm = nn.Conv2d(8, 4, 1), nn.GroupNorm(2, 8)
            self.instance_norm = nn.InstanceNorm2d(8, affine=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            sequence = x.flatten(1, 2)  # (batch, 6 * 6, 8)
            image = x.permute(0, 3, 1, 2)  # (batch, 8, 6, 6), channels-last strides
            return (
                self.batch_norm(sequence.transpose(1, 2)),
                self.layer_norm(sequence.transpose(1, 2)[..., :6]),
                self.conv(image),
                self.group_norm(image),
                self.instance_norm(image),
            )

    class ChannelsLastOps(nn.Module):
        """A contiguous model's ops on a channels-last input: convolutions, elementwise, pads,
        resampling, pools, pixel shuffles, reductions."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 6, 3)
            self.transposed = nn.ConvTranspose2d(4, 6, 3, stride=2)
            self.depthwise = nn.Conv2d(4, 4, 3, groups=4, padding=1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                self.conv(x), self.transposed(x), self.depthwise(x), torch.relu(x) * 2 + x.mean((2, 3), keepdim=True),
                F.pad(x, (1, 2, 0, 1)), F.pad(x, (1, 1, 1, 1), mode="reflect"), F.interpolate(x, scale_factor=2),
                F.interpolate(x, size=(7, 9), mode="bilinear"), F.avg_pool2d(x, 2), F.adaptive_max_pool2d(x, 3),
                F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2), F.normalize(x, dim=1), x.argmax(1),
                torch.empty_like(x).copy_(x), x.clone(),
            )  # fmt: skip

    class Promotion(nn.Module):
        """bfloat16 and float16 Linears, promotion with int64, float32 and float64, where with
        Python scalars, reductions and softmax into float32."""

        def __init__(self) -> None:
            super().__init__()
            self.bf16, self.fp16 = nn.Linear(8, 8).to(torch.bfloat16), nn.Linear(8, 8).half()

        def forward(self, x: torch.Tensor, ints: torch.Tensor) -> tuple[torch.Tensor, ...]:
            a = self.bf16(x.to(torch.bfloat16))
            return (
                a, a.float() + x, self.fp16(x.half()) * ints, torch.where(ints > 0, a, 0.5),
                torch.where(ints > 0, 1, x.double()), x.half() + a, a.sum(dtype=torch.float32),
                torch.softmax(a, -1, dtype=torch.float32),
            )  # fmt: skip

    def promotion_inputs(shape: int) -> Any:
        batch = _batch(shape)
        return _call(_randn(shape, batch, 8), torch.randint(-2, 3, (batch, 8), generator=_seeded(shape)))

    class Int8Arithmetic(nn.Module):
        """Per-row int8 quantisation, an int32-accumulated matmul with an int8 weight, dequantised;
        int16 packing, shifts, floor division and remainder of negative numbers."""

        w: torch.Tensor
        w_scale: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("w", torch.randint(-127, 127, (16, 8), dtype=torch.int8))
            self.register_buffer("w_scale", torch.rand(16) * 0.01 + 0.001)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5) / 127
            q = torch.clamp(torch.round(x / scale), -128, 127).to(torch.int8)
            acc = torch.matmul(q.to(torch.int32), self.w.to(torch.int32).t())
            packed = (q.to(torch.int16) << 4) | (q.to(torch.int16) & 0xF)
            return acc.float() * scale * self.w_scale, q, packed, acc >> 3, acc // 7, acc % -5

    class Ties(nn.Module):
        """sort (stable or not), topk, kthvalue, mode, argsort and unique_consecutive of rounded
        values, so with ties."""

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            r = torch.round(x * 2) / 2
            return (
                *torch.sort(r, dim=-1), *torch.sort(r, dim=-1, stable=True, descending=True), *torch.topk(r, 3),
                *torch.kthvalue(r, 2), *torch.mode(r), r.argsort(dim=0, stable=True),
                torch.unique_consecutive(r.flatten()),
            )  # fmt: skip

    Head = collections.namedtuple("Head", ["logits", "aux", "extra"])

    class NestedNone(nn.Module):
        """A dict holding a namedtuple holding a list, with None at three depths; an optional
        mask and a keyword-only argument left at its default."""

        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, *, extra: Any = None) -> dict[str, Any]:
            y = self.linear(x)
            if mask is not None:
                y = y.masked_fill(~mask, 0.0)
            scale = extra if extra is not None else y.mean()
            return {"out": Head(y, None, [y.sum(), None, (x, None)]), "none": None, "scale": scale}

    class DuplicateIndices(nn.Module):
        """index_put_ with and without accumulate, scatter_add, scatter_reduce amax, index_reduce
        prod and bincount, at repeated indices."""

        def forward(self, x: torch.Tensor, index: torch.Tensor, source: torch.Tensor) -> tuple[torch.Tensor, ...]:
            summed, ones = x.clone(), x.clone()
            summed.index_put_((index,), source, accumulate=True)
            ones.index_put_((index,), torch.ones_like(source))  # equal values at repeated indices
            columns = index[:, None].expand(-1, x.shape[1])
            return (
                summed, ones, torch.zeros(10, x.shape[1]).scatter_add(0, columns, source),
                torch.zeros(10).scatter_reduce(0, index, source[:, 0], reduce="amax", include_self=False),
                torch.zeros(10).index_reduce(0, index, source[:, 0], "prod"), torch.bincount(index, minlength=10),
            )  # fmt: skip

    def duplicate_inputs(shape: int) -> Any:
        index = (torch.tensor([1, 3, 1, 1, 9, 3]), torch.tensor([0, 0, 0, 0, 2, 2, 5, 9]))[shape]
        return _call(_randn(shape, 10, 3), index, _randn(shape, len(index), 3))

    class ReadsOverlapping(nn.Module):
        def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return x * 2, x @ w, x.sum(0), x.unsqueeze(0) + x.unsqueeze(1)

    def overlapping_inputs(shape: int) -> Any:
        rows = (5, 7)[shape]
        return _call(_randn(shape, rows + 3).as_strided((rows, 4), (1, 1)), _randn(shape, 4, 3))

    class Restrided(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return x + 1, x.reshape(-1) * 2, x.flatten(1).sum(1), x.mT @ x

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, *, scale: float = 0.5, shift: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
            return self.linear(x) * scale + shift, x * scale

    class InferenceModeInside(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.inference_mode():
                y = self.linear(x)
            return y + self.linear(y).tanh()

    class FlattenedConvolution(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.norm = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            y = torch.relu(self.norm(self.conv(x)))
            return y, y.flatten(1), y.reshape(y.shape[0], -1)

    class Padded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(10, 4, padding_idx=0)
            self.bag = nn.EmbeddingBag(10, 4, padding_idx=0, mode="mean")

        def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return self.embedding(ids), self.bag(ids), F.one_hot(ids, 10).float().cumsum(1)

    def dynamic_quantized() -> Any:
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
        return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)

    def channels_last(sizes: tuple[int, int], channels: int) -> Callable[[int], Any]:
        def make(shape: int) -> Any:
            image = _randn(shape, _batch(shape), channels, sizes[shape], sizes[shape])
            return _call(image.contiguous(memory_format=torch.channels_last))

        return make

    return [
        OutsideModel("attention_layouts", "MultiheadAttention on itself (eager's fast path), SDPA with bool/float "
                     "masks, scale, causal, grouped-query heads", Attention, attention_inputs),
        OutsideModel("strided_norms", "BatchNorm1d/LayerNorm of a transposed sequence, Conv2d/GroupNorm/InstanceNorm "
                     "of a permuted map", StridedNorms,
                     lambda shape: _call(_randn(shape, _batch(shape), 6, 6, 8)), atol=1e-4),
        OutsideModel("channels_last_ops", "a contiguous model on a channels-last input: convs, pads, resampling, "
                     "pools, pixel shuffles", ChannelsLastOps, channels_last((6, 8), 4), atol=1e-4),
        OutsideModel("dtype_promotion", "bf16/fp16 Linears, promotion with int64/float64, where with Python scalars",
                     Promotion, promotion_inputs, rtol=1e-2, atol=1e-2),
        OutsideModel("int8_arithmetic", "int8 row quantising, int32-accumulated matmul, shifts, // and % by negatives",
                     Int8Arithmetic, _features_of(8), atol=1e-4),
        OutsideModel("ties", "sort/topk/kthvalue/mode/argsort(stable)/unique_consecutive with ties", Ties,
                     lambda shape: _call(_randn(shape, _batch(shape) + 2, 9))),
        OutsideModel("nested_none", "dict > namedtuple > list outputs with None at three depths, optional mask",
                     NestedNone, lambda shape: _call(_randn(shape, _batch(shape), 8),
                                                     torch.rand(_batch(shape), 4, generator=_seeded(shape)) > 0.5)),
        OutsideModel("duplicate_indices", "index_put_ (accumulate or not), scatter_add/reduce, index_reduce, "
                     "bincount at repeated indices", DuplicateIndices, duplicate_inputs),
        OutsideModel("overlapping_input", "an input whose rows overlap (as_strided, stride (1, 1))", ReadsOverlapping,
                     overlapping_inputs),
        OutsideModel("restrided_input", "a contiguous input, then a transposed one (reshape, flatten, mT @)",
                     Restrided, lambda shape: _call(_randn(shape, 2, 4, 4) if shape == 0
                                                    else _randn(shape, 3, 4, 4).transpose(1, 2))),
        OutsideModel("scalar_kwargs", "keyword-only Python float/int that change between calls (0.5, then 2.0)",
                     Scaled, lambda shape: _call(_randn(shape, _batch(shape), 8), scale=(0.5, 2.0)[shape],
                                                 shift=(1, -3)[shape])),
        OutsideModel("inference_mode_inside", "an inference_mode block in forward", InferenceModeInside,
                     _features_of(8)),
        OutsideModel("conv_flattened", "Conv-BN-ReLU returned with its flatten(1) and reshape (views in eager)",
                     FlattenedConvolution, _images((8, 6)), atol=1e-4),
        OutsideModel("padding_idx", "Embedding/EmbeddingBag with padding_idx, one_hot cumsum", Padded,
                     _ids((5, 4), 10)),
        OutsideModel("dynamic_quantized", "torch.ao quantize_dynamic Linear (qint8)", dynamic_quantized,
                     _features_of(8), rtol=1e-3, atol=1e-3),
    ]  # fmt: skip


def _features_of(width: int) -> Callable[[int], Any]:
    return lambda shape: _call(_randn(shape, _batch(shape), width))


def _images(sizes: tuple[int, int]) -> Callable[[int], Any]:
    return lambda shape: _call(_randn(shape, _batch(shape), 3, sizes[shape], sizes[shape]))


def _ids(lengths: tuple[int, int], vocab: int) -> Callable[[int], Any]:
    def make(shape: int) -> Any:
        import torch

        return _call(torch.randint(0, vocab, (_batch(shape), lengths[shape]), generator=_seeded(shape)))

    return make


# transformers: small configs (2 layers, width 64, 2-4 heads), inputs as transformers takes them.


def _hf(model_class: str, config_class: str, field_name: str | None, **config: Any) -> Callable[[], Any]:
    """``model_class(config_class(**config))``, returning one field of its output, or its whole
    ``ModelOutput`` when ``field_name`` is ``None`` (as a user calls it)."""

    def build() -> Any:
        from srbench_models.hf import OutputOf

        transformers = importlib.import_module("transformers")
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
        return model if field_name is None else OutputOf(model, field_name)

    return build


def _hf_encoder(model_class: str, config_class: str, **config: Any) -> Callable[[], Any]:
    """The encoder half of an encoder-decoder model (``model.get_encoder()``)."""

    def build() -> Any:
        from srbench_models.hf import OutputOf

        transformers = importlib.import_module("transformers")
        model = getattr(transformers, model_class)(getattr(transformers, config_class)(**config))
        return OutputOf(model.get_encoder(), "last_hidden_state")

    return build


def _tokens(
    vocab: int,
    lengths: tuple[int, int] = (32, 20),
    *,
    extra: dict[str, Any] | None = None,
    pixels: int | None = None,
    decoder: tuple[int, int] | None = None,
    labels: int | None = None,
    labels_like_ids: bool = False,
    mask: bool = True,
) -> Callable[[int], Any]:
    """``input_ids`` and ``attention_mask`` (the last sequence padded; none without ``mask``),
    plus ``pixel_values`` of that size, ``decoder_input_ids`` of those lengths, class ``labels``
    below that count or language-model ``labels`` (the ids, -100 where padded), and ``extra``
    keyword arguments (flags) when given."""

    def make(shape: int) -> Any:
        import torch

        batch, length = _batch(shape), lengths[shape]
        ids = torch.randint(0, vocab, (batch, length), generator=_seeded(shape))
        attention = torch.ones(batch, length, dtype=torch.int64)
        attention[-1, length - 4 :] = 0
        kwargs: dict[str, Any] = dict(
            input_ids=ids, **(dict(attention_mask=attention) if mask else {}), **(extra or {})
        )
        if pixels is not None:
            kwargs["pixel_values"] = _randn(shape, batch, 3, pixels, pixels)
        if decoder is not None:
            kwargs["decoder_input_ids"] = torch.randint(0, vocab, (batch, decoder[shape]), generator=_seeded(shape))
        if labels is not None:
            kwargs["labels"] = torch.randint(0, labels, (batch,), generator=_seeded(shape))
        if labels_like_ids:
            kwargs["labels"] = ids.masked_fill(attention == 0, -100)
        return _call(**kwargs)

    return make


def _pixels(sizes: tuple[int, int], channels: int = 3) -> Callable[[int], Any]:
    return lambda shape: _call(pixel_values=_randn(shape, _batch(shape), channels, sizes[shape], sizes[shape]))


def _masked_patches(size: int, patch: int) -> Callable[[int], Any]:
    """Pixels and the ``noise`` that decides which patches ViTMAE masks (drawn at random inside
    the model when not given: no two eager calls would agree)."""

    def make(shape: int) -> Any:
        import torch

        batch = _batch(shape)
        noise = torch.rand(batch, (size // patch) ** 2, generator=_seeded(shape))
        return _call(pixel_values=_randn(shape, batch, 3, size, size), noise=noise)

    return make


def _perceiver_bytes(length: int) -> Callable[[int], Any]:
    """Perceiver's byte-level ``inputs`` (its MLM decoder queries every one of ``length``
    positions, so both calls have that length) with an ``attention_mask``."""

    def make(shape: int) -> Any:
        import torch

        batch = _batch(shape)
        ids = torch.randint(0, 262, (batch, length), generator=_seeded(shape))
        mask = torch.ones(batch, length, dtype=torch.int64)
        mask[-1, length - 5 :] = 0
        return _call(inputs=ids, attention_mask=mask)

    return make


def _features(width: int, lengths: tuple[int, int]) -> Callable[[int], Any]:
    return lambda shape: _call(input_features=_randn(shape, _batch(shape), width, lengths[shape]))


def _speech_features(width: int, lengths: tuple[int, int]) -> Callable[[int], Any]:
    """Speech2Text's (batch, frames, features) ``input_features`` and ``decoder_input_ids``."""

    def make(shape: int) -> Any:
        import torch

        ids = torch.randint(0, 1000, (_batch(shape), (5, 4)[shape]), generator=_seeded(shape))
        return _call(input_features=_randn(shape, _batch(shape), lengths[shape], width), decoder_input_ids=ids)

    return make


def _wave(lengths: tuple[int, int]) -> Callable[[int], Any]:
    return lambda shape: _call(input_values=_randn(shape, _batch(shape), lengths[shape]))


SEQ2SEQ = dict(
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
    vocab_size=1000,
)
AUDIO = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    conv_dim=(32, 32, 32),
    conv_stride=(5, 2, 2),
    conv_kernel=(10, 3, 3),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=4,
)
ENCODER = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
DECODER = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
HF_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def _transformers_models() -> list[OutsideModel]:
    models: list[tuple[str, str, str, str | None, dict[str, Any], Callable[[int], Any]]] = [
        ("hf_roberta", "RobertaModel", "RobertaConfig", "last_hidden_state", ENCODER, _tokens(1000)),
        ("hf_albert", "AlbertModel", "AlbertConfig", "last_hidden_state", dict(ENCODER, embedding_size=32),
         _tokens(1000)),
        ("hf_electra", "ElectraModel", "ElectraConfig", "last_hidden_state", dict(ENCODER, embedding_size=32),
         _tokens(1000)),
        ("hf_gpt_neo", "GPTNeoForCausalLM", "GPTNeoConfig", "logits",
         dict(hidden_size=64, num_layers=2, num_heads=4, vocab_size=1000, attention_types=[[["global", "local"], 1]],
              window_size=8, bos_token_id=0, eos_token_id=0), _tokens(1000)),
        ("hf_llama", "LlamaForCausalLM", "LlamaConfig", "logits",
         dict(DECODER, num_key_value_heads=2), _tokens(1000)),
        ("hf_mistral", "MistralForCausalLM", "MistralConfig", "logits",
         dict(DECODER, num_key_value_heads=2, sliding_window=16), _tokens(1000)),
        ("hf_opt", "OPTForCausalLM", "OPTConfig", "logits",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, vocab_size=1000,
              word_embed_proj_dim=64), _tokens(1000)),
        ("hf_deit", "DeiTModel", "DeiTConfig", "last_hidden_state",
         dict(ENCODER, image_size=32, patch_size=8), _pixels((32, 32))),
        ("hf_swin", "SwinModel", "SwinConfig", "last_hidden_state",
         dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
         _pixels((32, 32))),
        ("hf_regnet", "RegNetModel", "RegNetConfig", "pooler_output",
         dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8), _pixels((48, 32))),
        ("hf_mobilevit", "MobileViTModel", "MobileViTConfig", "last_hidden_state",
         dict(image_size=64, hidden_sizes=[32, 40, 48], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64]),
         _pixels((64, 64))),
        ("hf_wav2vec2", "Wav2Vec2Model", "Wav2Vec2Config", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
              conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
              num_conv_pos_embedding_groups=4, do_stable_layer_norm=True, feat_extract_norm="layer"),
         _wave((4000, 2400))),
        ("hf_bert_all_outputs", "BertModel", "BertConfig", None, dict(ENCODER, attn_implementation="eager"),
         _tokens(1000, extra=dict(output_hidden_states=True, output_attentions=True))),
        ("hf_clip", "CLIPModel", "CLIPConfig", None,
         dict(text_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                               vocab_size=1000),
              vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 image_size=32, patch_size=8), projection_dim=16),
         _tokens(1000, pixels=32)),
        ("hf_t5_seq2seq", "T5ForConditionalGeneration", "T5Config", "logits",
         dict(d_model=64, num_layers=2, num_heads=4, d_kv=16, d_ff=128, vocab_size=1000, decoder_start_token_id=0),
         _tokens(1000, extra=dict(use_cache=False), decoder=(6, 4))),
        ("hf_distilbert_loss", "DistilBertForSequenceClassification", "DistilBertConfig", "loss",
         dict(dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=1000, num_labels=3), _tokens(1000, labels=3)),
        ("hf_segformer", "SegformerForSemanticSegmentation", "SegformerConfig", "logits",
         dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
              decoder_hidden_size=32, num_labels=3), _pixels((32, 48))),
        ("hf_llama_with_cache", "LlamaForCausalLM", "LlamaConfig", None, dict(DECODER, num_key_value_heads=2),
         _tokens(1000)),
        # the second round: more decoders without their cache, encoders, seq2seq, audio and vision
        ("hf_qwen2", "Qwen2ForCausalLM", "Qwen2Config", "logits", dict(DECODER, num_key_value_heads=2, use_cache=False),
         _tokens(1000)),
        ("hf_phi", "PhiForCausalLM", "PhiConfig", "logits", dict(DECODER, use_cache=False), _tokens(1000)),
        ("hf_gpt_neox", "GPTNeoXForCausalLM", "GPTNeoXConfig", "logits", dict(DECODER, use_cache=False), _tokens(1000)),
        ("hf_gemma2", "Gemma2ForCausalLM", "Gemma2Config", "logits",
         dict(DECODER, num_key_value_heads=2, head_dim=16, use_cache=False, sliding_window=8), _tokens(1000)),
        ("hf_falcon", "FalconForCausalLM", "FalconConfig", "logits",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000, use_cache=False),
         _tokens(1000)),
        ("hf_bloom", "BloomForCausalLM", "BloomConfig", "logits",
         dict(hidden_size=64, n_layer=2, n_head=4, vocab_size=1000, use_cache=False), _tokens(1000)),
        ("hf_mpt", "MptForCausalLM", "MptConfig", "logits",
         dict(d_model=64, n_layers=2, n_heads=4, vocab_size=1000, use_cache=False), _tokens(1000)),
        ("hf_llama_labels", "LlamaForCausalLM", "LlamaConfig", "loss", dict(DECODER, num_key_value_heads=2),
         _tokens(1000, extra=dict(use_cache=False), labels_like_ids=True)),
        ("hf_deberta_v2", "DebertaV2Model", "DebertaV2Config", "last_hidden_state",
         dict(ENCODER, relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"]), _tokens(1000)),
        ("hf_mobilebert", "MobileBertModel", "MobileBertConfig", "last_hidden_state",
         dict(ENCODER, embedding_size=32, intra_bottleneck_size=32, num_feedforward_networks=2), _tokens(1000)),
        ("hf_funnel", "FunnelModel", "FunnelConfig", "last_hidden_state",
         dict(d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1], vocab_size=1000), _tokens(1000)),
        ("hf_fnet", "FNetModel", "FNetConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, intermediate_size=128, vocab_size=1000), _tokens(1000, mask=False)),
        ("hf_canine", "CanineModel", "CanineConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, downsampling_rate=2,
              num_hash_buckets=64, num_hash_functions=2), _tokens(1000)),
        ("hf_bert_tuple", "BertModel", "BertConfig", None, ENCODER, _tokens(1000, extra=dict(return_dict=False))),
        ("hf_gpt2_padded", "GPT2LMHeadModel", "GPT2Config", "logits",
         dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, use_cache=False), _tokens(1000)),
        ("hf_bart_seq2seq", "BartForConditionalGeneration", "BartConfig", "logits", dict(SEQ2SEQ, use_cache=False),
         _tokens(1000, decoder=(6, 4))),
        ("hf_hubert", "HubertModel", "HubertConfig", "last_hidden_state", AUDIO, _wave((4000, 2400))),
        ("hf_beit", "BeitModel", "BeitConfig", "last_hidden_state",
         dict(ENCODER, image_size=32, patch_size=8, use_relative_position_bias=True), _pixels((32, 32))),
        ("hf_levit", "LevitModel", "LevitConfig", "last_hidden_state",
         dict(image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2], depths=[1, 1, 1],
              key_dim=[8, 8, 8]), _pixels((64, 64))),
        ("hf_convnextv2", "ConvNextV2Model", "ConvNextV2Config", "pooler_output",
         dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2), _pixels((32, 48))),
        ("hf_vitmae", "ViTMAEModel", "ViTMAEConfig", "last_hidden_state",
         dict(ENCODER, image_size=32, patch_size=8, mask_ratio=0.5), _masked_patches(32, 8)),
        # the third round: other attention and recurrence schemes, seq2seq, video and time series
        ("hf_xlnet", "XLNetModel", "XLNetConfig", "last_hidden_state",
         dict(d_model=64, n_layer=2, n_head=4, d_inner=128, vocab_size=1000), _tokens(1000)),
        ("hf_blenderbot_small", "BlenderbotSmallForConditionalGeneration", "BlenderbotSmallConfig", "logits",
         dict(SEQ2SEQ, use_cache=False), _tokens(1000, decoder=(6, 4))),
        ("hf_gpt_bigcode", "GPTBigCodeForCausalLM", "GPTBigCodeConfig", "logits",
         dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, multi_query=True, use_cache=False), _tokens(1000)),
        ("hf_mamba", "MambaModel", "MambaConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, vocab_size=1000, state_size=8, use_cache=False),
         _tokens(1000, mask=False)),
        ("hf_rwkv", "RwkvModel", "RwkvConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, vocab_size=1000, attention_hidden_size=64, intermediate_size=128,
              context_length=64, use_cache=False), _tokens(1000, mask=False)),
        ("hf_perceiver_mlm", "PerceiverForMaskedLM", "PerceiverConfig", "logits",
         dict(num_latents=16, d_latents=32, d_model=64, num_blocks=1, num_self_attends_per_block=2,
              num_self_attention_heads=4, num_cross_attention_heads=4, vocab_size=262, max_position_embeddings=32,
              qk_channels=32, v_channels=32), _perceiver_bytes(32)),
        ("hf_videomae", "VideoMAEModel", "VideoMAEConfig", "last_hidden_state",
         dict(ENCODER, image_size=32, patch_size=8, num_frames=4, tubelet_size=2),
         lambda shape: _call(pixel_values=_randn(shape, _batch(shape), 4, 3, 32, 32))),
        ("hf_patchtst", "PatchTSTModel", "PatchTSTConfig", "last_hidden_state",
         dict(num_input_channels=3, context_length=32, patch_length=8, patch_stride=8, d_model=32,
              num_hidden_layers=2, num_attention_heads=4, ffn_dim=64),
         lambda shape: _call(past_values=_randn(shape, _batch(shape), 32, 3))),
        # the fourth round: seq2seq, encoders of other schemes, vision and speech
        ("hf_marian", "MarianMTModel", "MarianConfig", "logits",
         dict(SEQ2SEQ, use_cache=False, pad_token_id=0, decoder_start_token_id=0), _tokens(1000, decoder=(6, 4))),
        ("hf_pegasus", "PegasusForConditionalGeneration", "PegasusConfig", "logits", dict(SEQ2SEQ, use_cache=False),
         _tokens(1000, decoder=(6, 4))),
        ("hf_m2m100", "M2M100ForConditionalGeneration", "M2M100Config", "logits", dict(SEQ2SEQ, use_cache=False),
         _tokens(1000, decoder=(6, 4))),
        ("hf_convbert", "ConvBertModel", "ConvBertConfig", "last_hidden_state", dict(ENCODER, embedding_size=64),
         _tokens(1000)),
        ("hf_squeezebert", "SqueezeBertModel", "SqueezeBertConfig", "last_hidden_state",
         dict(ENCODER, embedding_size=64), _tokens(1000)),
        ("hf_splinter", "SplinterModel", "SplinterConfig", "last_hidden_state", ENCODER, _tokens(1000)),
        ("hf_yoso", "YosoModel", "YosoConfig", "last_hidden_state", dict(ENCODER, use_expectation=True), _tokens(1000)),
        ("hf_layoutlm", "LayoutLMModel", "LayoutLMConfig", "last_hidden_state", ENCODER, _tokens(1000)),
        ("hf_esm", "EsmModel", "EsmConfig", "last_hidden_state",
         dict(ENCODER, pad_token_id=1, mask_token_id=2, position_embedding_type="rotary"), _tokens(30)),
        ("hf_dinov2", "Dinov2Model", "Dinov2Config", "last_hidden_state", dict(ENCODER, image_size=32, patch_size=8),
         _pixels((32, 48))),
        ("hf_convnext", "ConvNextModel", "ConvNextConfig", "pooler_output",
         dict(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2), _pixels((32, 48))),
        ("hf_data2vec_vision", "Data2VecVisionModel", "Data2VecVisionConfig", "last_hidden_state",
         dict(ENCODER, image_size=32, patch_size=8, use_relative_position_bias=True), _pixels((32, 32))),
        ("hf_speech2text", "Speech2TextModel", "Speech2TextConfig", "last_hidden_state",
         dict(SEQ2SEQ, use_cache=False, input_feat_per_channel=16, max_source_positions=64, num_conv_layers=2,
              conv_channels=32), _speech_features(16, (40, 32))),
        # the fifth round: mixtures of experts (routing by topk, experts on the tokens routed to
        # them), other decoders, windowed vision, sliding-window attention
        ("hf_mixtral", "MixtralForCausalLM", "MixtralConfig", "logits",
         dict(DECODER, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, use_cache=False),
         _tokens(1000)),
        ("hf_qwen2_moe", "Qwen2MoeForCausalLM", "Qwen2MoeConfig", "logits",
         dict(DECODER, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
              shared_expert_intermediate_size=64, use_cache=False), _tokens(1000)),
        ("hf_olmoe", "OlmoeForCausalLM", "OlmoeConfig", "logits",
         dict(DECODER, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, use_cache=False), _tokens(1000)),
        ("hf_starcoder2", "Starcoder2ForCausalLM", "Starcoder2Config", "logits",
         dict(DECODER, num_key_value_heads=2, use_cache=False), _tokens(1000)),
        ("hf_stablelm", "StableLmForCausalLM", "StableLmConfig", "logits",
         dict(DECODER, num_key_value_heads=2, use_cache=False), _tokens(1000)),
        ("hf_cohere", "CohereForCausalLM", "CohereConfig", "logits",
         dict(DECODER, num_key_value_heads=2, use_cache=False), _tokens(1000)),
        ("hf_swinv2", "Swinv2Model", "Swinv2Config", "last_hidden_state",
         dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
         _pixels((32, 32))),
        ("hf_hiera", "HieraModel", "HieraConfig", "last_hidden_state",
         dict(embed_dim=16, image_size=[64, 64], patch_size=[7, 7], patch_stride=[4, 4], patch_padding=[3, 3],
              depths=[1, 1, 1, 1], num_heads=[1, 1, 2, 2], query_stride=[2, 2], masked_unit_size=[8, 8]),
         _pixels((64, 64))),
        ("hf_longformer", "LongformerModel", "LongformerConfig", "last_hidden_state",
         dict(ENCODER, attention_window=8), _tokens(1000, (32, 16))),
    ]  # fmt: skip
    cases = [
        OutsideModel(name, f"transformers {cls}, small, {'its whole ModelOutput' if out is None else out}",
                     _hf(cls, config_class, out, **cfg), inputs, **HF_TOLERANCE)
        for name, cls, config_class, out, cfg, inputs in models
    ]  # fmt: skip
    cases += [
        OutsideModel("hf_bart_encoder", "transformers BartModel's encoder (BartConfig, small)",
                     _hf_encoder("BartModel", "BartConfig", d_model=64, encoder_layers=2, decoder_layers=2,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                 decoder_ffn_dim=128, vocab_size=1000), _tokens(1000), **HF_TOLERANCE),
        OutsideModel("hf_whisper_encoder", "transformers WhisperModel's encoder (WhisperConfig, small)",
                     _hf_encoder("WhisperModel", "WhisperConfig", d_model=64, encoder_layers=2, decoder_layers=2,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                 decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=50, vocab_size=1000,
                                 pad_token_id=0, bos_token_id=1, eos_token_id=1, decoder_start_token_id=1),
                     _features(16, (100, 100)), **HF_TOLERANCE),
    ]  # fmt: skip
    return cases


def outside_models() -> list[OutsideModel]:
    """Every model of the sweep, torch.nn ones first, the sixth to twenty-eighth rounds' last."""
    from benchmarks.outside_round6 import sixth_round
    from benchmarks.outside_round7 import seventh_round
    from benchmarks.outside_round8 import eighth_round
    from benchmarks.outside_round9 import ninth_round
    from benchmarks.outside_round10 import tenth_round
    from benchmarks.outside_round11 import eleventh_round
    from benchmarks.outside_round12 import twelfth_round
    from benchmarks.outside_round13 import thirteenth_round
    from benchmarks.outside_round14 import fourteenth_round
    from benchmarks.outside_round15 import fifteenth_round
    from benchmarks.outside_round16 import sixteenth_round
    from benchmarks.outside_round17 import seventeenth_round
    from benchmarks.outside_round18 import eighteenth_round
    from benchmarks.outside_round19 import nineteenth_round
    from benchmarks.outside_round20 import twentieth_round
    from benchmarks.outside_round21 import twenty_first_round
    from benchmarks.outside_round22 import twenty_second_round
    from benchmarks.outside_round23 import twenty_third_round
    from benchmarks.outside_round24 import twenty_fourth_round
    from benchmarks.outside_round25 import twenty_fifth_round
    from benchmarks.outside_round26 import twenty_sixth_round
    from benchmarks.outside_round27 import twenty_seventh_round
    from benchmarks.outside_round28 import twenty_eighth_round

    earlier = (_torch_models, _torch_pieces, _third_round, _fourth_round, _fifth_round, _transformers_models)
    return [
        case
        for models in (
            *earlier,
            sixth_round,
            seventh_round,
            eighth_round,
            ninth_round,
            tenth_round,
            eleventh_round,
            twelfth_round,
            thirteenth_round,
            fourteenth_round,
            fifteenth_round,
            sixteenth_round,
            seventeenth_round,
            eighteenth_round,
            nineteenth_round,
            twentieth_round,
            twenty_first_round,
            twenty_second_round,
            twenty_third_round,
            twenty_fourth_round,
            twenty_fifth_round,
            twenty_sixth_round,
            twenty_seventh_round,
            twenty_eighth_round,
        )
        for case in models()
    ]


# --------------------------------------------------------------------------------------------
# The checks.
# --------------------------------------------------------------------------------------------

OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "no_out_variant": {"enable_out_variant": False},
    "no_cleanup": {"cleanup_activations": False},
    "managed_outputs": {"manage_output_tensors": True},
    "decompose": {"decompose": True},
    "streams2": {"streams": 2},  # several streams (CPU threads), kept where they measure faster
    "streams4": {"streams": 4},
    # the multistream program itself: on a busy or small machine the measured sets above keep one
    # stream for every model (46 of 46 of rounds 13-14), so they test the one-stream program
    "streams2_forced": {"streams": 2, "scheduler": "parallel_steps", "measure_choices": False},
    "streams4_forced": {"streams": 4, "scheduler": "parallel_steps", "measure_choices": False},
}
# the concurrency checks (``benchmarks/outside_threads.py``): one module prepared under the option
# set named, two threads calling it at once through a runtime each
THREAD_CHECKS: dict[str, str] = {"threads2": "default", "threads2_forced": "streams2_forced"}
# the inputs-in-other-layouts check (``benchmarks/outside_relaid.py``): one module prepared under
# the option set named on the contiguous call, then called with the arguments relaid
RELAID_CHECKS: dict[str, str] = {"relaid": "default"}
# every check: the option sets, the plugin, the threads, the layouts
CHECKS = (*OPTION_SETS, "plugin", *THREAD_CHECKS, *RELAID_CHECKS)


def _export_refusal(model: Any, inputs: Any) -> str | None:
    """Why ``torch.export`` cannot capture the model at this call, or ``None`` when it can. The
    model and its libraries' caches are left as they were (what export's trace set there is a
    ``FakeTensor`` that the eager calls after this probe would read), as srbench's capture leaves
    them. Exported under ``no_grad``, as srbench's capture exports (``srbench.graph.capture``):
    with grad on, export refused models srbench captures (an ``out=`` argument where a parameter
    requires grad), and the sweep reported them not capturable, unchecked."""
    import torch

    from srbench.graph.function_caches import function_caches_kept
    from srbench.graph.module_snapshot import module_kept

    try:
        with function_caches_kept(model), module_kept(model), torch.no_grad():
            torch.export.export(model, inputs.args, dict(inputs.kwargs), strict=False)
    except Exception as error:  # any refusal of export is the answer
        return error_summary(error)[:200]
    return None


def drifting_answers(model: Any, case: OutsideModel, call: Any) -> str | None:
    """How eager's answer to ``call`` changed between two more calls of it, or ``None`` where it
    held (under the case's tolerance). A model that moves its own state at every call (running
    statistics, a call counter written in place) answers one call otherwise each time: the sixteenth
    round's streaming normaliser. The eager-first order, which prepares srbench on the instance eager
    called, and the two-thread checks, which compare every call with one answer per shape, cannot
    apply to such a model; the fresh order's option sets can (eager's twin and srbench's instance
    start from one state and take the same calls). A first call that fills a cache or initialises
    state, as many do, is not drift: the two calls compared come after it."""
    from srbench.measure.equivalence import EquivalenceError, compare, eager_answer

    before = eager_answer(model, call)
    after = eager_answer(model, call)
    try:
        compare(after.outputs, before.outputs, rtol=case.rtol, atol=case.atol, run="eager's next call")
    except EquivalenceError as error:
        return f"eager's answers drift from call to call: {error_summary(error)}"[:200]
    return None


def _check_option_set(model: Any, case: OutsideModel, calls: Sequence[Any], expected: Sequence[Any],
                      options: Any, plugin: bool) -> tuple[Check, Any]:  # fmt: skip
    """Prepare srbench on shape 0 under ``options`` and run the equivalence protocol; the runtime
    is returned for timing. ``expected`` holds eager's answers to shape 0 and shape 1, and may
    hold a third, to shape 0 again (what run 3 must then give)."""
    from srbench.measure.equivalence import EquivalenceError, check_equivalence
    from srbench.runtimes import RuntimeOptions, get_runtime
    from srbench.static import StaticModule

    runtime: Any
    try:
        if plugin:
            runtime = get_runtime("srbench")(model, calls[0], RuntimeOptions(**_fields(options)))
        else:
            runtime = StaticModule(model, calls[0], options, name=case.name).runtime()
        check_equivalence(
            runtime, calls[0], calls[1], expected[0], expected[1], rtol=case.rtol, atol=case.atol,
            outputs_may_be_reused=options.manage_output_tensors, expected_third=(expected[2:] or [None])[0],
        )  # fmt: skip
        wrong = _aliasing_at_each_shape(runtime, calls, expected) or _layout_check(runtime, calls, expected)
        if wrong is not None:
            return wrong, None
    except EquivalenceError as error:
        return Check(Outcome.WRONG, error_summary(error)[:200]), None
    except Exception as error:  # the sweep reports every failure and goes on
        return Check(Outcome.ERROR, error_summary(error)[:200]), None
    return Check(Outcome.EQUIVALENT), runtime


def check_named(model: Any, case: OutsideModel, calls: Sequence[Any], expected: Sequence[Any],
                name: str) -> tuple[Check, Any]:  # fmt: skip
    """:func:`_check_option_set` under the check named ``name`` (one of :data:`CHECKS`), or the
    concurrency or relaid-inputs check under its option set (no runtime for timing then)."""
    from srbench.options import StaticOptions

    options = StaticOptions(**OPTION_SETS.get(THREAD_CHECKS.get(name, RELAID_CHECKS.get(name, name)), {}))
    if name in THREAD_CHECKS:
        from benchmarks.outside_threads import check_threads

        return check_threads(model, case, calls, expected, options), None
    if name in RELAID_CHECKS:
        from benchmarks.outside_relaid import check_relaid

        return check_relaid(model, case, calls, options), None
    return _check_option_set(model, case, calls, expected, options, plugin=name == "plugin")


def _aliasing_check(runtime: Callable[..., Any], call: Any, expected: Any) -> Check | None:
    """A wrong result where the runtime's outputs share memory with the call's inputs and with
    each other otherwise than eager's (:mod:`srbench.measure.aliasing`), on a fresh copy of the call."""
    from srbench.measure.aliasing import aliasing

    fresh = call.clone()
    shared, eager_shared = aliasing(fresh.call(runtime), fresh), aliasing(expected.outputs, expected.inputs_after)
    if shared == eager_shared:
        return None
    difference = next(f"{a[0]} shares memory with {a[1] or 'nothing'}, eager's with {b[1] or 'nothing'}"
                      for a, b in zip(shared, eager_shared) if a != b)  # fmt: skip
    return Check(Outcome.WRONG, f"outputs alias unlike eager's: {difference}")


def _aliasing_at_each_shape(runtime: Callable[..., Any], calls: Sequence[Any], expected: Sequence[Any]) -> Check | None:
    """:func:`_aliasing_check` at both shapes (since the sixth round): a call of another shape
    can share memory otherwise (``x.contiguous()`` is ``x`` for a contiguous input, a copy of a
    transposed one; one tensor may be passed twice in one call and not in the other)."""
    for shape, (call, answer) in enumerate(zip(calls, expected)):
        wrong = _aliasing_check(runtime, call, answer)
        if wrong is not None:
            return replace(wrong, detail=f"shape {shape}: {wrong.detail}")
    return None


def _layout_check(runtime: Callable[..., Any], calls: Sequence[Any], expected: Sequence[Any]) -> Check | None:
    """A wrong result where an output is laid out otherwise than eager's (its strides, so its
    memory format: :mod:`srbench.measure.layout`), at either shape."""
    from srbench.measure.layout import layout_difference

    for shape, (call, answer) in enumerate(zip(calls, expected)):
        difference = layout_difference(call.clone().call(runtime), answer.outputs)
        if difference is not None:
            return Check(Outcome.WRONG, f"shape {shape}: {difference}")
    return None


def _fields(options: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def _median_us(calls: dict[str, Callable[[], Any]], rounds: int, per_sample: int) -> dict[str, float]:
    """Median microseconds per call of each contender, interleaved (order alternating per round)."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for call in calls.values():  # warm-up
        call()
    for round_ in range(rounds):
        for name in names if round_ % 2 else reversed(names):
            start = time.perf_counter()
            for _ in range(per_sample):
                calls[name]()
            samples[name].append((time.perf_counter() - start) / per_sample)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


def sweep_one(case: OutsideModel, rounds: int, checks: Sequence[str] = CHECKS) -> Row:
    """Build one model, check it under each of ``checks`` (the option sets' names, and ``plugin``
    for the runtime plugin) and time it (the defaults' runtime, where the defaults are checked)."""
    import torch

    from benchmarks.outside_globals import sweep_globals
    from srbench.measure.equivalence import eager_answer

    row = Row(case.name, case.description)
    try:
        torch.manual_seed(0)
        model = sweep_globals().build(case.build).eval()
        calls = [case.make_inputs(0), case.make_inputs(1)]
        expected = [eager_answer(model, call) for call in calls]
    except Exception as error:  # a model this transformers cannot build, or eager cannot run, is reported
        row.checks["build"] = Check(Outcome.UNAVAILABLE, error_summary(error)[:200])
        return row
    refusal = _export_refusal(model, calls[0])
    if refusal is not None:
        row.checks["export"] = Check(Outcome.NOT_CAPTURABLE, refusal)
        return row
    drift = drifting_answers(model, case, calls[0])
    if drift is not None:  # eager's calls moved the state srbench's runs would start from
        row.checks["eager-first"] = Check(Outcome.NOT_APPLICABLE, f"{drift} (checked by --order fresh)"[:200])
        return row
    timed = None
    for name in checks:
        check, runtime = check_named(model, case, calls, expected, name)
        row.checks[name] = check
        if name == "default":
            timed = runtime
    if timed is None or rounds <= 0:
        return row
    eager_call = calls[0].clone()

    def eager() -> Any:
        with torch.inference_mode():
            return eager_call.call(model)

    static_call = calls[0].clone()
    single = _median_us({"eager": eager}, 3, 1)["eager"]
    per_sample = max(1, int(2000 / max(single, 1.0)))  # samples of about 2 ms
    medians = _median_us({"eager": eager, "srbench": lambda: static_call.call(timed)}, rounds, per_sample)
    return replace(row, eager_us=medians["eager"], srbench_us=medians["srbench"])


def _table(rows: Sequence[Row], markdown: bool) -> str:
    header = ("model", f"result ({', '.join(CHECKS)})", "eager us",
              "srbench us", "srbench/eager")  # fmt: skip
    lines = []
    for row in rows:
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
        eager = f"{row.eager_us:.0f}" if row.eager_us is not None else "-"
        static = f"{row.srbench_us:.0f}" if row.srbench_us is not None else "-"
        lines.append((row.name, row.summary(), eager, static, ratio))
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(line)) + " |" for line in lines]
        return "\n".join(out)
    width = max(len(line[0]) for line in lines) if lines else 5
    out = [f"{'model':<{width}}  {'eager us':>9} {'srbench us':>10} {'ratio':>6}  result"]
    out += [f"{n:<{width}}  {e:>9} {s:>10} {r:>6}  {res}" for n, res, e, s, r in lines]
    return "\n".join(out)


class Order(enum.Enum):
    """When srbench is prepared on a model, relative to eager's first call of it."""

    EAGER_FIRST = "eager-first"  # eager's answers first, then srbench prepared on that instance (timed)
    FRESH = "fresh"  # srbench prepared on an instance no one called (``benchmarks/outside_fresh.py``)


def _sweep(case: OutsideModel, order: Order, checks: Sequence[str], rounds: int) -> Row:
    if order is Order.FRESH:
        from benchmarks.outside_fresh import sweep_fresh

        return sweep_fresh(case, checks)
    return sweep_one(case, rounds, checks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated model names (default: every model)")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved timing rounds per model (0: no timing)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the README)")
    parser.add_argument("--json", metavar="FILE", help="also write every check and time as JSON")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--order", type=Order, choices=list(Order), default=Order.EAGER_FIRST, metavar="ORDER",
                        help="eager-first (the default) or fresh: prepare srbench before any eager call, on "
                             "an instance of its own per option set, against a twin built alike (untimed)")  # fmt: skip
    parser.add_argument("--checks", default=",".join(CHECKS),
                        help="comma-separated option sets (and plugin) to check (default: all)")  # fmt: skip
    options = parser.parse_args(argv)

    import torch

    from srbench.runtimes import intra_op_threads

    cases = outside_models()
    if options.list:
        for case in cases:
            print(f"{case.name:<28} {case.description}")
        return 0
    unknown_checks = sorted(set(options.checks.split(",")) - set(CHECKS))
    if unknown_checks:
        print(f"outside_models: unknown check {', '.join(unknown_checks)}", file=sys.stderr)
        return 2
    if options.only:
        wanted = options.only.split(",")
        unknown = sorted(set(wanted) - {case.name for case in cases})
        if unknown:
            print(f"outside_models: unknown model {', '.join(unknown)}; see --list", file=sys.stderr)
            return 2
        cases = [case for case in cases if case.name in wanted]
    from benchmarks.outside_globals import sweep_globals

    rows = []
    with intra_op_threads(1):
        settings = sweep_globals()  # torch's settings now, before any model's library changes them
        for case in cases:
            start = time.perf_counter()
            with settings.per_model():
                row = _sweep(case, options.order, options.checks.split(","), options.rounds)
            rows.append(row)
            took = time.perf_counter() - start
            print(f"{row.name}: {row.summary()} [{took:.0f} s]", file=sys.stderr, flush=True)
    print(f"torch {torch.__version__}, one intra-op thread, medians of {options.rounds} interleaved rounds")
    print(_table(rows, options.markdown))
    if options.json:
        from srbench.fileio import atomic_write_text

        atomic_write_text(options.json, json.dumps([row.to_json() for row in rows], indent=1))
    return 1 if any(row.failed for row in rows) else 0


if __name__ == "__main__":
    # Run as the package's module, so that the later rounds' modules (which import this one as
    # ``benchmarks.outside_models``) and this script share one set of classes.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.outside_models import main as package_main

    sys.exit(package_main())
