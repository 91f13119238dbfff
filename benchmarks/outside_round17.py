"""The seventeenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: Omninet (every
layer's tokens attended to together), ResMLP, the few-shot CrossTransformer (its backbone given to
every call), TokenLearner and TokenFuser, multi-head slot attention (the number of slots a Python
int of the call), the ReLA transformer, RetNet's chunkwise form (a list of states and a Python int
start in, the next states out), the Memory Transformer-XL (short and long memories in and out, a
namedtuple), Tranception and the discrete key-value bottleneck; six hand-written models (a beam
search step returning a dict of tuples, a channels-last segmenter with int and bool outputs,
int8 weights dequantised into float16, a block answering in the caller's dtype, float32 then
float64, a complex-valued network called with complex tensors, and a ring buffer and its int64
position written in place into the caller's tensors); and
``transformers`` architectures no earlier round built, among them a greedy generation loop on
transformers' own ``DynamicCache``.

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import HF_TOLERANCE, OutsideModel, _call, _pixels, _randn, _seeded, _tokens
from benchmarks.outside_round9 import _module
from benchmarks.outside_round12 import _TOLERANCE, _sequences  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round15 import _masked_ids


def seventeenth_round() -> list[OutsideModel]:
    """The seventeenth round's models, library by library."""
    return (_language_models() + _vision_models() + _memory_models() + _decoding_models() + _dtype_models()
            + _transformers_models())  # fmt: skip


def _language_models() -> list[OutsideModel]:
    """Omninet, ReLA, Tranception and the discrete key-value bottleneck."""
    import torch

    def omninet() -> Any:
        return _module("omninet_pytorch").Omninet(dim=32, depth=2, dim_head=8, heads=4, pool_layer_tokens_every=2)

    def rela() -> Any:
        return _module("rela_transformer").ReLATransformer(num_tokens=64, dim=32, depth=2, max_seq_len=32, heads=4,
                                                           dim_head=8)  # fmt: skip

    def tranception() -> Any:
        return _module("tranception_pytorch").Tranception(dim=32, depth=2, num_tokens=21, heads=8, dim_head=8,
                                                          ds_conv_kernel_sizes=(0, 3, 5, 7))  # fmt: skip

    def proteins(shape: int) -> Any:
        size = ((1, 3)[shape], (12, 20)[shape])
        return _call(torch.randint(0, 21, size, generator=_seeded(shape)), mask=torch.ones(size, dtype=torch.bool))

    class Bottleneck(torch.nn.Module):
        """A ``DiscreteKeyValueBottleneck`` over a small encoder: the encoding projected into 2
        codebooks, each vector-quantised (int64 memory ids), the ids gathering learned values;
        ``return_intermediates=True`` gives the memories and the quantiser's tuple (quantised,
        ids, loss)."""

        def __init__(self) -> None:
            super().__init__()
            encoder = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU())
            self.bottleneck = _module("discrete_key_value_bottleneck_pytorch").DiscreteKeyValueBottleneck(
                dim=32, num_memories=64, num_memory_codebooks=2, dim_memory=16, encoder=encoder,
                average_pool_memories=False, decay=0.9)  # fmt: skip

        def forward(self, x: torch.Tensor) -> Any:
            return self.bottleneck(x, return_intermediates=True)

    return [
        OutsideModel("omninet_all_layers", "omninet-pytorch Omninet: every second layer's tokens of all layers "
                     "so far attended to together by Performer attention", omninet,
                     _sequences((10, 14), 32), **_TOLERANCE),
        OutsideModel("rela_lm", "rela-transformer ReLATransformer, causal: rectified linear attention with gated "
                     "RMS norm, a mask", rela, _masked_ids((16, 24)), **_TOLERANCE),
        OutsideModel("tranception_protein", "tranception-pytorch Tranception: heads in groups with depthwise "
                     "convolutions of sizes 3, 5, 7 after the projections, learned ALiBi, a mask", tranception,
                     proteins, **_TOLERANCE),
        OutsideModel("discrete_kv_bottleneck", "discrete-key-value-bottleneck-pytorch: an encoder's output "
                     "quantised in 2 codebooks, int64 ids gathering values; the memories and the quantiser's "
                     "tuple", Bottleneck, _sequences((6, 9), 16), **_TOLERANCE),
    ]  # fmt: skip


