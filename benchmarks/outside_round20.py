"""The twentieth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
stock ``torch.nn`` pieces and hand-written models of semantics no earlier round had
(``MultiheadAttention``'s weight and mask variants, a ``PackedSequence`` handed from one recurrent
layer to the next and returned, modules fused for inference, dynamically quantized LSTMs and
statically quantized convolutions, a list of optional masks whose ``None`` moves between calls,
results into ``out=`` buffers, registered dataclass outputs, ``torch.special``'s functions,
unsorted ``topk`` and other selection edges);
and ``transformers`` architectures no earlier round built, called as their users call them
(DeBERTa's disentangled attention, RoFormer's rotary masked-LM loss, CTRL, ViLT's pixel mask,
MobileNetV2's TensorFlow padding, mBART's labels, UMT5, ImageGPT's colour clusters and
Pix2Struct's flattened patches).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

import functools
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded, _tokens
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round18 import _with


def twentieth_round() -> list[OutsideModel]:
    """The twentieth round's models, library by library."""
    return _stock_models() + _quantized_models() + _call_models() + _numeric_models() + _transformers_models()


def _stock_models() -> list[OutsideModel]:
    """``torch.nn``'s attention, recurrent and fusion pieces called as their users call them."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        """``MultiheadAttention`` three ways: no weights asked for under a boolean padding mask;
        per-head weights (``average_attn_weights=False``) under a float padding mask (0 or
        -inf, as tokenizers' masks are turned into); a float causal mask from
        ``generate_square_subsequent_mask`` with the ``is_causal`` hint."""

        def __init__(self) -> None:
            super().__init__()
            self.attention = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x: torch.Tensor, padding: torch.Tensor) -> tuple[torch.Tensor, ...]:
            plain, none = self.attention(x, x, x, key_padding_mask=padding, need_weights=False)
            additive = torch.zeros(padding.shape).masked_fill(padding, float("-inf"))
            heads, weights = self.attention(x, x, x, key_padding_mask=additive, average_attn_weights=False)
            causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            ordered, averaged = self.attention(x, x, x, attn_mask=causal, is_causal=True)
            assert none is None
            return plain, heads, weights, ordered, averaged

    def padded(shape: int) -> Any:
        batch, length = (1, 3)[shape], (6, 9)[shape]
        padding = torch.zeros(batch, length, dtype=torch.bool)
        padding[-1, -2:] = True
        return _call(_randn(shape, batch, length, 32), padding)

    class Packed(nn.Module):
        """Unsorted sequences packed (``enforce_sorted=False``), a bidirectional ReLU ``RNN`` whose
        ``PackedSequence`` goes straight into a ``GRU``, and the GRU's ``PackedSequence`` returned as
        it is (its data, batch sizes and both permutations) with the final states. The initial
        states are given: without them each layer sizes its zeros by the packed batch sizes' first
        value, which export cannot take (``packed_gru``'s refusal)."""

        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.RNN(8, 12, nonlinearity="relu", bidirectional=True, batch_first=True)
            self.gru = nn.GRU(24, 16, batch_first=True)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor]:
            from torch.nn.utils.rnn import pack_padded_sequence

            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            middle, first = self.rnn(packed, x.new_zeros(2, x.shape[0], 12))
            out, last = self.gru(middle, x.new_zeros(1, x.shape[0], 16))
            return out, first, last

    def sequences(shape: int) -> Any:
        lengths = (torch.tensor([5]), torch.tensor([3, 7, 5]))[shape]
        return _call(_randn(shape, len(lengths), int(lengths.max()), 8), lengths)

    def fused() -> nn.Module:
        """Modules fused for inference as deployment scripts do: ``fuse_conv_bn_eval`` and
        ``fuse_linear_bn_eval`` (batch norms with running statistics of their own folded in),
        ``torch.ao.quantization.fuse_modules`` of a conv, batch norm and ReLU into one intrinsic
        module, and an orthogonal parametrization read inside ``parametrize.cached()``."""
        from torch.ao.quantization import fuse_modules
        from torch.nn.utils import fusion, parametrizations, parametrize

        def normed(features: int, dims: int) -> nn.modules.batchnorm._BatchNorm:
            norm = (nn.BatchNorm1d, nn.BatchNorm2d)[dims - 1](features).eval()
            generator = _seeded(features)
            norm.get_buffer("running_mean").copy_(torch.randn(features, generator=generator))
            norm.get_buffer("running_var").copy_(torch.rand(features, generator=generator) + 0.5)
            return norm

        class Fused(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.conv = fusion.fuse_conv_bn_eval(nn.Conv2d(3, 8, 3, padding=1).eval(), normed(8, 2))
                self.block = nn.Sequential(nn.Conv2d(8, 8, 3, groups=2), normed(8, 2), nn.ReLU()).eval()
                fuse_modules(self.block, [["0", "1", "2"]], inplace=True)
                self.head = fusion.fuse_linear_bn_eval(nn.Linear(8, 6).eval(), normed(6, 1))
                self.rotate = parametrizations.orthogonal(nn.Linear(6, 6))

            def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                features = self.block(self.conv(image)).mean((2, 3))
                with parametrize.cached():
                    turned = self.rotate(self.head(features))
                    return turned, self.rotate(turned)

        return Fused()

    return [
        OutsideModel("mha_weight_variants", "nn.MultiheadAttention: need_weights=False under a bool padding mask, "
                     "per-head weights under a float (-inf) padding mask, a float causal mask with is_causal",
                     Attention, padded, **_TOLERANCE),
        OutsideModel("packed_sequence_out", "pack_padded_sequence (unsorted) into a bidirectional relu RNN, its "
                     "PackedSequence into a GRU, the GRU's PackedSequence returned with both final states",
                     Packed, sequences, **_TOLERANCE),
        OutsideModel("fused_for_inference", "fuse_conv_bn_eval, fuse_linear_bn_eval, ao fuse_modules (conv, bn, "
                     "relu), an orthogonal parametrization under parametrize.cached()", fused,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, (10, 13)[shape], 12)), **_TOLERANCE),
    ]  # fmt: skip


