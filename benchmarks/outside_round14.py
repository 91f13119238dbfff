"""The fourteenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: lucidrains'
hierarchical (H-Transformer-1D), bucket-sorting (Sinkhorn), agent, Taylor-series linear and
halo attentions, BoTNet's relative-position blocks, Soft MoE, product-key memory, minGRU and
hyper-connections; the equivariant graph networks EGNN and the E(n)-transformer; torchcde's neural
controlled differential equations; pytorch-tcn's conditioned temporal convolutions; X-UNet;
Linformer; and ``transformers`` architectures no
earlier round built (Bamba's Mamba-2 mixers, GraniteMoE, Helium, Phi-3 with LongRoPE, GPT-J,
BioGPT, Mimi's codec encoder, FocalNet, Reformer's local attention, MRA, SigLIP2's NaFlex vision
tower).

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


def fourteenth_round() -> list[OutsideModel]:
    """The fourteenth round's models, library by library."""
    return (_attention_models() + _mixture_models() + _recurrent_models() + _equivariant_models()
            + _signal_models() + _transformers_models())  # fmt: skip


def _attention_models() -> list[OutsideModel]:
    """lucidrains' attention variants: hierarchical, sorted buckets, agents, Taylor series, halos,
    2-D relative positions."""
    import torch

    def htransformer() -> Any:
        return _module("h_transformer_1d").HTransformer1D(num_tokens=64, dim=32, depth=2, max_seq_len=32, heads=4,
                                                          dim_head=8, block_size=4, causal=True,
                                                          shift_tokens=True)  # fmt: skip

    class Sinkhorn(torch.nn.Module):
        """A ``SinkhornTransformerLM`` (buckets of 4 sorted by a learned Sinkhorn permutation,
        local attention beside it), wrapped in its ``Autopadder`` so lengths need not be a multiple
        of the bucket, with an input mask."""

        def __init__(self) -> None:
            super().__init__()
            sinkhorn = _module("sinkhorn_transformer")
            lm = sinkhorn.SinkhornTransformerLM(num_tokens=64, dim=32, depth=2, max_seq_len=32, heads=4, dim_head=8,
                                                bucket_size=4, n_local_attn_heads=2, sinkhorn_iter=3)  # fmt: skip
            self.lm = sinkhorn.Autopadder(lm)

        def forward(self, ids: torch.Tensor, input_mask: torch.Tensor) -> torch.Tensor:
            return self.lm(ids, input_mask=input_mask)

    def masked_ids(lengths: tuple[int, int]) -> Callable[[int], Any]:
        def make(shape: int) -> Any:
            batch, length = (1, 3)[shape], lengths[shape]
            mask = torch.ones(batch, length, dtype=torch.bool)
            mask[-1, length - 2 :] = False
            return _call(torch.randint(0, 64, (batch, length), generator=_seeded(shape)), input_mask=mask)

        return make

    def masked_with_eps(shape: int) -> Any:
        call = _masked_sequence((10, 13), 32)(shape)
        return _call(*call.args, **call.kwargs, eps=(1e-4, 1e-3)[shape])

    class Agents(torch.nn.Module):
        """Agent attention (4 agent tokens, talking heads, gating) and Taylor-series linear
        attention (rotary, gated value heads) on the same features, each under the key mask, the
        latter's ``eps`` a Python float of the call (another at each shape). (Its
        causal form needs pytorch-fast-transformers' compiled kernel; ``remove_even_power_dups``
        indexes by a boolean mask, a size from the data: ``torch.export`` refuses it.)"""

        def __init__(self) -> None:
            super().__init__()
            agent, taylor = _module("agent_attention_pytorch"), _module("taylor_series_linear_attention")
            self.agent = agent.AgentSelfAttention(dim=32, num_agent_tokens=4, dim_head=8, heads=4)
            self.taylor = taylor.TaylorSeriesLinearAttn(dim=32, dim_head=8, heads=4, rotary_emb=True,
                                                        gate_value_heads=True)  # fmt: skip

        def forward(self, x: torch.Tensor, mask: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
            return self.agent(x, mask=mask), self.taylor(x, mask=mask, eps=eps)

    class Halo(torch.nn.Module):
        """HaloNet's blocked local self-attention (blocks of 4 with a halo of 2, by ``F.unfold``)
        on a feature map, then a BoTNet ``BottleStack`` (2-D relative positions, downsampling)."""

        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
            self.halo = _module("halonet_pytorch").HaloAttention(dim=16, block_size=4, halo_size=2, dim_head=8, heads=2)
            self.bot = _module("bottleneck_transformer_pytorch").BottleStack(dim=16, fmap_size=8, dim_out=32,
                                                                             proj_factor=2, num_layers=2, heads=2,
                                                                             dim_head=8, downsample=True,
                                                                             rel_pos_emb=True)  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.bot(self.halo(self.stem(x))).mean((2, 3))

    return [
        OutsideModel("htransformer_causal_lm", "h-transformer-1d HTransformer1D, causal: hierarchical attention "
                     "over coarsened blocks of 4, token shift", htransformer, _ids((16, 32)), **_TOLERANCE),
        OutsideModel("sinkhorn_lm", "sinkhorn-transformer SinkhornTransformerLM in its Autopadder: buckets "
                     "sorted by Sinkhorn iterations, local heads, an input mask", Sinkhorn, masked_ids((10, 15)),
                     **_TOLERANCE),
        OutsideModel("agent_taylor_attention", "agent-attention-pytorch AgentSelfAttention under a mask and "
                     "taylor-series-linear-attention TaylorSeriesLinearAttn (rotary, gated values, eps a float "
                     "argument)", Agents, masked_with_eps, **_TOLERANCE),
        OutsideModel("halo_botnet", "halonet-pytorch HaloAttention (blocks with halos by F.unfold) and "
                     "bottleneck-transformer-pytorch BottleStack (2-D relative positions)", Halo,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, 8, 8)), **_TOLERANCE),
    ]  # fmt: skip