def _vision_models() -> list[OutsideModel]:
    """ResMLP, the CrossTransformer, TokenLearner/TokenFuser, multi-head slot attention."""
    import torch

    def res_mlp() -> Any:
        return _module("res_mlp_pytorch").ResMLP(image_size=16, patch_size=4, dim=32, depth=2, num_classes=5)

    class FewShot(torch.nn.Module):
        """A ``CrossTransformer`` as its README calls it: the backbone is an argument of every
        call (a small convolutional net here, held by the wrapper), a query image against
        ``k`` classes of ``n`` support images; class distances out."""

        def __init__(self) -> None:
            super().__init__()
            self.backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
                                                torch.nn.Conv2d(16, 32, 3, padding=1))  # fmt: skip
            self.cross = _module("cross_transformers_pytorch").CrossTransformer(dim=32, dim_key=16, dim_value=16)

        def forward(self, query: torch.Tensor, supports: torch.Tensor) -> torch.Tensor:
            return self.cross(self.backbone, query, supports)

    def few_shot(shape: int) -> Any:
        batch, classes = (1, 2)[shape], (2, 3)[shape]
        return _call(_randn(shape, batch, 3, 16, 16), _randn(shape + 1, batch, classes, 2, 3, 16, 16))

    class Learner(torch.nn.Module):
        """``TokenLearner`` (8 learned tokens from a channels-last feature map) then
        ``TokenFuser`` back onto the map. The library keeps its spatial attentions in a plain
        Python list, so their BatchNorms are no submodules: ``eval()`` does not reach them, and
        they normalise by batch statistics and move their running statistics at every call."""

        def __init__(self) -> None:
            super().__init__()
            library = _module("tokenlearner_pytorch")
            self.learner = library.TokenLearner(S=8)
            self.fuser = library.TokenFuser(8, 8, 16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fuser(self.learner(x), x)

    class Slots(torch.nn.Module):
        """``MultiHeadSlotAttention`` with ``num_slots`` a Python int of each call (4, then 6
        slots at the second shape; a GRU update, 3 iterations). The slots start at their learned
        mean, as evaluation code starts them: their log standard deviation is -inf, so the
        ``randn`` the library draws at every call is multiplied by 0."""

        def __init__(self) -> None:
            super().__init__()
            self.slots = _module("slot_attention").MultiHeadSlotAttention(num_slots=4, dim=32, heads=4, dim_head=8,
                                                                          iters=3, hidden_dim=64)  # fmt: skip
            torch.nn.init.constant_(self.slots.slots_logsigma, float("-inf"))

        def forward(self, inputs: torch.Tensor, num_slots: int) -> torch.Tensor:
            return self.slots(inputs, num_slots=num_slots)

    return [
        OutsideModel("res_mlp", "res-mlp-pytorch ResMLP: affine normalisation, cross-patch linear layers, "
                     "layer scale", res_mlp, lambda shape: _call(_randn(shape, (1, 3)[shape], 3, 16, 16)),
                     **_TOLERANCE),
        OutsideModel("cross_transformer_few_shot", "cross-transformers-pytorch CrossTransformer: a backbone given "
                     "to the call, a query against k classes of support images", FewShot, few_shot, **_TOLERANCE),
        OutsideModel("token_learner_fuser", "tokenlearner-pytorch TokenLearner and TokenFuser on a channels-last "
                     "map; BatchNorms in a plain list (unregistered, in training mode)", Learner,
                     lambda shape: _call(_randn(shape, (2, 3)[shape], 8, 8, 16)), **_TOLERANCE),
        OutsideModel("multi_head_slots", "slot-attention MultiHeadSlotAttention: num_slots a Python int of "
                     "the call (4, then 6), a GRU update over 3 iterations", Slots,
                     lambda shape: _call(*_sequences((12, 16), 32)(shape).args, (4, 6)[shape]), **_TOLERANCE),
    ]  # fmt: skip


def _memory_models() -> list[OutsideModel]:
    """RetNet's chunkwise form and the Memory Transformer-XL: states in and out."""
    import torch

    class Retention(torch.nn.Module):
        """``RetNet.forward_chunkwise``: a chunk of tokens continuing a sequence at ``start_idx``
        (a Python int: the xPos rotation's offset), from the per-layer states of the chunks
        before (a list), the logits and the next states (a list) out."""

        def __init__(self) -> None:
            super().__init__()
            self.retnet = _module("yet_another_retnet.retnet").RetNet(num_tokens=64, d_model=32, nhead=4,
                                                                       num_layers=2, dim_feedforward=64,
                                                                       dropout=0.0)  # fmt: skip

        def forward(self, ids: torch.Tensor, start_idx: int, prev_states: list[torch.Tensor]) -> Any:
            return self.retnet.forward_chunkwise(ids, start_idx=start_idx, prev_states=prev_states)

    def chunk(shape: int) -> Any:
        batch = (1, 3)[shape]
        states = [_randn(shape + 1 + layer, batch, 4, 8, 8) / 4 for layer in range(2)]
        ids = torch.randint(0, 64, (batch, (6, 8)[shape]), generator=_seeded(shape))
        return _call(ids, (12, 30)[shape], states)

    class MemoryXl(torch.nn.Module):
        """A ``MemoryTransformerXL`` segment: the short-term memory (per memory layer) and the
        long-term one (``Memory``, a namedtuple) in, written by its memory network (linear
        attention, GRU gates) and returned, a FIFO queue for the short one; a mask."""

        def __init__(self) -> None:
            super().__init__()
            self.model = _module("memory_transformer_xl").MemoryTransformerXL(
                num_tokens=64, dim=32, seq_len=8, depth=2, mem_len=8, lmem_len=4, heads=4,
                memory_layers=[2])  # fmt: skip

        def forward(self, ids: torch.Tensor, memories: Any, mask: torch.Tensor) -> Any:
            return self.model(ids, memories=memories, mask=mask)

    def segment(shape: int) -> Any:
        memory = _module("memory_transformer_xl").memory_transformer_xl.Memory
        batch = (1, 3)[shape]
        mask = torch.ones(batch, 8, dtype=torch.bool)
        mask[-1, -2:] = False
        memories = memory(short=_randn(shape + 1, 1, batch, 8, 32), long=_randn(shape + 2, batch, 4, 32))
        return _call(torch.randint(0, 64, (batch, 8), generator=_seeded(shape)), memories, mask)

    return [
        OutsideModel("retnet_chunkwise", "yet-another-retnet RetNet.forward_chunkwise: a chunk from a Python int "
                     "start and a list of states, the logits and next states out", Retention, chunk, **_TOLERANCE),
        OutsideModel("memory_transformer_xl", "memory-transformer-xl MemoryTransformerXL: short and long "
                     "memories in a namedtuple in and out, written by a memory network, a mask", MemoryXl,
                     segment, **_TOLERANCE),
    ]  # fmt: skip


class _Decoder:
    """The hand-written decoders' shared pieces: token embedding, two attention layers, a head."""

    @staticmethod
    def build() -> Any:
        import torch

        class Layer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.qkv = torch.nn.Linear(32, 96)
                self.out = torch.nn.Linear(32, 32)
                self.norm = torch.nn.LayerNorm(32)

            def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor]) -> Any:
                q, k, v = self.qkv(self.norm(x)).unflatten(-1, (3, 4, 8)).permute(2, 0, 3, 1, 4)
                k, v = torch.cat((past[0], k), 2), torch.cat((past[1], v), 2)
                attended = torch.nn.functional.scaled_dot_product_attention(q, k, v)
                return x + self.out(attended.transpose(1, 2).flatten(2)), (k, v)

        class Decoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(64, 32)
                self.layers = torch.nn.ModuleList([Layer(), Layer()])
                self.head = torch.nn.Linear(32, 64)

        return Decoder()