def _quantized_models() -> list[OutsideModel]:
    """torch.ao's eager-mode quantization as its users apply it: dynamic, then static."""
    import torch
    from torch import nn

    def dynamic() -> nn.Module:
        """A tagger: an embedding, a 2-layer LSTM and a head, ``quantize_dynamic`` to qint8 (LSTM
        and head), and a float16 dynamic head beside it."""
        from torch.ao.quantization import default_dynamic_qconfig, float16_dynamic_qconfig, quantize_dynamic

        class Tagger(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = nn.Embedding(100, 16)
                self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True)
                self.head = nn.Linear(24, 5)
                self.fp16 = nn.Linear(24, 5)

            def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                states, _ = self.lstm(self.embed(ids))
                return self.head(states), self.fp16(states)

        spec = {nn.LSTM: default_dynamic_qconfig, "head": default_dynamic_qconfig, "fp16": float16_dynamic_qconfig}
        return quantize_dynamic(Tagger().eval(), spec)

    def static() -> nn.Module:
        """A convnet quantized statically (``QuantStub``, conv, batch norm and ReLU fused, x86
        observers calibrated on a batch, ``convert``): quint8 activations, qint8 weights, a
        quantized add of a skip connection by ``FloatFunctional``."""
        from torch.ao import quantization
        from torch.ao.nn.quantized import FloatFunctional

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.quant, self.dequant = quantization.QuantStub(), quantization.DeQuantStub()
                self.conv = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
                self.skip = nn.Conv2d(8, 8, 1)
                self.add = FloatFunctional()
                self.pool = nn.AdaptiveAvgPool2d(1)
                self.head = nn.Linear(8, 4)

            def forward(self, image: torch.Tensor) -> torch.Tensor:
                features = self.conv(self.quant(image))
                features = self.add.add(features, self.skip(features))
                return self.dequant(self.head(self.pool(features).flatten(1)))

        model = Net().eval()
        quantization.fuse_modules(model, [["conv.0", "conv.1", "conv.2"]], inplace=True)
        model.qconfig = quantization.get_default_qconfig("x86")
        quantization.prepare(model, inplace=True)
        model(torch.randn(4, 3, 12, 12, generator=_seeded(11)))
        return quantization.convert(model)

    return [
        OutsideModel("dynamic_quantized_lstm", "torch.ao quantize_dynamic of a 2-layer LSTM and a Linear (qint8) "
                     "and a float16 dynamic Linear", dynamic,
                     lambda shape: _call(torch.randint(0, 100, ((1, 3)[shape], (7, 11)[shape]),
                                                       generator=_seeded(shape))), **_TOLERANCE),
        OutsideModel("static_quantized_convnet", "torch.ao static quantization: QuantStub, fused conv-bn-relu, x86 "
                     "observers calibrated, convert; a FloatFunctional add", static,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, 12, (12, 16)[shape])), **_TOLERANCE),
    ]  # fmt: skip