def _mixture_models() -> list[OutsideModel]:
    """Soft MoE, product-key memory and hyper-connections around lucidrains' blocks."""
    import torch

    class Soft(torch.nn.Module):
        """A Soft MoE layer (4 experts, slots by softmax over tokens) and a product-key memory
        (top-8 of 16x16 keys, an embedding bag of values), each a residual branch. (Soft MoE's
        default ``offload_unused_experts_to_cpu`` moves its experts by ``Module.to`` in forward:
        ``torch.export`` refuses it, "Couldn't swap Linear.weight".)"""

        def __init__(self) -> None:
            super().__init__()
            self.moe = _module("soft_moe_pytorch").SoftMoE(
                dim=32, seq_len=16, num_experts=4, offload_unused_experts_to_cpu=False
            )
            self.memory = _module("product_key_memory").PKM(dim=32, heads=2, num_keys=16, topk=8, dim_head=16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.moe(x)
            return x + self.memory(x)

    class SelfAttention(torch.nn.Module):
        """A pre-norm MultiheadAttention called on its input as query, key and value."""

        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(32)
            self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.norm(x)
            return self.attention(x, x, x, need_weights=False)[0]

    class Hyper(torch.nn.Module):
        """hyper-connections as its README wires them: the residual stream expanded to 4 streams,
        each branch (attention, feed-forward) wrapped by ``init_hyper_conn``, reduced at the end."""

        def __init__(self) -> None:
            super().__init__()
            hyper = _module("hyper_connections")
            init, self.expand, self.reduce = hyper.get_init_and_expand_reduce_stream_functions(4)
            self.layers = torch.nn.ModuleList()
            for _ in range(2):
                self.layers.append(init(dim=32, branch=SelfAttention()))
                self.layers.append(init(dim=32, branch=torch.nn.Sequential(torch.nn.LayerNorm(32),
                                                                           torch.nn.Linear(32, 64), torch.nn.GELU(),
                                                                           torch.nn.Linear(64, 32))))  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.expand(x)
            for layer in self.layers:
                x = layer(x)
            return self.reduce(x)

    return [
        OutsideModel("soft_moe_pkm", "soft-moe-pytorch SoftMoE (4 experts) and product-key-memory PKM "
                     "(top-8 product keys, embedding bag)", Soft, lambda shape: _call(_randn(shape, (1, 3)[shape], 16,
                                                                                             32)), **_TOLERANCE),
        OutsideModel("hyper_connections", "hyper-connections: 4 residual streams around MultiheadAttention and "
                     "feed-forward branches, expanded and reduced", Hyper, _sequences((10, 14), 32), **_TOLERANCE),
    ]  # fmt: skip


def _recurrent_models() -> list[OutsideModel]:
    """minGRU's log-space parallel scan and pytorch-tcn's conditioned causal convolutions."""
    import torch

    class MinGRU(torch.nn.Module):
        """A minGRU LM (``minLM``, causal depthwise convolutions) returning its logits and each
        layer's last hidden state (``return_prev_hiddens``), as a recurrent decoder keeps them."""

        def __init__(self) -> None:
            super().__init__()
            self.lm = _module("minGRU_pytorch.minLM").minLM(num_tokens=64, dim=32, depth=2, enable_conv=True)

        def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
            logits, hiddens = self.lm(ids, return_prev_hiddens=True)
            return logits, hiddens

    class Temporal(torch.nn.Module):
        """A causal TCN (weight-normed convolutions by forward pre-hooks, gated activations, skip
        connections, dilations reset every 2 layers) conditioned on a per-step embedding ('add')
        and projected out, as a sequence model in NLC layout."""

        def __init__(self) -> None:
            super().__init__()
            self.tcn = _module("pytorch_tcn").TCN(8, [16, 16, 16], kernel_size=3, dilation_reset=4, dropout=0.0,
                                                  causal=True, use_skip_connections=True, use_gate=True,
                                                  input_shape="NLC", embedding_shapes=[(4, None)],
                                                  output_projection=6)  # fmt: skip

        def forward(self, x: torch.Tensor, condition: torch.Tensor) -> torch.Tensor:
            return self.tcn(x, embeddings=[condition])

    def conditioned(shape: int) -> Any:
        batch, length = (1, 3)[shape], (20, 27)[shape]
        return _call(_randn(shape, batch, length, 8), _randn(shape + 1, batch, 4, length))

    return [
        OutsideModel("mingru_lm", "minGRU-pytorch minLM: minGRU by a log-space parallel scan (logcumsumexp), "
                     "causal depthwise convolutions; logits and last hiddens", MinGRU, _ids((9, 14)), **_TOLERANCE),
        OutsideModel("tcn_conditioned", "pytorch-tcn TCN: causal weight-normed gated convolutions, skip "
                     "connections, a per-step conditioning embedding, NLC", Temporal, conditioned, **_TOLERANCE),
    ]  # fmt: skip


def _points(nodes: tuple[int, int], width: int | None) -> Callable[[int], Any]:
    """Node features (token ids where ``width`` is ``None``), 3-D coordinates and a node mask (the
    last sample's last two nodes masked), at batch 1 then 3."""

    def make(shape: int) -> Any:
        import torch

        batch, count = (1, 3)[shape], nodes[shape]
        mask = torch.ones(batch, count, dtype=torch.bool)
        mask[-1, count - 2 :] = False
        if width is None:
            feats = torch.randint(0, 16, (batch, count), generator=_seeded(shape))
        else:
            feats = _randn(shape, batch, count, width)
        return _call(feats, _randn(shape + 1, batch, count, 3), mask=mask)

    return make


def _equivariant_models() -> list[OutsideModel]:
    """E(n)-equivariant networks on point clouds: EGNN and the E(n)-transformer."""
    import torch

    class Egnn(torch.nn.Module):
        """An ``EGNN_Network`` asked for each layer's coordinates too (``return_coor_changes``, a
        Python bool of the call): node features, coordinates and the list of coordinates."""

        def __init__(self) -> None:
            super().__init__()
            egnn = _module("egnn_pytorch")
            self.network = egnn.EGNN_Network(num_tokens=16, dim=16, depth=2, num_nearest_neighbors=4,
                                             global_linear_attn_every=1, global_linear_attn_heads=2,
                                             global_linear_attn_dim_head=8, num_global_tokens=2,
                                             coor_weights_clamp_value=2.0)  # fmt: skip

        def forward(self, feats: torch.Tensor, coors: torch.Tensor, mask: torch.Tensor,
                    return_coor_changes: bool) -> tuple[Any, ...]:  # fmt: skip
            return self.network(feats, coors, mask=mask, return_coor_changes=return_coor_changes)

    def egnn_inputs(shape: int) -> Any:
        call = _points((8, 11), None)(shape)
        return _call(*call.args, **call.kwargs, return_coor_changes=True)

    def en_transformer() -> Any:
        return _module("en_transformer").EnTransformer(dim=16, depth=2, dim_head=32, heads=2, neighbors=4,
                                                       rel_pos_emb=True, talking_heads=True,
                                                       checkpoint=False)  # fmt: skip

    return [
        OutsideModel("egnn_network", "egnn-pytorch EGNN_Network: 4 nearest neighbours by topk on distances, "
                     "global linear attention, a node mask; features, coordinates and each layer's as a list", Egnn,
                     egnn_inputs,
                     **_TOLERANCE),
        OutsideModel("en_transformer", "En-transformer EnTransformer: equivariant attention over 4 nearest "
                     "neighbours, relative positions, talking heads, a mask", en_transformer, _points((8, 11), 16),
                     **_TOLERANCE),
    ]  # fmt: skip


def _signal_models() -> list[OutsideModel]:
    """torchcde's neural CDE, X-UNet, Linformer."""
    import torch

    class NeuralCDE(torch.nn.Module):
        """A neural CDE on torchcde's ``CubicSpline``: the model takes the natural cubic spline's
        coefficients (made beforehand by ``natural_cubic_coeffs``, which checks the path for NaN,
        a data-dependent ``if``) and the observation times, and integrates its vector field
        against the spline's derivative by 8 Euler steps from the first time to the last; it
        returns the state read out and the spline's values at the query times. (torchcde's own
        ``cdeint`` integrates by torchdiffeq or torchsde, whose checks that the times increase
        are data-dependent ``assert``s: ``torch.export`` refuses both, as the tenth and twelfth
        rounds found.)"""

        def __init__(self) -> None:
            super().__init__()
            self.initial = torch.nn.Linear(3, 8)
            self.field = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8 * 3),
                                             torch.nn.Tanh())  # fmt: skip
            self.readout = torch.nn.Linear(8, 2)

        def forward(self, coeffs: torch.Tensor, times: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, ...]:
            spline = _module("torchcde").CubicSpline(coeffs, times)
            step = (times[-1] - times[0]) / 8
            z = self.initial(spline.evaluate(times[0]))
            for k in range(8):
                slope = spline.derivative(times[0] + k * step)
                z = z + step * (self.field(z).view(*z.shape[:-1], 8, 3) @ slope[..., None]).squeeze(-1)
            return self.readout(z), spline.evaluate(query)

    def coefficients(shape: int) -> Any:
        batch, steps = (1, 3)[shape], (6, 9)[shape]
        times = torch.linspace(0, steps - 1, steps)
        path = torch.cat([times.expand(batch, steps)[..., None], _randn(shape, batch, steps, 2).cumsum(1)], dim=-1)
        query = torch.rand(5, generator=_seeded(shape)) * (steps - 1)
        return _call(_module("torchcde").natural_cubic_coeffs(path, times), times, query)

    def xunet() -> Any:
        return _module("x_unet").XUnet(dim=8, channels=3, dim_mults=(1, 2), num_blocks_per_stage=(1, 1),
                                       num_self_attn_per_stage=(0, 1), nested_unet_depths=(2, 0),
                                       nested_unet_dim=8, attn_heads=2, attn_dim_head=8)  # fmt: skip

    def linformer() -> Any:
        return _module("linformer").LinformerLM(num_tokens=64, dim=32, seq_len=16, depth=2, k=8, heads=4,
                                                one_kv_head=True)  # fmt: skip

    return [
        OutsideModel("torchcde_neural_cde", "torchcde CubicSpline from natural cubic coefficients: a neural CDE "
                     "by Euler steps on its derivative, its values at query times", NeuralCDE, coefficients,
                     **_TOLERANCE),
        OutsideModel("x_unet_nested", "x-unet XUnet (2-D): a nested U-Net stage, ResNet blocks, "
                     "self-attention at the bottom", xunet,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, (16, 32)[shape], (16, 32)[shape])),
                     **_TOLERANCE),
        OutsideModel("linformer_lm", "linformer LinformerLM: keys and values projected to k=8 along the "
                     "sequence, one shared key-value head", linformer, _ids((16, 16)), **_TOLERANCE),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    decoder = dict(encoder, use_cache=False)
    models: list[HfCase] = [
        ("hf_bamba", "BambaForCausalLM", "BambaConfig", "logits",
         dict(decoder, num_key_value_heads=2, attn_layer_indices=[1], mamba_n_heads=4, mamba_d_head=32,
              mamba_n_groups=1, mamba_d_state=16, mamba_chunk_size=8, mamba_expand=2), _tokens(1000)),
        ("hf_granite_moe", "GraniteMoeForCausalLM", "GraniteMoeConfig", "logits",
         dict(decoder, num_local_experts=4, num_experts_per_tok=2, embedding_multiplier=2.0, logits_scaling=4.0,
              residual_multiplier=0.5, attention_multiplier=0.25), _tokens(1000)),
        ("hf_helium", "HeliumForCausalLM", "HeliumConfig", "logits", dict(decoder, num_key_value_heads=2, head_dim=16),
         _tokens(1000)),
        ("hf_phi3_longrope", "Phi3ForCausalLM", "Phi3Config", "logits",
         dict(decoder, max_position_embeddings=64, original_max_position_embeddings=16, pad_token_id=0,
              bos_token_id=1, eos_token_id=2,
              rope_scaling=dict(type="longrope", short_factor=[1.0] * 8, long_factor=[2.0] * 8)),
         _tokens(1000, (32, 12))),
        ("hf_gptj", "GPTJForCausalLM", "GPTJConfig", "logits",
         dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, vocab_size=1000, n_positions=64, use_cache=False,
              bos_token_id=1, eos_token_id=2),
         _tokens(1000)),
        ("hf_biogpt", "BioGptForCausalLM", "BioGptConfig", "logits", decoder, _tokens(1000)),
        ("hf_mimi_encode", "MimiModel", "MimiConfig", "audio_codes",
         dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=8,
              intermediate_size=64, codebook_size=64, codebook_dim=32, vector_quantization_hidden_dimension=32,
              num_filters=8, upsampling_ratios=[4, 2], num_quantizers=4, num_semantic_quantizers=1, frame_rate=250.0,
              upsample_groups=32, sampling_rate=4000, sliding_window=16, use_cache=False),
         lambda shape: _call(input_values=_randn(shape, (1, 3)[shape], 1, (640, 960)[shape]))),
        ("hf_focalnet", "FocalNetModel", "FocalNetConfig", "pooler_output",
         dict(embed_dim=16, depths=[1, 1], focal_levels=[2, 2], focal_windows=[3, 3], image_size=32, patch_size=4,
              use_post_layernorm_in_modulation=True, use_layerscale=True), _pixels((32, 48))),
        ("hf_reformer_local", "ReformerModel", "ReformerConfig", "last_hidden_state",
         dict(hidden_size=64, attn_layers=["local", "local"], num_attention_heads=4, attention_head_size=16,
              feed_forward_size=128, vocab_size=1000, axial_pos_shape=[8, 8], axial_pos_embds_dim=[32, 32],
              local_attn_chunk_length=8, chunk_size_feed_forward=4, max_position_embeddings=64, is_decoder=False,
              pad_token_id=0), _tokens(1000, (32, 16))),
        ("hf_mra", "MraModel", "MraConfig", "last_hidden_state",
         dict(encoder, max_position_embeddings=72, block_per_row=2, approx_mode="full"), _tokens(1000, (64, 32))),
        ("hf_siglip2_naflex", "Siglip2VisionModel", "Siglip2VisionConfig", "pooler_output",
         dict(encoder, num_channels=3, num_patches=16, patch_size=4), _naflex_patches),
    ]  # fmt: skip
    return _hf_cases(models)


def _naflex_patches(shape: int) -> Any:
    """SigLIP2's NaFlex inputs as its processor makes them: flattened 4x4 patches padded to 16,
    the mask of real ones and each image's patch grid (3x4 and 4x4 at batch 3, 2x4 at batch 1)."""
    import torch

    grids = ([(2, 4)], [(3, 4), (4, 4), (2, 2)])[shape]
    mask = torch.zeros(len(grids), 16, dtype=torch.long)
    for row, (height, width) in enumerate(grids):
        mask[row, : height * width] = 1
    patches = _randn(shape, len(grids), 16, 3 * 4 * 4) * mask[..., None]
    return _call(pixel_values=patches, pixel_attention_mask=mask, spatial_shapes=torch.tensor(grids))
