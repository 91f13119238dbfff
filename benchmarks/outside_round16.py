"""The sixteenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: lucidrains'
Reformer (reversible layers), FLASH (gated attention units), gated state spaces (an FFT
convolution), the n-grammer (vector-quantised bigrams), the simple hierarchical transformer, ISAB,
native sparse attention, PEER, mixture of attention, AlphaFold2's
triangle multiplicative update, deformable attention, bidirectional cross attention, TimeSformer,
the VN-Transformer and the feedback transformer (memory in and out); S5 and the LRU (complex
parameters, a recurrent state in and out); three hand-written models (a streaming normaliser
updating its state buffers in place, optional keywords given on one call and not the other,
float64 and bfloat16 parameters in one model); and
``transformers`` architectures no earlier round built.

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _pixels, _randn, _seeded, _tokens
from benchmarks.outside_round9 import _module
from benchmarks.outside_round10 import _tokens as _ids
from benchmarks.outside_round12 import _TOLERANCE, _sequences  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases, _masked_sequence
from benchmarks.outside_round15 import _masked_ids


def sixteenth_round() -> list[OutsideModel]:
    """The sixteenth round's models, library by library."""
    return (_language_models() + _set_and_vision_models() + _geometric_models() + _recurrent_models()
            + _state_models() + _transformers_models())  # fmt: skip


def _masked_pair(lengths: tuple[int, int], held: tuple[int, int]) -> Callable[[int], Any]:
    """A sequence of ``lengths[shape]`` steps of width 32 and a context of ``held[shape]`` of width
    24 at batch 1 then 3, and a boolean mask for each (the last sample's last two steps, the first
    sample's last three context entries masked)."""

    def make(shape: int) -> Any:
        import torch

        batch, length, count = (1, 3)[shape], lengths[shape], held[shape]
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, length - 2 :] = False
        context_mask = torch.ones(batch, count, dtype=torch.bool)
        context_mask[0, count - 3 :] = False
        return _call(_randn(shape, batch, length, 32), _randn(shape + 1, batch, count, 24), mask, context_mask)

    return make


