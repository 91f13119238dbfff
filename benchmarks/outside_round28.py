"""The twenty-eighth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
models from libraries no earlier round built, called as their users call them. transformers
architectures with the heads users put on them (token classification with per-token labels,
question answering with the answer's span, multiple choice over a choice axis, image and video
classification with labels, seq2seq with decoder ids, prompt-tuned seq2seq, a mixture of experts),
and transformers' own recipe for exporting a decoder to ExecuTorch
(``TorchExportableModuleWithStaticCache``: a static key-value cache kept in buffers written in
place, a prompt then a decode step); snntorch's spiking neurons (membrane states in and out, a
hidden state kept by the module and reset by ``snntorch.utils.reset``, spikes by a surrogate
``autograd.Function``) and geoopt's Poincaré ball (Möbius operations, a ``ManifoldParameter``).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import HF_TOLERANCE, OutsideModel, _call, _pixels, _randn, _seeded, _tokens
from benchmarks.outside_round9 import _module
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round22 import _rows


def twenty_eighth_round() -> list[OutsideModel]:
    """The twenty-eighth round's models, library by library."""
    return _transformers_models() + _static_cache_models() + _spiking_models() + _hyperbolic_models()


_ENCODER = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                max_position_embeddings=64)  # fmt: skip
_SEQ2SEQ = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000, max_position_embeddings=64)  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, with the heads and arguments of their tasks."""
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                   use_cache=False)  # fmt: skip
    models: list[HfCase] = [
        ("hf_xlm_roberta_token_labels", "XLMRobertaForTokenClassification", "XLMRobertaConfig", None,
         dict(_ENCODER, num_labels=5, pad_token_id=1), _token_labels(1000, 5)),
        ("hf_data2vec_text_qa_span", "Data2VecTextForQuestionAnswering", "Data2VecTextConfig", None,
         dict(_ENCODER, pad_token_id=1), _answer_spans(1000)),
        ("hf_roberta_prelayernorm_choice", "RobertaPreLayerNormForMultipleChoice", "RobertaPreLayerNormConfig", None,
         dict(_ENCODER, pad_token_id=1), _choices(1000)),
        ("hf_resnet_labels", "ResNetForImageClassification", "ResNetConfig", None,
         dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="bottleneck", num_labels=4),
         _labelled_pixels((32, 48), 4)),
        ("hf_vivit_video", "VivitForVideoClassification", "VivitConfig", "logits",
         dict(_ENCODER, image_size=32, num_frames=4, tubelet_size=[2, 8, 8], num_labels=3), _video(4, 32)),
        ("hf_fsmt_seq2seq", "FSMTForConditionalGeneration", "FSMTConfig", "logits",
         dict(_SEQ2SEQ, langs=["en", "de"], src_vocab_size=1000, tgt_vocab_size=1000, pad_token_id=1,
              decoder_start_token_id=2, use_cache=False), _decoder_masked(1000)),
        ("hf_bigbird_pegasus_seq2seq", "BigBirdPegasusForConditionalGeneration", "BigBirdPegasusConfig", "logits",
         dict(_SEQ2SEQ, attention_type="original_full", use_cache=False), _tokens(1000, (12, 9), decoder=(6, 5))),
        ("hf_mvp_prompt", "MvpForConditionalGeneration", "MvpConfig", "logits",
         dict(_SEQ2SEQ, use_prompt=True, prompt_length=4, prompt_mid_dim=32, use_cache=False),
         _tokens(1000, (12, 9), decoder=(6, 5))),
        ("hf_phimoe", "PhimoeForCausalLM", "PhimoeConfig", "logits",
         dict(decoder, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64),
         _tokens(1000, (12, 16))),
    ]  # fmt: skip
    return _hf_cases(models)


def _token_labels(vocab: int, classes: int) -> Callable[[int], Any]:
    """``input_ids``, ``attention_mask`` and a label per token (-100 where padded), for a loss."""

    def make(shape: int) -> Any:
        import torch

        call = _tokens(vocab, (12, 16))(shape)
        ids, mask = call.kwargs["input_ids"], call.kwargs["attention_mask"]
        labels = torch.randint(0, classes, ids.shape, generator=_seeded(shape + 3)).masked_fill(mask == 0, -100)
        return _call(**call.kwargs, labels=labels)

    return make


def _answer_spans(vocab: int) -> Callable[[int], Any]:
    """``input_ids``, ``attention_mask`` and ``token_type_ids`` (question then context), with the
    answer's ``start_positions`` and ``end_positions``, for the span loss."""

    def make(shape: int) -> Any:
        import torch

        call = _tokens(vocab, (12, 16))(shape)
        ids = call.kwargs["input_ids"]
        batch, length = ids.shape
        types = torch.zeros_like(ids)
        types[:, length // 2 :] = 1
        start = torch.randint(length // 2, length - 4, (batch,), generator=_seeded(shape + 3))
        return _call(**call.kwargs, token_type_ids=types, start_positions=start, end_positions=start + 2)

    return make


def _choices(vocab: int) -> Callable[[int], Any]:
    """(batch, choices, length) ``input_ids`` and ``attention_mask`` (each last choice padded),
    and the right choice's ``labels``: 2 choices, then 3."""

    def make(shape: int) -> Any:
        import torch

        batch, choices, length = (1, 3)[shape], (2, 3)[shape], (10, 14)[shape]
        ids = torch.randint(0, vocab, (batch, choices, length), generator=_seeded(shape))
        mask = torch.ones_like(ids)
        mask[:, -1, length - 3 :] = 0
        labels = torch.randint(0, choices, (batch,), generator=_seeded(shape + 3))
        return _call(input_ids=ids, attention_mask=mask, labels=labels)

    return make


def _labelled_pixels(sizes: tuple[int, int], classes: int) -> Callable[[int], Any]:
    """``pixel_values`` with class ``labels``, for the classification loss."""

    def make(shape: int) -> Any:
        import torch

        call = _pixels(sizes)(shape)
        batch = call.kwargs["pixel_values"].shape[0]
        return _call(**call.kwargs, labels=torch.randint(0, classes, (batch,), generator=_seeded(shape)))

    return make


def _decoder_masked(vocab: int) -> Callable[[int], Any]:
    """Encoder and decoder ids with both attention masks, as fine-tuning passes them (FSMT's
    decoder otherwise tests its ids for padding in an ``if``, which export refuses)."""

    def make(shape: int) -> Any:
        import torch

        call = _tokens(vocab, (12, 9), decoder=(6, 5))(shape)
        mask = torch.ones_like(call.kwargs["decoder_input_ids"])
        mask[-1, -2:] = 0
        return _call(**call.kwargs, decoder_attention_mask=mask)

    return make


def _video(frames: int, size: int) -> Callable[[int], Any]:
    """(batch, frames, 3, size, size) ``pixel_values``."""
    return lambda shape: _call(pixel_values=_randn(shape, (1, 3)[shape], frames, 3, size, size))


def _static_cache_models() -> list[OutsideModel]:
    """transformers' ExecuTorch recipe: a decoder behind a static cache kept in its buffers."""
    return [
        OutsideModel("hf_static_cache_decode", "transformers TorchExportableModuleWithStaticCache on a small "
                     "Qwen3ForCausalLM: key-value cache buffers written in place, a 6-token prompt (cache_position "
                     "0-5) then one decode step (cache_position 6)", _static_cache, _cache_steps, **HF_TOLERANCE),
        OutsideModel("hf_seq2seq_static_decoder", "transformers Seq2SeqLMDecoderExportableModuleWithStaticCache on a "
                     "small T5ForConditionalGeneration: self-attention cache in buffers, cross-attention in a "
                     "DynamicCache; 3 decoder tokens (positions 0-2) then one (position 3) on one encoder output",
                     _seq2seq_decoder, _decoder_steps, **HF_TOLERANCE),
    ]  # fmt: skip


def _static_cache() -> Any:
    """A small Qwen3 with ``cache_implementation="static"``, wrapped as transformers' ExecuTorch
    export recipe wraps it (batch 1, 16 cache slots)."""
    transformers = _module("transformers")
    executorch = _module("transformers.integrations.executorch")
    config = transformers.Qwen3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      head_dim=16, intermediate_size=128, vocab_size=1000, use_cache=True)  # fmt: skip
    model = transformers.Qwen3ForCausalLM(config).eval()
    model.generation_config.cache_implementation = "static"
    return executorch.TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=16)