@functools.cache
def _results_class() -> type:
    """The dataclass ``dataclass_outputs`` returns, registered with ``torch.export`` once per
    process (registering a class twice is refused, and the fresh order builds a model often)."""
    import dataclasses

    import torch

    @dataclasses.dataclass
    class Scored:
        logits: torch.Tensor
        hidden: torch.Tensor
        mask: torch.Tensor | None = None

    torch.export.register_dataclass(Scored)
    return Scored


def _call_models() -> list[OutsideModel]:
    """Call patterns: optional masks that move, results written into ``out=`` buffers, dataclass
    outputs."""
    import torch
    from torch import nn

    class Layered(nn.Module):
        """A stack of layers each given an optional mask, from a list where ``None`` stands for
        no mask, as per-layer attention masks are passed: the first call masks the first layer
        only, the second the second only."""

        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(16, 16) for _ in range(2))

        def forward(self, x: torch.Tensor, masks: list[torch.Tensor | None]) -> torch.Tensor:
            for layer, mask in zip(self.layers, masks):
                x = torch.tanh(layer(x))
                if mask is not None:
                    x = x.masked_fill(mask[..., None], 0.0)
            return x

    def optional(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 8)[shape]
        mask = torch.rand(batch, length, generator=_seeded(shape)) > 0.6
        return _call(_randn(shape, batch, length, 16), [mask, None] if shape == 0 else [None, mask])

    class Written(nn.Module):
        """Results into ``out=`` tensors, as code that avoids allocations writes them: a buffer
        written by ``torch.add(..., out=)`` then read, a matmul into a fresh ``new_empty``, and a
        cumulative sum into a tensor of the wrong size (``out`` resized)."""

        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(16, 8, generator=_seeded(5)) / 4)
            self.register_buffer("scratch", torch.zeros(16))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            torch.add(x.mean(0).mean(0), 1.0, out=self.get_buffer("scratch"))
            projected = torch.matmul(x * self.get_buffer("scratch"), self.weight, out=x.new_empty(0))
            summed = torch.cumsum(projected, dim=1, out=projected.new_empty(1))
            return projected, summed, self.get_buffer("scratch") * 2

    class Scoring(nn.Module):
        """Returns a dataclass registered with ``torch.export.register_dataclass`` (its optional
        field left ``None`` or set), as libraries return their own output classes."""

        def __init__(self) -> None:
            super().__init__()
            self.encode = nn.Linear(12, 16)
            self.score = nn.Linear(16, 3)

        def forward(self, x: torch.Tensor, with_mask: bool) -> Any:
            hidden = torch.relu(self.encode(x))
            mask = hidden.sum(-1) > 0 if with_mask else None
            return _results_class()(logits=self.score(hidden), hidden=hidden, mask=mask)

    return [
        OutsideModel("optional_list_masks", "hand-written: a list of per-layer masks with None standing for none, "
                     "None first masked, then the other way round", Layered, optional, **_TOLERANCE),
        OutsideModel("out_arguments", "hand-written: torch.add(out=) into a buffer then read, matmul(out=) into "
                     "new_empty(0), cumsum(out=) into a tensor of the wrong size", Written,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (4, 6)[shape], 16)), **_TOLERANCE),
        OutsideModel("dataclass_outputs", "hand-written: a dataclass output registered with "
                     "torch.export.register_dataclass, its optional field None then set", Scoring,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 5, 12), bool(shape)), **_TOLERANCE),
    ]  # fmt: skip


