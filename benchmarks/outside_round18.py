"""The eighteenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
three small libraries no earlier round used, each an optional extra, as their users call them
(pytorch-crf's conditional random field decoding into Python lists, entmax's sparse attention
maps, torch-dct's cosine transforms); six hand-written models of call patterns and graph pieces
no earlier round had (``flex_attention`` with a block mask made in the call, forces as the
gradient of an energy, ``torch.map`` over chunks with a ``torch.cond`` inside, an enum and a
frozen config as arguments, a uint8 channels-last image pipeline, TorchScript pieces inside an
eager model); and ``transformers`` architectures no earlier round built (Llama 4's chunked
attention, Gemma 3n's AltUp and per-layer inputs, BitNet's ternary weights, I-BERT's integer-only
kernels, X-MOD's per-call language adapters, LUKE's entities, Moonshine, Informer's ProbSparse
attention, MusicGen's codebooks, UperNet).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from benchmarks.outside_models import HF_TOLERANCE, OutsideModel, _call, _randn, _seeded, _tokens
from benchmarks.outside_round9 import _module
from benchmarks.outside_round12 import _TOLERANCE, _sequences  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases


def eighteenth_round() -> list[OutsideModel]:
    """The eighteenth round's models, library by library."""
    return (_crf_models() + _entmax_models() + _dct_models() + _attention_and_control_models() + _call_models()
            + _transformers_models())  # fmt: skip


class _Tagger:
    """A sequence tagger's emission network (embedding, one bidirectional LSTM, a linear layer to
    5 tags) and its calls."""

    TAGS = 5

    @staticmethod
    def build() -> Any:
        import torch

        class Emissions(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(50, 16)
                self.lstm = torch.nn.LSTM(16, 8, batch_first=True, bidirectional=True)
                self.tags = torch.nn.Linear(16, _Tagger.TAGS)

            def forward(self, tokens: torch.Tensor) -> torch.Tensor:
                return self.tags(self.lstm(self.embed(tokens))[0])

        return Emissions()

    @staticmethod
    def inputs(shape: int) -> Any:
        """Token ids and a bool mask (the last sequence padded by 2, the first step always on, as
        the CRF requires)."""
        import torch

        batch, length = (1, 3)[shape], (7, 10)[shape]
        tokens = torch.randint(0, 50, (batch, length), generator=_seeded(shape))
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, -2:] = False
        return _call(tokens, mask=mask)


def _crf_models() -> list[OutsideModel]:
    """pytorch-crf's ``CRF`` over a BiLSTM's emissions, decoding as taggers call it at inference.
    Its likelihood (``forward``) was tried too and dropped: it checks its mask as decoding does
    (``if not mask[:, 0].all()`` and ``assert mask[0].all()``, Python branches on a value), so
    export refuses it for the same reason."""
    import torch

    class Decoder(torch.nn.Module):
        """``CRF.decode``: its mask checked in Python (a branch on a value), Viterbi, the best
        path of each sequence backtracked step by step in Python (``.item()`` of the argmax,
        lists of ints out)."""

        def __init__(self) -> None:
            super().__init__()
            self.emissions = _Tagger.build()
            self.crf = _module("torchcrf").CRF(_Tagger.TAGS, batch_first=True)

        def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
            return self.crf.decode(self.emissions(tokens), mask=mask)

    return [
        OutsideModel("crf_viterbi_decode", "pytorch-crf CRF.decode: its mask check a Python branch on a value, "
                     "Viterbi, the best tags backtracked in Python (.item()), lists of ints out", Decoder,
                     _Tagger.inputs, **_TOLERANCE),
    ]  # fmt: skip