def _cache_steps(shape: int) -> Any:
    """The prompt (6 tokens at positions 0-5), then the next token at position 6."""
    import torch

    start, length = (0, 6)[shape], (6, 1)[shape]
    ids = torch.randint(0, 1000, (1, length), generator=_seeded(shape))
    return _call(input_ids=ids, cache_position=torch.arange(start, start + length))


def _seq2seq_decoder() -> Any:
    """A small T5's decoder and head as transformers' ExecuTorch recipe wraps them (batch 1, 16
    cache slots)."""
    transformers = _module("transformers")
    executorch = _module("transformers.integrations.executorch")
    config = transformers.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=1000,
                                   decoder_start_token_id=0, use_cache=True)  # fmt: skip
    model = transformers.T5ForConditionalGeneration(config).eval()
    return executorch.Seq2SeqLMDecoderExportableModuleWithStaticCache(model, max_static_cache_length=16, batch_size=1)


def _decoder_steps(shape: int) -> Any:
    """Positions 0-2, then position 3, attending to one encoder output (one generation's steps)."""
    import torch

    start, length = (0, 3)[shape], (3, 1)[shape]
    ids = torch.randint(0, 1000, (1, length), generator=_seeded(shape))
    encoded = _randn(7, 1, 9, 64)
    return _call(ids, encoded, torch.arange(start, start + length))