def _language_models() -> list[OutsideModel]:
    """lucidrains' language models: Reformer, FLASH, gated state spaces, the n-grammer, the
    hierarchical transformer."""
    import torch

    def reformer() -> Any:
        return _module("reformer_pytorch").ReformerLM(num_tokens=64, dim=32, depth=2, max_seq_len=32, heads=4,
                                                      dim_head=8, causal=True, use_full_attn=True, ff_chunks=2,
                                                      num_mem_kv=2)  # fmt: skip

    class Reformer(torch.nn.Module):
        """A causal ``ReformerLM`` (reversible layers: the two residual streams are averaged at the
        end, chunked feed-forwards, 2 memory key-values), full attention (its LSH attention hashes
        by rotations drawn at random in each call), called with ``input_mask``."""

        def __init__(self) -> None:
            super().__init__()
            self.lm = reformer()

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.lm(ids, input_mask=mask)

    def flash() -> Any:
        return _module("flash_pytorch").FLASHTransformer(dim=32, num_tokens=64, depth=2, group_size=8,
                                                         query_key_dim=16, causal=True)  # fmt: skip

    def gss() -> Any:
        return _module("gated_state_spaces_pytorch").GatedStateSpacesLM(num_tokens=64, dim=32, depth=2,
                                                                        dim_expansion_factor=2, dss_kernel_N=16,
                                                                        dss_kernel_H=16)  # fmt: skip

    class Hierarchical(torch.nn.Module):
        """A ``HierarchicalTransformer`` with a second hierarchy compressed by 2 (a causal
        convolution), local windows per hierarchy, merged back into the tokens; the logits and
        the hierarchical token embeddings (a list) out, as ``return_logits_and_embeds`` gives."""

        def __init__(self) -> None:
            super().__init__()
            self.lm = _module("simple_hierarchical_transformer").HierarchicalTransformer(
                num_tokens=64, dim=32, depth=2, seq_len=32, dim_head=8, heads=4, hierarchies=(1, 2),
                window_sizes=(8, 4), predict_hierarchy=None)  # fmt: skip

        def forward(self, ids: torch.Tensor) -> Any:
            return self.lm(ids, return_logits_and_embeds=True)

    class Ngrammer(torch.nn.Module):
        """A ``VQNgrammer`` on token embeddings: each head's embeddings quantised to the nearest
        of 32 clusters (argmin of distances, int64 ids), bigrams of cluster ids hashed into an
        embedding table, concatenated back, under a mask."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(64, 32)
            self.ngrammer = _module("n_grammer_pytorch").VQNgrammer(num_clusters=32, num_heads=4, dim_per_head=8,
                                                                     ngram_vocab_size=512, ngram_emb_dim=4)  # fmt: skip

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.ngrammer(self.embed(ids), mask=mask)

    return [
        OutsideModel("reformer_reversible", "reformer-pytorch ReformerLM, causal: reversible layers, chunked "
                     "feed-forwards, memory key-values, full attention, an input mask", Reformer,
                     _masked_ids((16, 24)), **_TOLERANCE),
        OutsideModel("flash_gau", "FLASH-pytorch FLASHTransformer, causal: gated attention units, quadratic "
                     "attention in groups of 8 and linear attention across them, token shift, a mask", flash,
                     _masked_ids((16, 20)), **_TOLERANCE),
        OutsideModel("gss_fft", "gated-state-spaces-pytorch GatedStateSpacesLM: diagonal state spaces as a long "
                     "convolution by rfft/irfft (complex kernels), gated", gss, _ids((16, 24)), **_TOLERANCE),
        OutsideModel("ngrammer_vq", "n-grammer-pytorch VQNgrammer: embeddings quantised per head (int64 cluster "
                     "ids), hashed bigram embeddings concatenated, a mask", Ngrammer, _masked_ids((12, 18)),
                     **_TOLERANCE),
        OutsideModel("hierarchical_lm", "simple-hierarchical-transformer: a second hierarchy compressed by 2, "
                     "local windows, merged back; logits and a list of embeddings", Hierarchical, _ids((16, 24)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _set_and_vision_models() -> list[OutsideModel]:
    """ISAB, native sparse attention, PEER, mixture of attention, bidirectional cross attention,
    deformable attention, TimeSformer."""
    import torch

    class Isab(torch.nn.Module):
        """An ``ISAB`` (induced set attention: 4 learned latents attend to the set, the set to
        them) under a set mask; the set and the latents out."""

        def __init__(self) -> None:
            super().__init__()
            self.isab = _module("isab_pytorch").ISAB(dim=32, heads=4, num_latents=4, latent_self_attend=True)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.isab(x, mask=mask)

    def sparse() -> Any:
        return _module("native_sparse_attention_pytorch").SparseAttention(
            dim=32, dim_head=8, heads=4, sliding_window_size=4, compress_block_size=4, compress_block_sliding_stride=2,
            selection_block_size=4, num_selected_blocks=2, kv_heads=2, causal=True)  # fmt: skip

    def peer() -> Any:
        return _module("PEER_pytorch").PEER(dim=32, heads=4, num_experts=256, num_experts_per_head=4, dim_key=16,
                                            pre_rmsnorm=True)  # fmt: skip

    class Routed(torch.nn.Module):
        """A ``MixtureOfAttention`` of 2 experts over a context, each routing the top 6 queries and
        top 8 key-values to itself (``use_triton=False``, ``flash_attn=False``: the CPU path), both
        masks given."""

        def __init__(self) -> None:
            super().__init__()
            self.attn = _module("mixture_of_attention").MixtureOfAttention(
                dim=32, dim_context=24, num_routed_queries=6, num_routed_key_values=8, num_experts=2, dim_head=8,
                heads=4, use_triton=False, flash_attn=False)  # fmt: skip

        def forward(self, x: torch.Tensor, context: torch.Tensor, mask: torch.Tensor,
                    context_mask: torch.Tensor) -> torch.Tensor:  # fmt: skip
            return self.attn(x, context=context, mask=mask, context_mask=context_mask)

    class Bidirectional(torch.nn.Module):
        """A ``BidirectionalCrossAttention``: two sequences attend to each other by one shared
        similarity matrix, talking heads, both masks; both updated sequences out."""

        def __init__(self) -> None:
            super().__init__()
            self.attn = _module("bidirectional_cross_attention").BidirectionalCrossAttention(
                dim=32, heads=4, dim_head=8, context_dim=24, talking_heads=True, prenorm=True)  # fmt: skip

        def forward(self, x: torch.Tensor, context: torch.Tensor, mask: torch.Tensor,
                    context_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            return self.attn(x, context, mask=mask, context_mask=context_mask)

    def deformable() -> Any:
        return _module("deformable_attention").DeformableAttention2D(dim=32, dim_head=8, heads=4, downsample_factor=2,
                                                                     offset_scale=2, offset_groups=2,
                                                                     offset_kernel_size=4)  # fmt: skip

    class Video(torch.nn.Module):
        """A ``TimeSformer``: divided space-time attention over frames of 8x8 patches, rotary
        positions, a frame mask (the last clip's last frame padded)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = _module("timesformer_pytorch").TimeSformer(dim=32, num_frames=4, num_classes=5, image_size=16,
                                                                    patch_size=8, depth=2, heads=4,
                                                                    dim_head=8)  # fmt: skip

        def forward(self, video: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.model(video, mask=mask)

    def clips(shape: int) -> Any:
        batch, frames = (1, 3)[shape], (3, 4)[shape]
        mask = torch.ones(batch, frames, dtype=torch.bool)
        mask[-1, -1] = False
        return _call(_randn(shape, batch, frames, 3, 16, 16), mask=mask)

    return [
        OutsideModel("isab_set", "isab-pytorch ISAB: 4 latents attending to a masked set and back (latent "
                     "self-attention); the set and the latents", Isab, _masked_sequence((9, 13), 32), **_TOLERANCE),
        OutsideModel("native_sparse_attention", "native-sparse-attention-pytorch SparseAttention, causal: "
                     "compressed blocks, the top 2 blocks selected, a sliding window, gated (CPU path)", sparse,
                     _sequences((16, 24), 32), **_TOLERANCE),
        OutsideModel("peer_experts", "PEER-pytorch PEER: 256 single-neuron experts retrieved by product keys "
                     "(top 4 per head of 4)", peer, _sequences((10, 14), 32), **_TOLERANCE),
        OutsideModel("mixture_of_attention", "mixture-of-attention MixtureOfAttention: 2 experts routing the top "
                     "queries and key-values of a context to themselves, both masks", Routed,
                     _masked_pair((12, 16), (14, 20)), **_TOLERANCE),
        OutsideModel("bidirectional_cross", "bidirectional-cross-attention: two masked sequences attending to "
                     "each other by one similarity matrix, talking heads; both out", Bidirectional,
                     _masked_pair((10, 14), (7, 12)), **_TOLERANCE),
        OutsideModel("deformable_attention_2d", "deformable-attention DeformableAttention2D: offsets by a grouped "
                     "convolution, keys and values sampled by grid_sample, continuous position bias", deformable,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 32, (8, 12)[shape], (8, 12)[shape])),
                     **_TOLERANCE),
        OutsideModel("timesformer_video", "timesformer-pytorch TimeSformer: divided space-time attention, rotary "
                     "positions, a frame mask", Video, clips, **_TOLERANCE),
    ]  # fmt: skip