def _numeric_models() -> list[OutsideModel]:
    """``torch.special``'s functions and selection edges, where a decomposition's formula shows."""
    import torch
    from torch import nn

    class Special(nn.Module):
        """``torch.special`` as statistics and physics code calls it, on positive and signed
        arguments: erfcx, log_ndtr, ndtri, i0e, i1e, xlog1py, zeta, polygamma, digamma,
        multigammaln, sinc, entr, logit with eps, Bessel functions and orthogonal polynomials."""

        def forward(self, x: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, ...]:
            special = torch.special
            positive = x.abs() + 0.5
            return (special.erfcx(x), special.log_ndtr(x), special.ndtri(p), special.i0e(x), special.i1e(x),
                    special.xlog1py(x, positive), special.zeta(positive + 1, positive),
                    special.polygamma(2, positive), special.digamma(positive), special.multigammaln(positive + 1, 3),
                    special.sinc(x), special.entr(p), special.logit(p, eps=0.05), special.bessel_j0(x),
                    special.bessel_j1(x), special.modified_bessel_k0(positive),
                    special.scaled_modified_bessel_k1(positive), special.spherical_bessel_j0(x),
                    special.chebyshev_polynomial_t(p, 5), special.hermite_polynomial_h(p, 4),
                    special.legendre_polynomial_p(p, 3))  # fmt: skip

    def arguments(shape: int) -> Any:
        size = ((2, 8), (3, 13))[shape]
        return _call(_randn(shape, *size) * 3, torch.rand(*size, generator=_seeded(shape + 9)) * 0.98 + 0.01)

    class Selection(nn.Module):
        """Selection edges: ``topk(sorted=False)`` (its values gathered back by its indices),
        ``searchsorted`` through a ``sorter`` with ``side="right"``, ``bucketize(out_int32=True,
        right=True)``, ``where`` of two Python scalars, ``nan_to_num`` by default and with values,
        ``masked_fill`` by a broadcast mask, ``cumsum`` of a bool, ``scatter_reduce`` mean without
        self, ``index_put_`` accumulating at repeated indices, ``histogram`` with weights."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("edges", torch.tensor([3.0, -1.0, 0.5, 2.0, -2.5]))

        def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values, where = x.topk(3, dim=-1, sorted=False)
            edges = self.get_buffer("edges")
            order = edges.argsort()
            found = torch.searchsorted(edges, x.contiguous(), side="right", sorter=order)
            buckets = torch.bucketize(x, edges.sort().values, out_int32=True, right=True)
            signs = torch.where(x > 0, 1.5, -2)
            broken = torch.log(x) / (x - x.round())
            mask = (x.sum(0, keepdim=True) > 0).expand_as(x)
            counts = (x > 0).cumsum(-1)
            reduced = torch.zeros(x.shape[0], 4).scatter_reduce(1, index, x[:, : index.shape[1]], "mean",
                                                                include_self=False)  # fmt: skip
            accumulated = torch.zeros(x.shape[0], 4).index_put_((torch.zeros_like(index), index),
                                                                x[:, : index.shape[1]], accumulate=True)  # fmt: skip
            histogram, bins = torch.histogram(x.flatten(), bins=5, range=(-2.0, 2.0), weight=x.flatten().abs())
            return (values, x.gather(-1, where), found, buckets, signs, torch.nan_to_num(broken),
                    torch.nan_to_num(broken, nan=0.0, posinf=9.0, neginf=-9.0), x.masked_fill(mask, -1.0), counts,
                    reduced, accumulated, histogram, bins)  # fmt: skip

    def selections(shape: int) -> Any:
        batch = (2, 4)[shape]
        index = torch.randint(0, 4, (batch, 6), generator=_seeded(shape))
        return _call(_randn(shape, batch, (9, 12)[shape]) * 2, index)

    return [
        OutsideModel("special_functions", "torch.special: erfcx, log_ndtr, ndtri, i0e/i1e, xlog1py, zeta, "
                     "polygamma, digamma, multigammaln, sinc, entr, logit(eps), Bessel, orthogonal polynomials",
                     Special, arguments, **_TOLERANCE),
        OutsideModel("selection_edges", "topk(sorted=False), searchsorted(sorter, right), bucketize(out_int32), "
                     "where of scalars, nan_to_num, broadcast masked_fill, bool cumsum, scatter_reduce mean, "
                     "index_put_ accumulate, histogram", Selection, selections, **_TOLERANCE),
    ]  # fmt: skip


def _pixel_mask(shape: int, batch: int, length: int) -> dict[str, Any]:
    """ViLT's image and its pixel mask (the last image padded on the right by a quarter)."""
    import torch

    size = (32, 48)[shape]
    mask = torch.ones(batch, size, size, dtype=torch.int64)
    mask[-1, :, -size // 4 :] = 0
    return dict(pixel_values=_randn(shape, batch, 3, size, size), pixel_mask=mask)


def _colours(shape: int) -> Any:
    """ImageGPT's call: colour-cluster ids of a 4x4 image (its start token first) and the ids
    as labels (the model shifts them)."""
    import torch

    batch = (1, 3)[shape]
    ids = torch.randint(0, 16, (batch, 16), generator=_seeded(shape))
    return _call(input_ids=ids, labels=ids)


def _flattened(shape: int) -> Any:
    """Pix2Struct's call: flattened patches (row and column ids first, then a patch's pixels),
    the last image's last patches padding (mask 0, ids 0)."""
    import torch

    batch, patches = (1, 2)[shape], (12, 16)[shape]
    rows = torch.arange(patches) // 4 + 1
    ids = torch.stack((rows, torch.arange(patches) % 4 + 1), -1).float().expand(batch, -1, -1)
    pixels = _randn(shape, batch, patches, 3 * 4 * 4)
    mask = torch.ones(batch, patches)
    mask[-1, -3:] = 0
    flattened = torch.cat((ids, pixels), -1) * mask[..., None]
    return _call(flattened_patches=flattened, attention_mask=mask)


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    seq2seq = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000,
                   max_position_embeddings=64, use_cache=False)  # fmt: skip
    models: list[HfCase] = [
        ("hf_deberta", "DebertaModel", "DebertaConfig", "last_hidden_state",
         dict(encoder, relative_attention=True, max_relative_positions=16, pos_att_type=["c2p", "p2c"],
              max_position_embeddings=64), _tokens(1000, (12, 20))),
        ("hf_roformer_mlm", "RoFormerForMaskedLM", "RoFormerConfig", None,
         dict(encoder, embedding_size=64, max_position_embeddings=64),
         _tokens(1000, (12, 20), labels_like_ids=True)),
        ("hf_ctrl", "CTRLLMHeadModel", "CTRLConfig", "logits",
         dict(n_embd=64, n_layer=2, n_head=4, dff=128, vocab_size=1000, n_positions=64, use_cache=False),
         _tokens(1000, (12, 20))),
        ("hf_vilt_pixel_mask", "ViltModel", "ViltConfig", "last_hidden_state",
         dict(encoder, image_size=48, patch_size=8, max_position_embeddings=40, max_image_length=-1),
         _with(_tokens(1000, (8, 12)), _pixel_mask)),
        ("hf_mobilenet_v2_tf", "MobileNetV2Model", "MobileNetV2Config", "pooler_output",
         dict(image_size=40, depth_multiplier=0.35, tf_padding=True, finegrained_output=False),
         lambda shape: _call(pixel_values=_randn(shape, (1, 2)[shape], 3, (40, 45)[shape], (40, 37)[shape]))),
        ("hf_mbart_labels", "MBartForConditionalGeneration", "MBartConfig", None,
         dict(seq2seq, pad_token_id=1, decoder_start_token_id=2), _tokens(1000, (12, 20), labels_like_ids=True)),
        ("hf_umt5", "UMT5Model", "UMT5Config", "last_hidden_state",
         dict(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000, use_cache=False,
              relative_attention_num_buckets=8), _tokens(1000, (12, 20), decoder=(5, 7))),
        ("hf_imagegpt", "ImageGPTForCausalImageModeling", "ImageGPTConfig", None,
         dict(n_embd=64, n_layer=2, n_head=4, vocab_size=17, n_positions=16, use_cache=False), _colours),
        ("hf_pix2struct_patches", "Pix2StructVisionModel", "Pix2StructVisionConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, d_ff=128, d_kv=16, patch_embed_hidden_size=48,
              seq_len=16), _flattened),
    ]  # fmt: skip
    return _hf_cases(models)