def _entmax_models() -> list[OutsideModel]:
    """entmax's sparse alternatives to softmax in attention."""
    import torch

    class SparseAttention(torch.nn.Module):
        """Self-attention whose maps are sparse: ``entmax15`` (sort, cumulative sums, a threshold
        gathered per row) for two heads, ``sparsemax`` for the other two, padded keys masked with
        ``-inf`` first; ``entmax_bisect`` with a learned alpha (50 bisection steps) gates the
        output's features."""

        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(16, 48)
            self.out = torch.nn.Linear(16, 16)
            self.gate = torch.nn.Linear(16, 16)
            self.alpha = torch.nn.Parameter(torch.tensor(1.3))

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            entmax = _module("entmax")
            q, k, v = self.qkv(x).unflatten(-1, (3, 4, 4)).permute(2, 0, 3, 1, 4)
            scores = (q @ k.transpose(-1, -2) / 2).masked_fill(~mask[:, None, None], float("-inf"))
            attention = torch.cat((entmax.entmax15(scores[:, :2], dim=-1), entmax.sparsemax(scores[:, 2:], dim=-1)), 1)
            hidden = self.out((attention @ v).transpose(1, 2).flatten(2))
            gates = entmax.entmax_bisect(self.gate(hidden), alpha=self.alpha, dim=-1)
            return hidden * gates, attention

    def masked(shape: int) -> Any:
        batch, length = (1, 3)[shape], (6, 9)[shape]
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, -3:] = False
        return _call(_randn(shape, batch, length, 16), mask)

    return [
        OutsideModel("entmax_sparse_attention", "entmax entmax15 and sparsemax attention maps over masked keys "
                     "(sort, cumsum, a gathered threshold; exact zeros), entmax_bisect gates with a learned alpha",
                     SparseAttention, masked, **_TOLERANCE),
    ]  # fmt: skip