def _spiking_models() -> list[OutsideModel]:
    """snntorch: leaky integrate-and-fire neurons stepped over time as its tutorials write them."""
    import torch
    from torch import nn

    class Spiking(nn.Module):
        """A spiking network over the input's time axis, stepped as snntorch's tutorials step it: a
        ``Leaky`` whose membrane is the loop's variable (``init_leaky()``, then ``spk, mem =
        lif(cur, mem)``), a ``Synaptic`` in an ``nn.Sequential`` keeping its synaptic current and
        membrane in itself (``init_hidden=True``; ``snntorch.utils.reset`` on the ``Sequential``
        zeroes them at each call, over every ``Synaptic`` instance of the process), a recurrent
        ``RLeaky`` with a learned feedback ``Linear``; the spikes (a surrogate
        ``autograd.Function``'s forward: a step) and the last membranes out."""

        def __init__(self) -> None:
            super().__init__()
            snn = _module("snntorch")
            self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)
            self.lif = snn.Leaky(beta=0.9, spike_grad=snn.surrogate.fast_sigmoid(slope=25))
            self.hidden = nn.Sequential(
                nn.Linear(32, 32), snn.Synaptic(alpha=0.8, beta=0.7, init_hidden=True, reset_mechanism="zero")
            )
            self.rlif = snn.RLeaky(beta=0.85, linear_features=8, learn_recurrent=True)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            _module("snntorch.utils").reset(self.hidden)
            mem = self.lif.init_leaky()
            spk2, mem2 = self.rlif.init_rleaky()
            spikes = []
            for step in range(x.shape[1]):
                spk, mem = self.lif(self.fc1(x[:, step]), mem)
                spk2, mem2 = self.rlif(self.fc2(self.hidden(spk)), spk2, mem2)
                spikes.append(spk2)
            synaptic: Any = self.hidden[1]
            return torch.stack(spikes, 1), mem, mem2, synaptic.mem

    def driven(shape: int) -> Any:
        """Currents strong enough to fire: (batch, steps, 16), scaled up."""
        return _call(_rows(shape).args[0] * 3.0)

    return [
        OutsideModel("snntorch_leaky_synaptic", "snntorch: Leaky (membrane in and out), Synaptic (init_hidden, "
                     "its Sequential reset by utils.reset each call), RLeaky (learned recurrence), fast_sigmoid "
                     "surrogate, over the time axis", Spiking, driven, **_TOLERANCE),
    ]  # fmt: skip