def _geometric_models() -> list[OutsideModel]:
    """AlphaFold2's triangle multiplicative update and the VN-Transformer."""
    import torch

    class Triangle(torch.nn.Module):
        """Outgoing then ingoing ``TriangleMultiplicativeModule``s on a pairwise representation
        under a residue-pair mask."""

        def __init__(self) -> None:
            super().__init__()
            module = _module("triangle_multiplicative_module").TriangleMultiplicativeModule
            self.outgoing = module(dim=16, hidden_dim=16, mix="outgoing")
            self.ingoing = module(dim=16, hidden_dim=16, mix="ingoing")

        def forward(self, pairwise: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            pairwise = pairwise + self.outgoing(pairwise, mask=mask)
            return pairwise + self.ingoing(pairwise, mask=mask)

    def pairwise(shape: int) -> Any:
        batch, count = (1, 3)[shape], (6, 9)[shape]
        residues = torch.ones(batch, count, dtype=torch.bool)
        residues[-1, count - 2 :] = False
        return _call(_randn(shape, batch, count, count, 16), residues[:, :, None] & residues[:, None, :])

    class Vn(torch.nn.Module):
        """A ``VNTransformer`` over 3-d coordinates and per-point features (``feats`` as a keyword),
        translation-invariant, under a point mask; coordinates and features out."""

        def __init__(self) -> None:
            super().__init__()
            self.model = _module("VN_transformer").VNTransformer(dim=16, depth=2, dim_feat=8, dim_head=8, heads=2,
                                                                 translation_invariant=True)  # fmt: skip

        def forward(self, coors: torch.Tensor, feats: torch.Tensor, mask: torch.Tensor) -> Any:
            return self.model(coors, feats=feats, mask=mask)

    def clouds(shape: int) -> Any:
        batch, count = (1, 3)[shape], (10, 14)[shape]
        mask = torch.ones(batch, count, dtype=torch.bool)
        mask[-1, count - 2 :] = False
        return _call(_randn(shape, batch, count, 3), _randn(shape + 1, batch, count, 8), mask=mask)

    return [
        OutsideModel("triangle_multiplicative", "triangle-multiplicative-module: AlphaFold2's outgoing and ingoing "
                     "triangle updates of a pairwise representation, a pair mask", Triangle, pairwise,
                     **_TOLERANCE),
        OutsideModel("vn_transformer", "VN-transformer VNTransformer: vector-neuron attention over coordinates "
                     "and features, translation-invariant, a mask", Vn, clouds, **_TOLERANCE),
    ]  # fmt: skip


def _recurrent_models() -> list[OutsideModel]:
    """The feedback transformer's memory, S5's and the LRU's complex recurrent states."""
    import torch

    class Feedback(torch.nn.Module):
        """A ``FeedbackTransformer`` run over its segments of 4 tokens in a Python loop, every
        layer attending to one memory of all layers' past outputs (``memory`` given, the next
        one returned)."""

        def __init__(self) -> None:
            super().__init__()
            self.lm = _module("feedback_transformer_pytorch").FeedbackTransformer(num_tokens=64, dim=32, depth=2,
                                                                                  mem_len=8, seq_len=4, heads=4,
                                                                                  dim_head=8)  # fmt: skip

        def forward(self, ids: torch.Tensor, memory: tuple[torch.Tensor, torch.Tensor]) -> Any:
            return self.lm(ids, memory=memory, return_memory=True)

    def feedback(shape: int) -> Any:
        batch, held = (1, 3)[shape], (4, 8)[shape]
        memory = (_randn(shape, batch, held, 32), _randn(shape + 1, batch, held, 32))
        return _call(torch.randint(0, 64, (batch, (8, 12)[shape]), generator=_seeded(shape)), memory)

    class S5(torch.nn.Module):
        """An ``S5Block`` (a diagonal state space with complex eigenvalues, discretised per call)
        continuing from the caller's complex state: the output and the next state out."""

        def __init__(self) -> None:
            super().__init__()
            self.block = _module("s5").S5Block(dim=16, state_dim=16, bidir=False)

        def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.block(x, state=state, return_state=True)

    def s5_inputs(shape: int) -> Any:
        batch = (1, 3)[shape]
        state = torch.complex(_randn(shape + 1, batch, 16), _randn(shape + 2, batch, 16)) / 2
        return _call(_randn(shape, batch, (12, 20)[shape], 16), state)

    class Lru(torch.nn.Module):
        """The ``LRU`` (linear recurrent unit: complex diagonal recurrence, exponential
        parametrisation) stepping through each sequence of the batch, token by token in Python
        loops, from the caller's complex state (one, shared by the batch: the library's)."""

        def __init__(self) -> None:
            super().__init__()
            self.lru = _module("LRU_pytorch").LRU(in_features=16, out_features=16, state_features=8)

        def forward(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
            return self.lru(x, state=state)

    def lru_inputs(shape: int) -> Any:
        state = torch.complex(_randn(shape + 1, 8), _randn(shape + 2, 8))
        return _call(_randn(shape, (1, 3)[shape], (6, 9)[shape], 16), state)

    return [
        OutsideModel("feedback_memory", "feedback-transformer-pytorch FeedbackTransformer: segments of 4 in a "
                     "loop, one memory of all layers' outputs in and out", Feedback, feedback, **_TOLERANCE),
        OutsideModel("s5_complex_state", "s5-pytorch S5Block: complex diagonal state space, a complex state in "
                     "and out", S5, s5_inputs, **_TOLERANCE),
        OutsideModel("lru_complex_state", "LRU-pytorch LRU: complex diagonal recurrence stepped over the "
                     "sequence from a complex state", Lru, lru_inputs, **_TOLERANCE),
    ]  # fmt: skip


def _state_models() -> list[OutsideModel]:
    """Three hand-written models: state buffers updated in place at inference, optional keywords
    given on some calls, and parameters of three dtypes in one model."""
    import torch

    class Streaming(torch.nn.Module):
        """A streaming feature normaliser as on-device audio front ends write it: running mean
        and variance buffers updated in place by every call (an exponential average, in eval
        mode), a call counter (int64) incremented in place; features normalised by the updated
        statistics, and the counter's value out as a bool (warm after 4 calls)."""

        mean: torch.Tensor
        var: torch.Tensor
        calls: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.zeros(16))
            self.register_buffer("var", torch.ones(16))
            self.register_buffer("calls", torch.zeros((), dtype=torch.long))
            self.proj = torch.nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, momentum: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
            frame = x.mean((0, 1))
            self.mean.mul_(1 - momentum).add_(frame, alpha=momentum)
            self.var.mul_(1 - momentum).add_((x - self.mean).pow(2).mean((0, 1)), alpha=momentum)
            self.calls.add_(1)
            return self.proj((x - self.mean) / (self.var + 1e-5).sqrt()), self.calls >= 4

    class Scorer(torch.nn.Module):
        """A scoring head as decoding code calls it: ``temperature`` and a boolean ``allowed``
        mask are optional keywords, left out on the first call and given on the second; the
        log-probabilities and the argmax tokens (int64) out."""

        def __init__(self) -> None:
            super().__init__()
            self.head = torch.nn.Linear(32, 64)

        def forward(self, hidden: torch.Tensor, temperature: float = 1.0,
                    allowed: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            logits = self.head(hidden) / temperature
            if allowed is not None:
                logits = logits.masked_fill(~allowed, float("-inf"))
            return logits.log_softmax(-1), logits.argmax(-1)

    def scored(shape: int) -> Any:
        hidden = _randn(shape, (1, 3)[shape], (4, 6)[shape], 32)
        if not shape:
            return _call(hidden)
        return _call(hidden, temperature=0.7, allowed=torch.rand(64, generator=_seeded(shape)) > 0.3)

    class MixedPrecision(torch.nn.Module):
        """A float64 input projection (a numerically sensitive front end kept in double), a
        bfloat16 body and a float32 head, the casts written out as users write them; the
        float64 features and the float32 logits out."""

        def __init__(self) -> None:
            super().__init__()
            self.front = torch.nn.Linear(12, 32).double()
            self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32),
                                            torch.nn.LayerNorm(32)).to(torch.bfloat16)  # fmt: skip
            self.head = torch.nn.Linear(32, 8)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features = torch.tanh(self.front(x))
            hidden = self.body(features.to(torch.bfloat16))
            return features, self.head(hidden.float() + features.float())

    return [
        OutsideModel("streaming_state_buffers", "hand-written streaming normaliser: running mean, variance and "
                     "an int64 counter updated in place each call, a float keyword, a bool out", Streaming,
                     lambda shape: _call(*_sequences((8, 12), 16)(shape).args, momentum=0.05), rtol=1e-4,
                     atol=1e-4),
        OutsideModel("optional_keywords", "hand-written scoring head: a float and a mask keyword left out on one "
                     "call and given on the other; log-probabilities and int64 tokens", Scorer, scored,
                     **_TOLERANCE),
        OutsideModel("float64_bfloat16_params", "hand-written model with float64, bfloat16 and float32 "
                     "parameters, casts between them; float64 and float32 outputs", MixedPrecision,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 12, dtype=torch.float64)),
                     rtol=2e-2, atol=2e-2),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                   use_cache=False)  # fmt: skip
    models: list[HfCase] = [
        ("hf_cohere2", "Cohere2ForCausalLM", "Cohere2Config", "logits",
         dict(decoder, num_key_value_heads=2, sliding_window=8, layer_types=["sliding_attention", "full_attention"]),
         _tokens(1000)),
        ("hf_granite_moe_hybrid", "GraniteMoeHybridForCausalLM", "GraniteMoeHybridConfig", "logits",
         dict(decoder, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, shared_intermediate_size=64,
              layer_types=["mamba", "attention"], mamba_n_heads=8, mamba_d_head=16, mamba_d_state=16,
              mamba_n_groups=1, mamba_chunk_size=8, mamba_expand=2), _tokens(1000)),
        ("hf_ernie4_5_moe", "Ernie4_5_MoeForCausalLM", "Ernie4_5_MoeConfig", "logits",
         dict(decoder, num_key_value_heads=2, moe_num_experts=4, moe_k=2, moe_intermediate_size=32,
              moe_num_shared_experts=1, moe_layer_start_index=1), _tokens(1000)),
        ("hf_exaone4", "Exaone4ForCausalLM", "Exaone4Config", "logits",
         dict(decoder, num_key_value_heads=2, sliding_window=8, sliding_window_pattern=2), _tokens(1000)),
        ("hf_dinov3_vit", "DINOv3ViTModel", "DINOv3ViTConfig", "pooler_output",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32,
              patch_size=8, num_register_tokens=2), _pixels((32, 48))),
        ("hf_dac", "DacModel", "DacConfig", None,
         dict(encoder_hidden_size=8, downsampling_ratios=[2, 4], decoder_hidden_size=32, n_codebooks=3,
              codebook_size=64, codebook_dim=4, hidden_size=32),
         lambda shape: _call(input_values=_randn(shape, (1, 3)[shape], 1, (256, 384)[shape]))),
    ]  # fmt: skip
    return _hf_cases(models)