def _dct_models() -> list[OutsideModel]:
    """torch-dct's transforms: the functional 2-D DCT and its inverse, and ``LinearDCT``."""
    import torch

    class Codec(torch.nn.Module):
        """A JPEG-like transform coder on 8x8 blocks: the image cut into blocks by ``unfold``,
        each block's orthonormal 2-D DCT (``dct_2d``, an FFT of a reordered signal), a learned
        per-frequency gain with the highest frequencies zeroed, the inverse (``idct_2d``) and the
        blocks folded back; a ``LinearDCT`` (a DCT matrix as an ``nn.Linear``) over each row of
        the result."""

        def __init__(self) -> None:
            super().__init__()
            dct = _module("torch_dct")
            keep = (torch.arange(8)[:, None] + torch.arange(8)[None]) < 10
            self.gain = torch.nn.Parameter(torch.linspace(1.0, 0.5, 64).view(8, 8))
            self.register_buffer("keep", keep)
            self.rows = dct.LinearDCT(16, "dct", norm="ortho")

        def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            dct = _module("torch_dct")
            batch, channels, height, width = image.shape
            blocks = image.unfold(2, 8, 8).unfold(3, 8, 8)
            coefficients = dct.dct_2d(blocks, norm="ortho") * self.gain * self.get_buffer("keep")
            restored = dct.idct_2d(coefficients, norm="ortho").permute(0, 1, 2, 4, 3, 5)
            restored = restored.reshape(batch, channels, height, width)
            return restored, self.rows(restored)

    return [
        OutsideModel("dct_block_codec", "torch-dct dct_2d/idct_2d on 8x8 blocks cut by unfold (FFTs of reordered "
                     "signals, view_as_real), high frequencies zeroed, LinearDCT on rows", Codec,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (1, 3)[shape], (16, 32)[shape], 16)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _attention_and_control_models() -> list[OutsideModel]:
    """``flex_attention`` with a block mask made at each call, forces from an energy by
    ``torch.autograd.grad``, and ``torch.map`` over chunks with a ``torch.cond`` in its body."""
    import torch

    class Flex(torch.nn.Module):
        """``flex_attention`` as recent model code writes it: a sliding-window causal
        ``mask_mod`` made into a ``BlockMask`` by ``create_block_mask`` at each call (the window
        a Python int of the call), and an ALiBi ``score_mod`` reading a buffer of per-head
        slopes. Its weights are frozen (``requires_grad_(False)``), as CPU inference code
        freezes them: flex_attention refuses to trace a CPU call that would need a backward."""

        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(32, 96)
            self.out = torch.nn.Linear(32, 32)
            self.register_buffer("slopes", 2.0 ** -torch.arange(1, 5, dtype=torch.float32))
            self.requires_grad_(False)  # flex_attention has no backward on CPU: inference code freezes the weights

        def forward(self, x: torch.Tensor, window: int) -> torch.Tensor:
            from torch.nn.attention import flex_attention as flex

            length = x.shape[1]
            q, k, v = self.qkv(x).unflatten(-1, (3, 4, 8)).permute(2, 0, 3, 1, 4)
            slopes = self.get_buffer("slopes")

            def sliding(batch: Any, head: Any, query: Any, key: Any) -> Any:
                return (query >= key) & (query - key < window)

            def alibi(score: Any, batch: Any, head: Any, query: Any, key: Any) -> Any:
                return score - slopes[head] * (query - key)

            block_mask = flex.create_block_mask(sliding, None, None, length, length, device="cpu")
            attended = flex.flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask)
            return self.out(attended.transpose(1, 2).flatten(2))

    class Forces(torch.nn.Module):
        """An interatomic potential as molecular-dynamics code calls it: the energy of each
        configuration from radial basis features of the pair distances, and the forces as minus
        its gradient with respect to the positions (``torch.autograd.grad`` inside
        ``forward``, under ``torch.enable_grad``)."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("centres", torch.linspace(0.5, 3.0, 8))
            self.energy = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.SiLU(), torch.nn.Linear(16, 1))

        def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with torch.enable_grad():
                where = positions.detach().requires_grad_(True)
                offsets = where[:, :, None] - where[:, None]
                distances = (offsets.square().sum(-1) + 1e-2).sqrt()
                basis = torch.exp(-((distances[..., None] - self.get_buffer("centres")) ** 2))
                energy = self.energy(basis).sum((1, 2, 3))
                (gradient,) = torch.autograd.grad(energy.sum(), where)
            return energy.detach(), -gradient

    class Chunked(torch.nn.Module):
        """``torch.map`` (``torch._higher_order_ops.map``) over the chunks of a sequence, its
        body a small MLP closing over the module's parameters, with a ``torch.cond`` choosing
        per chunk between a residual and a gated update by the chunk's mean."""

        def __init__(self) -> None:
            super().__init__()
            self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
            self.gate = torch.nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            from torch._higher_order_ops.map import map as torch_map

            def residual(chunk: torch.Tensor) -> torch.Tensor:
                return chunk + self.mlp(chunk)

            def gated(chunk: torch.Tensor) -> torch.Tensor:
                return chunk * torch.sigmoid(self.gate(chunk))

            def body(chunk: torch.Tensor) -> torch.Tensor:
                return torch.cond(chunk.mean() > 0, residual, gated, (chunk,))

            chunks = x.unflatten(1, (-1, 4)).transpose(0, 1)
            mapped = torch_map(body, chunks)  # type: ignore[arg-type]  # its hint types the operands as one tuple
            return mapped.transpose(0, 1).flatten(1, 2)

    def chunked(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (8, 12)[shape], 16) + (0.3, -0.1)[shape])

    return [
        OutsideModel("flex_attention_window", "hand-written flex_attention: a sliding-window causal BlockMask made "
                     "by create_block_mask at each call (the window a Python int), an ALiBi score_mod reading "
                     "a buffer", Flex, lambda shape: _call(*_sequences((16, 24), 32)(shape).args, (4, 8)[shape]),
                     **_TOLERANCE),
        OutsideModel("forces_by_autograd", "hand-written interatomic potential: energies and forces as minus "
                     "their gradient in the positions (torch.autograd.grad in forward, under enable_grad)",
                     Forces, lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 8)[shape], 3)), **_TOLERANCE),
        OutsideModel("map_chunks_cond", "hand-written torch.map over a sequence's chunks, its body closing over "
                     "parameters with a torch.cond per chunk", Chunked, chunked, **_TOLERANCE),
    ]  # fmt: skip


