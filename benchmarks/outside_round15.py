"""The fifteenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: lucidrains'
Perceiver AR, routing transformer (k-means routed attention, a mixture of experts inside), compressive
transformer (memories passed in and out), Point Transformer, SegFormer (on channels-last images),
CoCa, Flamingo's resampler and gated cross-attention, iTransformer (a dict of forecasts keyed by
length), hourglass transformer, MEGABYTE, Fastformer, invariant point attention, graph transformer,
ETSformer (Fourier extrapolation by complex numbers), Charformer's GBST (a boolean mask out),
Uformer in ema-pytorch's EMA wrapper; two hand-written decoders (a greedy generation loop with its
key-value cache passed in and out, and a decoding step writing a preallocated cache in place); and
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
from benchmarks.outside_round13 import HfCase, _hf_cases, _waves


def fifteenth_round() -> list[OutsideModel]:
    """The fifteenth round's models, library by library."""
    return (_language_models() + _memory_models() + _vision_models() + _multimodal_models() + _geometric_models()
            + _series_models() + _decoding_models() + _transformers_models())  # fmt: skip


def _masked_ids(lengths: tuple[int, int], keyword: str = "mask") -> Callable[[int], Any]:
    """Token ids of ``lengths[shape]`` at batch 1 then 3 and a boolean mask under ``keyword``
    (the last sample's last three tokens masked)."""

    def make(shape: int) -> Any:
        import torch

        batch, length = (1, 3)[shape], lengths[shape]
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, length - 3 :] = False
        return _call(torch.randint(0, 64, (batch, length), generator=_seeded(shape)), **{keyword: mask})

    return make