def _hyperbolic_models() -> list[OutsideModel]:
    """geoopt: hyperbolic classifiers on the hyperboloid and on the Poincaré ball, with parameters on
    the manifold."""
    import torch
    from torch import nn

    class Hyperbolic(nn.Module):
        """Features mapped onto the ball (``expmap0``), a Möbius matrix-vector product and a
        Möbius addition of a bias that is a ``ManifoldParameter`` (a ``Parameter`` subclass that
        knows its manifold), distances to class prototypes on the ball (``dist``, artanh near
        the boundary) and the point mapped back (``logmap0``), as hyperbolic classifiers do."""

        def __init__(self) -> None:
            super().__init__()
            geoopt = _module("geoopt")
            self.ball = geoopt.PoincareBall(c=1.0)
            self.proj = nn.Linear(16, 8)
            self.weight = nn.Parameter(torch.randn(8, 8) * 0.3)
            self.bias = geoopt.ManifoldParameter(self.ball.expmap0(torch.randn(8) * 0.1), manifold=self.ball)
            self.prototypes = geoopt.ManifoldParameter(self.ball.expmap0(torch.randn(5, 8) * 0.5), manifold=self.ball)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.ball.expmap0(self.proj(x))
            h = self.ball.mobius_add(self.ball.mobius_matvec(self.weight, h), self.bias)
            distances = self.ball.dist(h.unsqueeze(-2), self.prototypes)
            return -distances, self.ball.logmap0(h)

    class Hyperboloid(nn.Module):
        """The same classifier on the Lorentz model (the hyperboloid): features given a time
        coordinate of 0 (a tangent vector at the origin), ``expmap0``, distances to
        ``ManifoldParameter`` prototypes on the hyperboloid (arccosh of the Lorentz inner
        product), ``logmap0`` back, and the points' Lorentz inner product with themselves (-1)."""

        def __init__(self) -> None:
            super().__init__()
            geoopt = _module("geoopt")
            self.lorentz = geoopt.Lorentz(k=1.0)
            self.proj = nn.Linear(16, 8)
            tangent = nn.functional.pad(torch.randn(5, 8) * 0.5, (1, 0))
            self.prototypes = geoopt.ManifoldParameter(self.lorentz.expmap0(tangent), manifold=self.lorentz)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            h = self.lorentz.expmap0(nn.functional.pad(self.proj(x), (1, 0)))
            distances = self.lorentz.dist(h.unsqueeze(-2), self.prototypes)
            return -distances, self.lorentz.logmap0(h), self.lorentz.inner(h, h, keepdim=True)

    return [
        OutsideModel("geoopt_lorentz_classifier", "geoopt: Lorentz expmap0 of tangent vectors, dist to "
                     "ManifoldParameter prototypes, logmap0, the Lorentz inner product", Hyperboloid, _rows,
                     **_TOLERANCE),
        OutsideModel("geoopt_poincare_classifier", "geoopt: PoincareBall expmap0, mobius_matvec, mobius_add of a "
                     "ManifoldParameter bias, dist to ManifoldParameter prototypes, logmap0", Hyperbolic, _rows,
                     **_TOLERANCE),
    ]  # fmt: skip