class Pooling(enum.Enum):
    """How the enum-configured model pools (an argument of each call)."""

    MEAN = "mean"
    MAX = "max"


@dataclass(frozen=True)
class HeadConfig:
    """A frozen configuration passed to each call, as inference services pass per-request
    settings: which head, the temperature, whether to normalise."""

    head: str
    temperature: float
    normalise: bool


def _register_head_config() -> None:
    """Declares :class:`HeadConfig` a constant of the call (hashable, compared by value), as
    export's documentation says to declare such a class: export refuses one it does not know."""
    import torch.utils._pytree as pytree

    if HeadConfig not in pytree.SUPPORTED_NODES:
        pytree.register_constant(HeadConfig)


def _call_models() -> list[OutsideModel]:
    """Three hand-written call patterns: an enum and a frozen dataclass as arguments, a uint8
    channels-last image in, TorchScript functions and modules inside."""
    import torch

    class Configured(torch.nn.Module):
        """Pools by an ``enum.Enum`` argument and reads a frozen dataclass of settings (a string
        picking one of two heads from a ``ModuleDict``, a float temperature, a bool)."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU())
            self.heads = torch.nn.ModuleDict({"intent": torch.nn.Linear(32, 6), "topic": torch.nn.Linear(32, 9)})

        def forward(self, x: torch.Tensor, pooling: Pooling, config: HeadConfig) -> torch.Tensor:
            hidden = self.encoder(x)
            pooled = hidden.mean(1) if pooling is Pooling.MEAN else hidden.amax(1)
            if config.normalise:
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
            return (self.heads[config.head](pooled) / config.temperature).softmax(-1)

    def configured(shape: int) -> Any:
        _register_head_config()
        config = (HeadConfig("intent", 0.7, True), HeadConfig("topic", 1.5, False))[shape]
        return _call(*_sequences((5, 8), 16)(shape).args, (Pooling.MEAN, Pooling.MAX)[shape], config)

    class Pipeline(torch.nn.Module):
        """Preprocessing inside the model, as deployed vision models do it: a uint8 image in
        height-width-channel order (viewed as channels-last NCHW by ``permute``, no copy),
        scaled to float, normalised by mean and std buffers, resized with antialiasing; a
        channels-last convolutional net; a uint8 mask (``> 0`` times 255) and float scores out."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))
            self.net = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 2, 1))  # fmt: skip
            self.net.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # accepted, not in the stubs

        def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            pixels = image.permute(0, 3, 1, 2).float() / 255
            pixels = (pixels - self.get_buffer("mean")) / self.get_buffer("std")
            pixels = torch.nn.functional.interpolate(pixels, size=(12, 12), mode="bilinear", antialias=True)
            scores = self.net(pixels)
            return (scores[:, :1] > 0).to(torch.uint8) * 255, scores

    def uint8_images(shape: int) -> Any:
        size = (20, 28)[shape]
        return _call(torch.randint(0, 256, ((1, 3)[shape], size, size, 3), generator=_seeded(shape), dtype=torch.uint8))

    # Unannotated, as TorchScript takes such arguments for tensors (it reads comments as types).
    def bias_gelu(bias, y):
        """Megatron-LM's fused bias-GELU (the tanh approximation), written again, to be scripted."""
        x = bias + y
        return x * 0.5 * (1.0 + (0.79788456 * x * (1 + 0.044715 * x * x)).tanh())

    class Scripted(torch.nn.Module):
        """TorchScript pieces inside an eager model, as older model code keeps them: a
        ``torch.jit.script`` function (Megatron's fused bias-GELU, written with the tanh
        approximation) and a traced child (``torch.jit.trace`` of a small MLP: a
        ``ScriptModule``). A scripted ``nn.Module`` child called in ``forward`` was tried too
        and dropped: export refuses it ("LayerNorm.forward() takes 2 positional arguments but 3
        were given")."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(16, 32, bias=False)
            self.bias = torch.nn.Parameter(torch.linspace(-0.5, 0.5, 32))
            self.norm = torch.nn.LayerNorm(32)
            mlp = torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.Tanh()).eval()
            self.mlp = torch.jit.trace(mlp, torch.randn(2, 5, 32))
            self.bias_gelu = torch.jit.script(bias_gelu)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mlp(self.norm(self.bias_gelu(self.bias, self.proj(x))))

    return [
        OutsideModel("enum_dataclass_arguments", "hand-written classifier called with an enum.Enum (the pooling) "
                     "and a frozen dataclass (a head's name from a ModuleDict, a float, a bool)", Configured,
                     configured, **_TOLERANCE),
        OutsideModel("uint8_image_pipeline", "hand-written preprocessing in the model: a uint8 HWC image permuted "
                     "to a channels-last NCHW view, normalised, antialiased resize; a uint8 mask out", Pipeline,
                     uint8_images, **_TOLERANCE),
        OutsideModel("torchscript_pieces", "hand-written model with TorchScript inside: a torch.jit.script "
                     "fused bias-GELU function and a torch.jit.trace'd MLP child (a ScriptModule)", Scripted,
                     _sequences((5, 8), 16), **_TOLERANCE),
    ]  # fmt: skip


def _with(make: Any, extra: Any) -> Any:
    """Inputs of ``make`` with keyword arguments that depend on the shape (``extra(shape, batch,
    length)``) added."""

    def inputs(shape: int) -> Any:
        call = make(shape)
        batch, length = call.kwargs["input_ids"].shape
        return _call(*call.args, **call.kwargs, **extra(shape, batch, length))

    return inputs


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    import torch

    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                   use_cache=False)  # fmt: skip
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)

    def languages(shape: int, batch: int, length: int) -> dict[str, Any]:
        return dict(lang_ids=torch.tensor([0, 1, 1][:batch]))

    def entities(shape: int, batch: int, length: int) -> dict[str, Any]:
        count = (2, 3)[shape]
        positions = torch.arange(count * 4).view(1, count, 4).expand(batch, -1, -1) % length
        positions = positions.masked_fill(torch.arange(4) >= 2, -1)  # mentions of 2 tokens, padded by -1
        entity_mask = torch.ones(batch, count, dtype=torch.int64)
        entity_mask[-1, -1] = 0
        return dict(entity_ids=torch.randint(1, 100, (batch, count), generator=_seeded(shape)),
                    entity_attention_mask=entity_mask, entity_position_ids=positions.contiguous())  # fmt: skip

    def speech(shape: int) -> Any:
        batch = (1, 3)[shape]
        ids = torch.randint(0, 1000, (batch, (5, 7)[shape]), generator=_seeded(shape))
        return _call(input_values=_randn(shape, batch, (3200, 4800)[shape]), decoder_input_ids=ids)

    def series(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(past_values=_randn(shape, batch, 10), past_time_features=_randn(shape + 1, batch, 10, 1),
                     past_observed_mask=torch.ones(batch, 10), future_time_features=_randn(shape + 2, batch, 4, 1),
                     future_values=_randn(shape + 3, batch, 4))  # fmt: skip

    def codebooks(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(input_ids=torch.randint(0, 64, (batch * 4, (6, 9)[shape]), generator=_seeded(shape)))

    models: list[HfCase] = [
        ("hf_llama4_text", "Llama4ForCausalLM", "Llama4TextConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=1,
              intermediate_size_mlp=128, attention_chunk_size=8, no_rope_layers=[1, 0], moe_layers=[1],
              layer_types=["chunked_attention", "full_attention"]), _tokens(1000, (12, 20))),
        ("hf_gemma3n_text", "Gemma3nForCausalLM", "Gemma3nTextConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, vocab_size_per_layer_input=1000,
              hidden_size_per_layer_input=8, laurel_rank=8, altup_num_inputs=2, num_kv_shared_layers=0,
              sliding_window=8, layer_types=["sliding_attention", "full_attention"],
              activation_sparsity_pattern=[0.95, 0.0], intermediate_size=[128, 128]), _tokens(1000, (12, 20))),
        ("hf_glm4_moe", "Glm4MoeForCausalLM", "Glm4MoeConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, n_routed_experts=4, num_experts_per_tok=2,
              moe_intermediate_size=32, n_shared_experts=1, first_k_dense_replace=1, n_group=1, topk_group=1),
         _tokens(1000, (12, 20))),
        ("hf_doge", "DogeForCausalLM", "DogeConfig", "logits",
         dict(decoder, num_key_value_heads=2, keep_window_size=8, is_moe=True, num_experts=16, num_experts_per_tok=2),
         _tokens(1000, (12, 20))),
        ("hf_bitnet", "BitNetForCausalLM", "BitNetConfig", "logits",
         dict(decoder, num_key_value_heads=2, bos_token_id=1, eos_token_id=2), _tokens(1000, (12, 20))),
        ("hf_apertus", "ApertusForCausalLM", "ApertusConfig", "logits", dict(decoder, num_key_value_heads=2),
         _tokens(1000, (12, 20))),
        ("hf_olmo_clip_qkv", "OlmoForCausalLM", "OlmoConfig", "logits",
         dict(decoder, clip_qkv=0.5, eos_token_id=2), _tokens(1000, (12, 20))),
        ("hf_ibert_integer", "IBertModel", "IBertConfig", "last_hidden_state", dict(encoder, quant_mode=True),
         _tokens(1000, (12, 20))),
        ("hf_xmod_languages", "XmodModel", "XmodConfig", "last_hidden_state",
         dict(encoder, languages=["en_XX", "de_DE"], default_language="en_XX"),
         _with(_tokens(1000, (12, 20)), languages)),
        ("hf_luke_entities", "LukeModel", "LukeConfig", None,
         dict(encoder, entity_vocab_size=100, entity_emb_size=32, max_mention_length=4),
         _with(_tokens(1000, (12, 20)), entities)),
        ("hf_moonshine", "MoonshineModel", "MoonshineConfig", "last_hidden_state",
         dict(vocab_size=1000, hidden_size=64, intermediate_size=128, encoder_num_hidden_layers=2,
              decoder_num_hidden_layers=2, encoder_num_attention_heads=4, decoder_num_attention_heads=4,
              use_cache=False), speech),
        ("hf_informer_prob", "InformerForPrediction", "InformerConfig", None,
         dict(prediction_length=4, context_length=8, lags_sequence=[1, 2], num_time_features=1, d_model=32,
              encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
              encoder_ffn_dim=32, decoder_ffn_dim=32, attention_type="prob", distil=False), series),
        ("hf_musicgen_codebooks", "MusicgenForCausalLM", "MusicgenDecoderConfig", "logits",
         dict(vocab_size=64, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
              num_codebooks=4, use_cache=False), codebooks),
    ]  # fmt: skip
    upernet = OutsideModel(
        "hf_upernet", "transformers UperNetForSemanticSegmentation on a small ConvNext backbone: a pyramid pooling "
        "module (adaptive pools of 1, 2, 3, 6) and an FPN, logits upsampled to the image", _upernet,
        lambda shape: _call(pixel_values=_randn(shape, (1, 3)[shape], 3, (32, 48)[shape], (32, 48)[shape])),
        **HF_TOLERANCE)  # fmt: skip
    return [*_hf_cases(models), upernet]


def _upernet() -> Any:
    from srbench_models.hf import OutputOf

    transformers = _module("transformers")
    backbone = transformers.ConvNextConfig(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                           out_features=["stage1", "stage2", "stage3", "stage4"])  # fmt: skip
    config = transformers.UperNetConfig(backbone_config=backbone, hidden_size=16, auxiliary_in_channels=32,
                                        num_labels=3)  # fmt: skip
    return OutputOf(transformers.UperNetForSemanticSegmentation(config), "logits")