def _language_models() -> list[OutsideModel]:
    """lucidrains' language models: Perceiver AR, routing, hourglass, MEGABYTE, Fastformer."""
    import torch

    def perceiver_ar() -> Any:
        return _module("perceiver_ar_pytorch").PerceiverAR(num_tokens=64, dim=32, depth=2, max_seq_len=32,
                                                           cross_attn_seq_len=8, dim_head=32, heads=2)  # fmt: skip

    class Routing(torch.nn.Module):
        """A causal ``RoutingTransformerLM`` (attention routed by online k-means into windows of 8,
        2 local heads, a mixture-of-experts feed-forward in its second layer), returning its
        logits and auxiliary loss; its k-means centroids initialised by one call beforehand, as a
        trained model's are (the first call initialises them from the data)."""

        def __init__(self) -> None:
            super().__init__()
            self.lm = _module("routing_transformer").RoutingTransformerLM(
                num_tokens=64, dim=32, depth=2, max_seq_len=32, heads=4, dim_head=8, window_size=8, causal=True,
                n_local_attn_heads=2, local_attn_window_size=8, moe_layers=(2,), moe_num_experts=4)  # fmt: skip
            self.lm(torch.randint(0, 64, (2, 32), generator=torch.Generator().manual_seed(0)))

        def forward(self, ids: torch.Tensor, input_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.lm(ids, input_mask=input_mask)

    def hourglass() -> Any:
        return _module("hourglass_transformer_pytorch").HourglassTransformerLM(
            num_tokens=64, dim=32, max_seq_len=32, depth=(1, 1, 1), shorten_factor=2, heads=4, dim_head=8,
            causal=True)  # fmt: skip

    def megabyte() -> Any:
        return _module("MEGABYTE_pytorch").MEGABYTE(num_tokens=64, dim=(32, 16), depth=(1, 1), max_seq_len=(8, 4),
                                                     dim_head=8, heads=2)  # fmt: skip

    def fastformer() -> Any:
        return _module("fast_transformer_pytorch").FastTransformer(num_tokens=64, dim=32, depth=2, max_seq_len=32,
                                                                   heads=4, dim_head=8,
                                                                   absolute_pos_emb=True)  # fmt: skip

    return [
        OutsideModel("perceiver_ar_lm", "perceiver-ar-pytorch PerceiverAR: a prefix of 8 cross-attended, causal "
                     "self-attention over the rest, rotary positions", perceiver_ar, _masked_ids((20, 28),
                                                                                                  "prefix_mask"),
                     **_TOLERANCE),
        OutsideModel("routing_lm", "routing-transformer RoutingTransformerLM, causal: k-means routed windows, "
                     "local heads, a mixture-of-experts layer; logits and auxiliary loss", Routing,
                     _masked_ids((32, 32), "input_mask"), **_TOLERANCE),
        OutsideModel("hourglass_lm", "hourglass-transformer-pytorch HourglassTransformerLM: causal, shortened "
                     "by 2 twice (attention resampling), a mask; lengths multiples of 4 (its padding fails: the "
                     "library never imports math)", hourglass, _masked_ids((12, 20)), **_TOLERANCE),
        OutsideModel("megabyte_lm", "MEGABYTE-pytorch MEGABYTE: a global model over patches of 4 and a local "
                     "one inside them, ids padded to the patch", megabyte, _ids((10, 23)), **_TOLERANCE),
        OutsideModel("fastformer_lm", "fast-transformer-pytorch FastTransformer: additive attention pooled to "
                     "global query and key vectors, absolute positions, a mask", fastformer, _masked_ids((12, 20)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _memory_models() -> list[OutsideModel]:
    """The compressive transformer's memories and Charformer's soft tokenisation."""
    import torch

    class Compressive(torch.nn.Module):
        """A ``CompressiveTransformer`` called on one segment with the memories and compressed
        memories of the previous ones (a tuple of tensors in), returning the logits, the next
        segment's memories (its ``Memory`` namedtuple) and the reconstruction loss; GRU-gated
        residuals with mogrifier gates."""

        def __init__(self) -> None:
            super().__init__()
            self.lm = _module("compressive_transformer_pytorch").CompressiveTransformer(
                num_tokens=64, dim=32, seq_len=8, depth=2, mem_len=8, cmem_len=4, cmem_ratio=2, heads=4,
                mogrify_gru=True)  # fmt: skip

        def forward(self, ids: torch.Tensor, memories: tuple[torch.Tensor, torch.Tensor],
                    mask: torch.Tensor) -> tuple[Any, ...]:  # fmt: skip
            return self.lm(ids, memories=memories, mask=mask)

    def segment(shape: int) -> Any:
        batch, length, held, compressed = (1, 3)[shape], (8, 6)[shape], (8, 4)[shape], (2, 4)[shape]
        mask = torch.ones(batch, length, dtype=torch.bool)
        mask[-1, length - 2 :] = False
        memories = (_randn(shape, 2, batch, held, 32), _randn(shape + 1, 2, batch, compressed, 32))
        return _call(torch.randint(0, 64, (batch, length), generator=_seeded(shape)), memories, mask=mask)

    class Gbst(torch.nn.Module):
        """Charformer's gradient-based subword tokenisation: candidate blocks of 1 to 4 characters
        scored, consensus attention over the scores, downsampled by 2; the tokens and their
        boolean mask out."""

        def __init__(self) -> None:
            super().__init__()
            self.gbst = _module("charformer_pytorch").GBST(num_tokens=64, dim=32, max_block_size=4,
                                                           downsample_factor=2, score_consensus_attn=True)  # fmt: skip

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.gbst(ids, mask=mask)

    return [
        OutsideModel("compressive_memories", "compressive-transformer-pytorch CompressiveTransformer: memories "
                     "and compressed memories in and out (a namedtuple), mogrifier GRU gating, a mask",
                     Compressive, segment, **_TOLERANCE),
        OutsideModel("charformer_gbst", "charformer-pytorch GBST: blocks of 1-4 characters scored, consensus "
                     "attention, downsampled by 2; tokens and a boolean mask out", Gbst, _masked_ids((14, 21)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _vision_models() -> list[OutsideModel]:
    """SegFormer on channels-last images; Uformer in ema-pytorch's EMA wrapper."""
    import torch

    def segformer() -> Any:
        return _module("segformer_pytorch").Segformer(dims=(8, 16, 24, 32), heads=(1, 2, 2, 4),
                                                      ff_expansion=(2, 2, 2, 2), reduction_ratio=(4, 2, 2, 1),
                                                      num_layers=1, decoder_dim=16, num_classes=4)  # fmt: skip

    def channels_last(shape: int) -> Any:
        size = (32, 64)[shape]
        return _call(_randn(shape, (1, 3)[shape], 3, size, size).contiguous(memory_format=torch.channels_last))

    class Averaged(torch.nn.Module):
        """A Uformer (windowed attention in a U-Net of 2 stages) held by ema-pytorch's ``EMA``,
        called as its users call it at inference: through the wrapper, which runs its averaged
        copy."""

        def __init__(self) -> None:
            super().__init__()
            uformer = _module("uformer_pytorch").Uformer(dim=8, stages=2, num_blocks=1, window_size=4, dim_head=8,
                                                         heads=2, ff_mult=2)  # fmt: skip
            self.ema = _module("ema_pytorch").EMA(uformer, beta=0.9, update_after_step=0, update_every=1)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            return self.ema(images)

    return [
        OutsideModel("segformer_channels_last", "segformer-pytorch Segformer: overlapping patch merging, "
                     "spatial-reduction attention, mix feed-forward, called on channels-last images", segformer,
                     channels_last, **_TOLERANCE),
        OutsideModel("uformer_ema", "uformer-pytorch Uformer (windowed attention, 2 stages) through "
                     "ema-pytorch's EMA wrapper", Averaged,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, (16, 32)[shape], (16, 32)[shape])),
                     **_TOLERANCE),
    ]  # fmt: skip


def _multimodal_models() -> list[OutsideModel]:
    """CoCa and Flamingo's pieces."""
    import torch

    class Coca(torch.nn.Module):
        """CoCa on image tokens from an encoder run beforehand: the caption logits and, by a
        second call with ``return_embeddings=True``, the text and image embeddings, returned as
        a dict holding a tuple."""

        def __init__(self) -> None:
            super().__init__()
            self.coca = _module("coca_pytorch").CoCa(dim=32, num_tokens=64, unimodal_depth=1, multimodal_depth=1,
                                                     image_dim=24, num_img_queries=8, dim_head=8, heads=4)  # fmt: skip

        def forward(self, text: torch.Tensor, image_tokens: torch.Tensor) -> dict[str, Any]:
            logits = self.coca(text, image_tokens=image_tokens)
            embeddings = self.coca(text, image_tokens=image_tokens, return_embeddings=True)
            return {"logits": logits, "embeddings": embeddings}

    def captions(shape: int) -> Any:
        batch = (1, 3)[shape]
        text = torch.randint(1, 64, (batch, (9, 12)[shape]), generator=_seeded(shape))
        return _call(text, image_tokens=_randn(shape, batch, (16, 25)[shape], 24))

    class Flamingo(torch.nn.Module):
        """Flamingo's Perceiver resampler (media of 2 frames to 8 latents) and a gated
        cross-attention block, each text token attending to the media just before it
        (``media_locations``, a boolean mask); the gates set open (they start at 0, which would
        hide the cross-attention)."""

        def __init__(self) -> None:
            super().__init__()
            flamingo = _module("flamingo_pytorch")
            self.resampler = flamingo.PerceiverResampler(dim=32, depth=1, dim_head=8, heads=4, num_latents=8,
                                                         num_media_embeds=4)  # fmt: skip
            self.cross = flamingo.GatedCrossAttentionBlock(dim=32, dim_head=8, heads=4)
            with torch.no_grad():
                self.cross.attn_gate.fill_(0.5)
                self.cross.ff_gate.fill_(0.5)

        def forward(self, text: torch.Tensor, media: torch.Tensor, media_locations: torch.Tensor) -> torch.Tensor:
            return self.cross(text, self.resampler(media), media_locations=media_locations)

    def media(shape: int) -> Any:
        batch, length = (1, 3)[shape], (10, 14)[shape]
        locations = torch.zeros(batch, length, dtype=torch.bool)
        locations[:, 0] = True
        locations[:, length // 2] = True
        return _call(_randn(shape, batch, length, 32), _randn(shape + 1, batch, 2, (6, 9)[shape], 32),
                     media_locations=locations)  # fmt: skip

    return [
        OutsideModel("coca_captions", "CoCa-pytorch CoCa on image tokens: caption logits, then text and image "
                     "embeddings by a second call, as a dict holding a tuple", Coca, captions, **_TOLERANCE),
        OutsideModel("flamingo_cross", "flamingo-pytorch PerceiverResampler and GatedCrossAttentionBlock: text "
                     "attending to the media before it (boolean media locations)", Flamingo, media, **_TOLERANCE),
    ]  # fmt: skip


def _geometric_models() -> list[OutsideModel]:
    """Point Transformer, invariant point attention, graph transformer."""
    import torch

    class Points(torch.nn.Module):
        """A ``PointTransformerLayer``: vector attention over the 4 nearest points (by ``topk`` on
        distances), relative positions by an MLP, under a point mask."""

        def __init__(self) -> None:
            super().__init__()
            self.layer = _module("point_transformer_pytorch").PointTransformerLayer(dim=16, pos_mlp_hidden_dim=16,
                                                                                    attn_mlp_hidden_mult=2,
                                                                                    num_neighbors=4)  # fmt: skip

        def forward(self, feats: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.layer(feats, pos, mask=mask)

    def points(shape: int) -> Any:
        batch, count = (1, 3)[shape], (9, 12)[shape]
        mask = torch.ones(batch, count, dtype=torch.bool)
        mask[-1, count - 2 :] = False
        return _call(_randn(shape, batch, count, 16), _randn(shape + 1, batch, count, 3), mask=mask)

    class Ipa(torch.nn.Module):
        """AlphaFold2's invariant point attention block: residues' single and pairwise
        representations, their frames (rotations from unit quaternions, translations) as
        keyword arguments, a residue mask."""

        def __init__(self) -> None:
            super().__init__()
            self.block = _module("invariant_point_attention").IPABlock(dim=32, heads=2, scalar_key_dim=8,
                                                                       scalar_value_dim=8, point_key_dim=4,
                                                                       point_value_dim=4, pairwise_repr_dim=8,
                                                                       require_pairwise_repr=True)  # fmt: skip

        def forward(self, single: torch.Tensor, pairwise: torch.Tensor, rotations: torch.Tensor,
                    translations: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # fmt: skip
            return self.block(single, pairwise_repr=pairwise, rotations=rotations, translations=translations,
                              mask=mask)  # fmt: skip

    def residues(shape: int) -> Any:
        batch, count = (1, 3)[shape], (7, 10)[shape]
        quaternions = torch.nn.functional.normalize(_randn(shape, batch, count, 4), dim=-1)
        w, x, y, z = quaternions.unbind(-1)
        rotations = torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                                 2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                                 2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
                                -1).view(batch, count, 3, 3)  # fmt: skip
        mask = torch.ones(batch, count, dtype=torch.bool)
        mask[-1, count - 2 :] = False
        return _call(_randn(shape, batch, count, 32), _randn(shape + 1, batch, count, count, 8), rotations,
                     _randn(shape + 2, batch, count, 3), mask=mask)  # fmt: skip

    class Graph(torch.nn.Module):
        """A ``GraphTransformer`` over nodes and edge features, an adjacency matrix embedded into
        the edges, rotary relative positions, gated residuals; nodes and edges out."""

        def __init__(self) -> None:
            super().__init__()
            self.graph = _module("graph_transformer_pytorch").GraphTransformer(
                dim=32, depth=2, edge_dim=8, heads=4, dim_head=8, with_feedforwards=True, rel_pos_emb=True,
                accept_adjacency_matrix=True)  # fmt: skip

        def forward(self, nodes: torch.Tensor, edges: torch.Tensor, adj_mat: torch.Tensor,
                    mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            return self.graph(nodes, edges, adj_mat=adj_mat, mask=mask)

    def graphs(shape: int) -> Any:
        batch, count = (1, 3)[shape], (6, 9)[shape]
        mask = torch.ones(batch, count, dtype=torch.bool)
        mask[-1, count - 2 :] = False
        adjacency = torch.rand(batch, count, count, generator=_seeded(shape)) > 0.5
        return _call(_randn(shape, batch, count, 32), _randn(shape + 1, batch, count, count, 8),
                     adj_mat=adjacency.long(), mask=mask)  # fmt: skip

    return [
        OutsideModel("point_transformer", "point-transformer-pytorch PointTransformerLayer: vector attention over "
                     "4 nearest points, relative position MLP, a mask", Points, points, **_TOLERANCE),
        OutsideModel("ipa_block", "invariant-point-attention IPABlock: scalar, point and pairwise attention in "
                     "residue frames (rotations, translations), a mask", Ipa, residues, **_TOLERANCE),
        OutsideModel("graph_transformer", "graph-transformer-pytorch GraphTransformer: edge features, an "
                     "adjacency matrix, rotary positions, gated residuals; nodes and edges", Graph, graphs,
                     **_TOLERANCE),
    ]  # fmt: skip


def _series_models() -> list[OutsideModel]:
    """iTransformer's forecasts by length and ETSformer's Fourier extrapolation."""
    import torch

    def itransformer() -> Any:
        return _module("iTransformer").iTransformer(num_variates=5, lookback_len=24, dim=32, depth=2, heads=4,
                                                    dim_head=8, pred_length=(4, 8), num_tokens_per_variate=2,
                                                    num_mem_tokens=2, use_reversible_instance_norm=True)  # fmt: skip

    class Ets(torch.nn.Module):
        """An ``ETSFormer`` forecasting ``num_steps_forecast`` steps (a Python int of the call,
        another at each shape): frequency attention keeps the top-2 frequencies of an ``rfft``
        (complex numbers), exponential smoothing attention, damped growth; the forecast and its
        latents (a namedtuple)."""

        def __init__(self) -> None:
            super().__init__()
            self.ets = _module("etsformer_pytorch").ETSFormer(model_dim=32, time_features=2, layers=2, heads=4, K=2)

        def forward(self, series: torch.Tensor, num_steps_forecast: int) -> tuple[Any, ...]:
            return self.ets(series, num_steps_forecast=num_steps_forecast, return_latents=True)

    def forecasts(shape: int) -> Any:
        call = _sequences((16, 24), 2)(shape)
        return _call(*call.args, num_steps_forecast=(4, 6)[shape])

    return [
        OutsideModel("itransformer_dict", "iTransformer: variates as tokens, memory tokens, reversible instance "
                     "norm, hyper-connections; a dict of forecasts keyed by length (ints)", itransformer,
                     _sequences((24, 24), 5), **_TOLERANCE),
        OutsideModel("etsformer_complex", "ETSformer-pytorch ETSFormer: top-k frequencies of an rfft (complex), "
                     "exponential smoothing attention, a forecast length argument; forecast and latents", Ets,
                     forecasts, **_TOLERANCE),
    ]  # fmt: skip


class _Decoder:
    """A two-layer decoder of width 32 with four heads, written as generation code writes it:
    the keys and values of earlier positions are the caller's (a tuple of per-layer pairs, or
    preallocated tensors written in place)."""

    @staticmethod
    def build() -> Any:
        import torch

        class Layer(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.norm = torch.nn.LayerNorm(32)
                self.qkv = torch.nn.Linear(32, 96)
                self.out = torch.nn.Linear(32, 32)
                self.ff = torch.nn.Sequential(torch.nn.LayerNorm(32), torch.nn.Linear(32, 64), torch.nn.GELU(),
                                              torch.nn.Linear(64, 32))  # fmt: skip

            def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
                q, k, v = self.qkv(self.norm(x)).view(*x.shape[:2], 3, 4, 8).permute(2, 0, 3, 1, 4)
                return q, k, v

            def finish(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                       mask: torch.Tensor | None) -> torch.Tensor:  # fmt: skip
                attended = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                x = x + self.out(attended.transpose(1, 2).reshape(*x.shape))
                return x + self.ff(x)

        class Decoder(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.embed = torch.nn.Embedding(64, 32)
                self.positions = torch.nn.Embedding(32, 32)
                self.layers = torch.nn.ModuleList([Layer(), Layer()])
                self.head = torch.nn.Linear(32, 64)

        return Decoder()


def _decoding_models() -> list[OutsideModel]:
    """Two hand-written decoders: greedy generation with the cache in and out, and a decoding
    step writing a static cache in place."""
    import torch

    class Greedy(torch.nn.Module):
        """Greedy generation of ``steps`` tokens (a Python int of the call) after a prompt whose
        keys and values came from an earlier call (``past``, a tuple of per-layer pairs):
        each step attends to the cache, appends its keys and values, and feeds its argmax back.
        Returns a dict holding the new tokens (int64), the grown cache (a tuple of tuples),
        the last logits, and which sequences produced the end token 0 (bool)."""

        def __init__(self) -> None:
            super().__init__()
            self.decoder = _Decoder.build()

        def forward(self, last: torch.Tensor, past: tuple[tuple[torch.Tensor, torch.Tensor], ...],
                    steps: int) -> dict[str, Any]:  # fmt: skip
            decoder, tokens, logits = self.decoder, [], last.new_zeros(0)
            finished = torch.zeros(last.shape[0], dtype=torch.bool)
            cache = [tuple(pair) for pair in past]
            for _ in range(steps):
                position = cache[0][0].shape[2]
                x = decoder.embed(last) + decoder.positions.weight[position]
                for index, layer in enumerate(decoder.layers):
                    q, k, v = layer.project(x)
                    k, v = torch.cat((cache[index][0], k), 2), torch.cat((cache[index][1], v), 2)
                    cache[index] = (k, v)
                    x = layer.finish(x, q, k, v, None)
                logits = decoder.head(x[:, -1])
                last = logits.argmax(-1, keepdim=True)
                finished = finished | (last[:, 0] == 0)
                tokens.append(last)
            return {"tokens": torch.cat(tokens, 1), "past": tuple(cache), "logits": logits, "finished": finished}

    def greedy(shape: int) -> Any:
        batch, held = (1, 3)[shape], (5, 9)[shape]
        past = tuple((_randn(shape + 2 * i, batch, 4, held, 8), _randn(shape + 2 * i + 1, batch, 4, held, 8))
                     for i in range(2))  # fmt: skip
        return _call(torch.randint(1, 64, (batch, 1), generator=_seeded(shape)), past, steps=(3, 4)[shape])

    class StaticStep(torch.nn.Module):
        """One decoding step on a static cache, as exported decoders run (transformers'
        ``StaticCache``): the new tokens' keys and values are written in place into the caller's
        preallocated per-layer tensors at ``cache_position`` (``index_copy_``), attention masked to
        the positions written so far; the logits and the argmax tokens out."""

        def __init__(self) -> None:
            super().__init__()
            self.decoder = _Decoder.build()

        def forward(self, ids: torch.Tensor, cache_position: torch.Tensor, keys: list[torch.Tensor],
                    values: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            decoder = self.decoder
            x = decoder.embed(ids) + decoder.positions(cache_position)
            visible = torch.arange(keys[0].shape[2]) <= cache_position[:, None]
            for layer, k_cache, v_cache in zip(decoder.layers, keys, values):
                q, k, v = layer.project(x)
                k_cache.index_copy_(2, cache_position, k)
                v_cache.index_copy_(2, cache_position, v)
                x = layer.finish(x, q, k_cache, v_cache, visible)
            logits = decoder.head(x)
            return logits, logits.argmax(-1)

    def static_step(shape: int) -> Any:
        batch, start, new = (1, 3)[shape], (4, 9)[shape], (1, 3)[shape]
        keys = [_randn(shape + i, batch, 4, 16, 8) for i in range(2)]
        values = [_randn(shape + 2 + i, batch, 4, 16, 8) for i in range(2)]
        return _call(torch.randint(0, 64, (batch, new), generator=_seeded(shape)),
                     torch.arange(start, start + new), keys, values)  # fmt: skip

    return [
        OutsideModel("greedy_kv_cache", "hand-written greedy generation: a tuple of per-layer key-value pairs "
                     "in, grown by each of `steps` steps; a dict of int tokens, the cache, logits and a bool "
                     "mask out", Greedy, greedy, **_TOLERANCE),
        OutsideModel("static_cache_step", "hand-written decoding step writing preallocated key and value "
                     "tensors (inputs, lists) in place at cache_position, masked to the written positions",
                     StaticStep, static_step, **_TOLERANCE),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    decoder = dict(encoder, use_cache=False)
    speech = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                  conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=4)  # fmt: skip
    models: list[HfCase] = [
        ("hf_zamba2", "Zamba2ForCausalLM", "Zamba2Config", "logits",
         dict(decoder, num_key_value_heads=4, mamba_d_state=16, mamba_headdim=16, mamba_ngroups=1, n_mamba_heads=8,
              mamba_expand=2, chunk_size=8, layers_block_type=["mamba", "hybrid"], hybrid_layer_ids=[1],
              num_mem_blocks=1, use_shared_attention_adapter=False, adapter_rank=8, use_mem_rope=True,
              attention_head_dim=32), _tokens(1000)),
        ("hf_falcon_h1", "FalconH1ForCausalLM", "FalconH1Config", "logits",
         dict(decoder, num_key_value_heads=2, head_dim=16, mamba_d_ssm=64, mamba_n_heads=4, mamba_d_head=16,
              mamba_n_groups=1, mamba_d_state=16, mamba_chunk_size=8, mamba_expand=1), _tokens(1000)),
        ("hf_lfm2", "Lfm2ForCausalLM", "Lfm2Config", "logits",
         dict(decoder, num_key_value_heads=2, layer_types=["conv", "full_attention"], conv_L_cache=3,
              block_auto_adjust_ff_dim=False), _tokens(1000)),
        ("hf_qwen3", "Qwen3ForCausalLM", "Qwen3Config", "logits", dict(decoder, num_key_value_heads=2, head_dim=16),
         _tokens(1000)),
        ("hf_jetmoe", "JetMoeForCausalLM", "JetMoeConfig", "logits",
         dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_key_value_heads=2, kv_channels=16,
              intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, use_cache=False), _tokens(1000)),
        ("hf_dinov2_registers", "Dinov2WithRegistersModel", "Dinov2WithRegistersConfig", "pooler_output",
         dict(encoder, image_size=32, patch_size=8, num_register_tokens=4), _pixels((32, 48))),
        ("hf_data2vec_audio", "Data2VecAudioModel", "Data2VecAudioConfig", "last_hidden_state", speech,
         _waves((1600, 2000), None)),
        ("hf_sew", "SEWModel", "SEWConfig", "last_hidden_state", dict(speech, squeeze_factor=2),
         _waves((1600, 2000), None)),
        ("hf_unispeech", "UniSpeechModel", "UniSpeechConfig", "last_hidden_state", speech,
         _waves((1600, 2000), None)),
        ("hf_timesfm", "TimesFmModelForPrediction", "TimesFmConfig", "mean_predictions",
         dict(patch_length=8, context_length=32, horizon_length=8, hidden_size=32, intermediate_size=32,
              head_dim=8, num_attention_heads=4, num_hidden_layers=2, quantiles=[0.1, 0.5, 0.9]), _past_values),
    ]  # fmt: skip
    return _hf_cases(models)


def _past_values(shape: int) -> Any:
    """TimesFM's inputs as its users pass them: a list of 1-D series of different lengths (padded
    by the model) and each one's frequency class."""
    import torch

    lengths = ((20,), (32, 17, 25))[shape]
    series = [_randn(shape + i, length).cumsum(0) for i, length in enumerate(lengths)]
    return _call(past_values=series, freq=torch.tensor([0, 1, 2][: len(lengths)]))