def _decoding_models() -> list[OutsideModel]:
    """A beam search step (a dict of tuples out) and a ring buffer written into the caller's
    tensors (an int64 position among them)."""
    import torch

    class BeamStep(torch.nn.Module):
        """One step of beam search as decoding libraries write it: the beams' last tokens
        through a cached decoder, log-probabilities added to the running scores, the top
        ``beams`` of ``beams * vocab`` by ``topk``, their beam (``//``) and token (``%``) int64
        ids, each layer's cache reordered by ``index_select`` with the beam ids, and which
        beams ended (bool). Returns ``{"scores": ..., "tokens": (beam_ids, token_ids),
        "cache": ((k, v), (k, v)), "done": ...}``."""

        def __init__(self) -> None:
            super().__init__()
            self.decoder = _Decoder.build()

        def forward(self, tokens: torch.Tensor, scores: torch.Tensor,
                    cache: tuple[tuple[torch.Tensor, torch.Tensor], ...], beams: int) -> dict[str, Any]:  # fmt: skip
            x, grown = self.decoder.embed(tokens)[:, None], []
            for layer, past in zip(self.decoder.layers, cache):
                x, pair = layer(x, past)
                grown.append(pair)
            log_probs = self.decoder.head(x[:, 0]).log_softmax(-1)
            vocab = log_probs.shape[-1]
            total = (scores[:, None] + log_probs).view(-1, beams * vocab)
            best, flat = total.topk(beams, dim=-1)
            beam_ids = flat // vocab
            token_ids = flat % vocab
            rows = (beam_ids + torch.arange(total.shape[0])[:, None] * beams).flatten()
            reordered = tuple((k.index_select(0, rows), v.index_select(0, rows)) for k, v in grown)
            return {"scores": best.flatten(), "tokens": (beam_ids, token_ids), "cache": reordered,
                    "done": token_ids == 0}  # fmt: skip

    def beam(shape: int) -> Any:
        batch, beams, held = (1, 2)[shape], (3, 4)[shape], (5, 7)[shape]
        rows = batch * beams
        cache = tuple((_randn(shape + 2 * i, rows, 4, held, 8), _randn(shape + 2 * i + 1, rows, 4, held, 8))
                      for i in range(2))  # fmt: skip
        scores = -torch.rand(rows, generator=_seeded(shape)) * 3
        return _call(torch.randint(1, 64, (rows,), generator=_seeded(shape)), scores, cache, beams=beams)

    class RingBuffer(torch.nn.Module):
        """A streaming encoder keeping its context in the caller's tensors: each call writes the
        new frames' features into ``buffer`` (batch, slots, width) at ``position % slots`` by
        ``index_copy_``, advances the caller's int64 ``position`` in place, and attends over the
        buffer's filled slots (a bool mask from the position); the output and the filled mask
        out."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(16, 32)
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, frames: torch.Tensor, buffer: torch.Tensor,
                    position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            slots, count = buffer.shape[1], frames.shape[1]
            features = self.proj(frames)
            where = (position + torch.arange(count)) % slots
            buffer.index_copy_(1, where, features)
            position.add_(count)
            filled = torch.arange(slots) < position.clamp(max=slots)
            out, _ = self.attn(features, buffer, buffer, key_padding_mask=~filled.expand(buffer.shape[0], -1))
            return out, filled

    def ring(shape: int) -> Any:
        batch, count = (1, 3)[shape], (3, 5)[shape]
        return _call(_randn(shape, batch, count, 16), _randn(shape + 1, batch, 12, 32),
                     torch.tensor((4, 10)[shape]))  # fmt: skip

    return [
        OutsideModel("beam_search_step", "hand-written beam search step: topk over beams x vocab, int64 beam and "
                     "token ids by // and %, the cache reordered by index_select; a dict of tuples and a bool "
                     "out", BeamStep, beam, **_TOLERANCE),
        OutsideModel("ring_buffer_inputs", "hand-written streaming encoder: frames written into the caller's "
                     "buffer at position % slots (index_copy_), the caller's int64 position advanced in place, "
                     "a bool mask out", RingBuffer, ring, **_TOLERANCE),
    ]  # fmt: skip


def _dtype_models() -> list[OutsideModel]:
    """Four hand-written models: a channels-last segmenter with int and bool outputs, int8
    weights dequantised into float16, a block answering in the caller's dtype (float32, then
    float64), and a complex-valued network."""
    import torch

    class Segmenter(torch.nn.Module):
        """A small segmenter kept in channels-last memory format (its weights and its input, as
        CPU inference code converts both): depthwise-separable convolutions, in-place ReLUs, a
        per-pixel class map (int64 ``argmax``), a confidence mask (bool) and each image's count
        of confident pixels (int64)."""

        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Sequential(
                torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(inplace=True),
                torch.nn.Conv2d(16, 16, 3, padding=1, groups=16), torch.nn.Conv2d(16, 32, 1),
                torch.nn.ReLU(inplace=True), torch.nn.Conv2d(32, 5, 1))  # fmt: skip
            self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # accepted, not in the stubs

        def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
            logits = self.body(image)
            confidence, classes = logits.softmax(1).max(1)
            confident = confidence > 0.3
            return logits, classes, confident, confident.flatten(1).sum(1)

    def images(shape: int) -> Any:
        size = (12, 20)[shape]
        return _call(_randn(shape, (1, 3)[shape], 3, size, size).contiguous(memory_format=torch.channels_last))

    class Int8Weights(torch.nn.Module):
        """Weight-only int8 quantisation as inference code writes it by hand: int8 weight
        buffers with per-channel float scales, dequantised into float16 at each call, float16
        activations, a float32 result."""

        def __init__(self) -> None:
            super().__init__()
            generator = torch.Generator().manual_seed(17)
            for name, (rows, cols) in {"first": (64, 24), "second": (8, 64)}.items():
                weight = torch.randn(rows, cols, generator=generator) / cols**0.5
                scale = weight.abs().amax(1, keepdim=True) / 127
                self.register_buffer(f"{name}_q", (weight / scale).round().to(torch.int8))
                self.register_buffer(f"{name}_scale", scale.to(torch.float16))
            self.bias = torch.nn.Parameter(torch.zeros(64, dtype=torch.float16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            first = self.get_buffer("first_q").to(torch.float16) * self.get_buffer("first_scale")
            second = self.get_buffer("second_q").to(torch.float16) * self.get_buffer("second_scale")
            hidden = torch.nn.functional.silu(x.half() @ first.t() + self.bias)
            return (hidden @ second.t()).float()

    class ComplexNet(torch.nn.Module):
        """A complex-valued network called with a complex64 signal: complex weights (a real and
        an imaginary parameter combined by ``torch.complex``), modReLU (a magnitude threshold,
        the phase kept), a complex output and its phase (float32)."""

        def __init__(self) -> None:
            super().__init__()
            self.real = torch.nn.Parameter(torch.randn(16, 12) / 4)
            self.imag = torch.nn.Parameter(torch.randn(16, 12) / 4)
            self.bias = torch.nn.Parameter(torch.full((16,), -0.1))
            self.out = torch.nn.Parameter(torch.randn(16, 8, dtype=torch.complex64) / 4)

        def forward(self, signal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            hidden = signal @ torch.complex(self.real, self.imag).t()
            magnitude = hidden.abs()
            hidden = torch.relu(magnitude + self.bias) * hidden / (magnitude + 1e-6)
            out = hidden @ self.out
            return out, out.angle()

    def signals(shape: int) -> Any:
        size = ((1, 3)[shape], (6, 9)[shape], 12)
        return _call(torch.complex(_randn(shape, *size), _randn(shape + 1, *size)))

    class AnyFloat(torch.nn.Module):
        """A block that takes features of any float dtype, as library code written for mixed
        precision does: computed in float32 (its parameters'), the residual added and the result
        returned in the caller's dtype; called with float32 at the first shape and float64 at the
        second (srbench prepares a program per dtype)."""

        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)
            self.proj = torch.nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.proj(self.norm(x.float())).to(x.dtype)

    def any_float(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16, dtype=(torch.float32, torch.float64)[shape]))

    return [
        OutsideModel("channels_last_segmenter", "hand-written segmenter, channels-last weights and input, "
                     "in-place ReLUs; logits, an int64 class map, a bool mask and int64 counts", Segmenter, images,
                     **_TOLERANCE),
        OutsideModel("int8_weight_only", "hand-written int8 weight buffers and float16 scales dequantised at "
                     "each call, float16 activations, a float32 result", Int8Weights,
                     _sequences((5, 7), 24), rtol=1e-2, atol=1e-2),
        OutsideModel("input_dtype_per_call", "hand-written block computing in float32 and answering in the "
                     "caller's dtype: float32 at one shape, float64 at the other", AnyFloat, any_float,
                     **_TOLERANCE),
        OutsideModel("complex_valued_net", "hand-written complex-valued network: a complex64 signal in, complex "
                     "weights, modReLU; a complex output and its phase", ComplexNet, signals, **_TOLERANCE),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs, and a greedy loop
    on transformers' ``DynamicCache``."""

    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                   use_cache=False)  # fmt: skip
    models: list[HfCase] = [
        ("hf_gpt_oss", "GptOssForCausalLM", "GptOssConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
              sliding_window=8, layer_types=["sliding_attention", "full_attention"]), _tokens(1000)),
        ("hf_qwen3_next", "Qwen3NextForCausalLM", "Qwen3NextConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, linear_num_value_heads=4, linear_num_key_heads=2,
              linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, num_experts=4,
              num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
              layer_types=["linear_attention", "full_attention"]), _tokens(1000)),
        ("hf_deepseek_v2", "DeepseekV2ForCausalLM", "DeepseekV2Config", "logits",
         dict(decoder, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=24, qk_rope_head_dim=8,
              qk_nope_head_dim=8, v_head_dim=16, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
              n_shared_experts=1, first_k_dense_replace=1), _tokens(1000)),
        ("hf_glm4", "Glm4ForCausalLM", "Glm4Config", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, pad_token_id=0), _tokens(1000)),
        ("hf_smollm3", "SmolLM3ForCausalLM", "SmolLM3Config", "logits",
         dict(decoder, num_key_value_heads=2, no_rope_layer_interval=2, pad_token_id=0, bos_token_id=1,
              eos_token_id=2), _tokens(1000)),
        ("hf_minimax", "MiniMaxForCausalLM", "MiniMaxConfig", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2,
              block_size=8, layer_types=["linear_attention", "full_attention"]), _tokens(1000)),
        ("hf_xlstm", "xLSTMModel", "xLSTMConfig", "last_hidden_state",
         dict(hidden_size=64, embedding_dim=64, num_hidden_layers=2, num_heads=4, vocab_size=1000, use_cache=False,
              mode="inference", chunk_size=8, qk_dim_factor=0.5, v_dim_factor=1.0),
         _tokens(1000, (16, 24), mask=False)),
        ("hf_swiftformer", "SwiftFormerModel", "SwiftFormerConfig", "last_hidden_state",
         dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32]), _pixels((32, 64))),
    ]  # fmt: skip
    return [
        *_hf_cases(models),
        OutsideModel("hf_dynamic_cache_greedy", "transformers LlamaForCausalLM, small: a prompt then a greedy loop "
                     "of `steps` tokens on its DynamicCache (in and out of each call); int64 "
                     "tokens and the last logits", _CachedGreedy.build, _CachedGreedy.inputs, **HF_TOLERANCE),
    ]  # fmt: skip


class _CachedGreedy:
    """Generation as users write it without ``generate``: the prompt's call returns a
    ``DynamicCache`` in ``cache`` (``past_key_values`` before transformers 5), each next call takes
    it back with the last argmax token, ``use_cache=True``."""

    @staticmethod
    def build() -> Any:
        import torch

        transformers = _module("transformers")
        config = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, intermediate_size=128, vocab_size=1000)  # fmt: skip

        class Greedy(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = transformers.LlamaForCausalLM(config)

            def forward(self, input_ids: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
                out = self.model(input_ids=input_ids, use_cache=True)
                tokens = [out.logits[:, -1].argmax(-1, keepdim=True)]
                for _ in range(steps - 1):
                    out = self.model(input_ids=tokens[-1], cache=out.cache, use_cache=True)
                    tokens.append(out.logits[:, -1].argmax(-1, keepdim=True))
                return torch.cat(tokens, 1), out.logits[:, -1]

        return Greedy()

    @staticmethod
    def inputs(shape: int) -> Any:
        import torch

        ids = torch.randint(0, 1000, ((1, 3)[shape], (7, 11)[shape]), generator=_seeded(shape))
        return _call(ids, steps=(3, 4)[shape])
