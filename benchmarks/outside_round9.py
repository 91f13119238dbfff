"""The ninth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries the earlier rounds never used, each an optional extra (``diffusers``, ``torch_geometric``
and ``einops``), as their users call them: diffusers' UNets with the timestep as a Python int, a
0-dim tensor and a batch tensor, its VAE, VQ, DiT, Flux and ControlNet models, and schedulers
stepped in a denoising loop inside ``forward``; PyTorch Geometric's convolutions (GCN, GAT,
GATv2, SAGE, GIN, GraphConv, TransformerConv), its global poolings by a batch vector and a
``MessagePassing`` subclass of a user's, with ``edge_index`` as an input; and einops'
``rearrange`` / ``reduce`` / ``repeat`` / ``pack`` and its layers inside models.

A model whose package is not installed is reported as unavailable, with the import error, like a
``transformers`` model. Kept apart from ``outside_models.py`` like the rounds before; importing it
is cheap (builders import torch and the libraries when they run).
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded

# Random-initialised diffusers models: small configs, nothing downloaded (outside_models.py sets
# HF_HUB_OFFLINE). Two blocks of widths 16 and 32, groups of 8, heads of width 8.
_BLOCKS = dict(block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8)
_CROSS = 24  # the width of the text encoder's hidden states the conditional models take

# Float32 models of a few hundred ops: the static runtime's kernels (fused convolutions, out
# variants) round otherwise than eager's; 1e-4 as the transformers models of the sweep.
_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def ninth_round() -> list[OutsideModel]:
    """The ninth round's models: diffusers, then PyTorch Geometric, then einops, then one call
    pattern of torch's own."""
    return _diffusers_models() + _geometric_models() + _einops_models() + _functional_call()


def _module(name: str) -> Any:
    """The optional package ``name``; its ImportError makes the model unavailable, with the reason."""
    return importlib.import_module(name)


def _diffusers(class_name: str, **config: Any) -> Callable[[], Any]:
    """``diffusers.<class_name>(**config)``, random-initialised."""
    return lambda: getattr(_module("diffusers"), class_name)(**config)


def _unet_config(conditional: bool) -> dict[str, Any]:
    if conditional:
        blocks = dict(down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                      up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=_CROSS)  # fmt: skip
    else:
        blocks = dict(down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                      up_block_types=("AttnUpBlock2D", "UpBlock2D"))  # fmt: skip
    return dict(_BLOCKS, sample_size=16, in_channels=4, out_channels=4, attention_head_dim=8, **blocks)


class _Timestep(enum.Enum):
    """How a caller passes the diffusion timestep: a Python int, a 0-dim tensor, or one per sample."""

    INT = "int"
    SCALAR = "0-dim tensor"
    BATCH = "batch tensor"


def _timestep(form: _Timestep, shape: int, batch: int) -> Any:
    import torch

    value = (10, 500)[shape]
    if form is _Timestep.INT:
        return value
    if form is _Timestep.SCALAR:
        return torch.tensor(value)
    return torch.randint(0, 1000, (batch,), generator=_seeded(shape))


def _latents(form: _Timestep, conditional: bool) -> Callable[[int], Any]:
    """Latents of 16x16 at batch 1 then 8x8 at batch 3, the timestep in ``form``, and text
    hidden states of 7 then 5 tokens for a conditional UNet."""

    def make(shape: int) -> Any:
        batch, size = (1, 3)[shape], (16, 8)[shape]
        args: list[Any] = [_randn(shape, batch, 4, size, size), _timestep(form, shape, batch)]
        if conditional:
            args.append(_randn(shape + 1, batch, (7, 5)[shape], _CROSS))
        return _call(*args)

    return make


def _vae_config() -> dict[str, Any]:
    return dict(_BLOCKS, in_channels=3, out_channels=3, latent_channels=4, sample_size=16,
                down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"))  # fmt: skip


def _images(sizes: tuple[int, int], channels: int = 3) -> Callable[[int], Any]:
    return lambda shape: _call(_randn(shape, (1, 3)[shape], channels, sizes[shape], sizes[shape]))


def _diffusers_models() -> list[OutsideModel]:
    """diffusers' models as its pipelines call them."""

    def vae_encoder() -> Any:
        import torch

        class Encode(torch.nn.Module):
            """``vae.encode(x).latent_dist``: its mean, standard deviation and mode (a
            ``DiagonalGaussianDistribution``, no tensor, so the pipeline reads its fields)."""

            def __init__(self) -> None:
                super().__init__()
                self.vae = _diffusers("AutoencoderKL", **_vae_config())()

            def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
                latent = self.vae.encode(x).latent_dist
                return latent.mean, latent.std, latent.mode() * self.vae.config.scaling_factor

        return Encode()

    def vae_decoder() -> Any:
        import torch

        class Decode(torch.nn.Module):
            """``vae.decode(latents / scaling_factor)``, its whole ``DecoderOutput``."""

            def __init__(self) -> None:
                super().__init__()
                self.vae = _diffusers("AutoencoderKL", **_vae_config())()

            def forward(self, latents: torch.Tensor) -> Any:
                return self.vae.decode(latents / self.vae.config.scaling_factor)

        return Decode()

    def dit_inputs(shape: int) -> Any:
        import torch

        batch = (1, 3)[shape]
        labels = torch.randint(0, 10, (batch,), generator=_seeded(shape))
        return _call(_randn(shape, batch, 4, 8, 8), timestep=_timestep(_Timestep.BATCH, shape, batch),
                     class_labels=labels)  # fmt: skip

    def flux_inputs(shape: int) -> Any:
        import torch

        batch, side, text = (1, 2)[shape], (4, 6)[shape], (5, 7)[shape]
        rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
        image_ids = torch.stack((torch.zeros_like(rows), rows, cols), -1).flatten(0, 1).float()
        return _call(hidden_states=_randn(shape, batch, side * side, 8),
                     encoder_hidden_states=_randn(shape + 1, batch, text, 16),
                     pooled_projections=_randn(shape + 2, batch, 16), timestep=torch.full((batch,), (0.3, 0.7)[shape]),
                     img_ids=image_ids, txt_ids=torch.zeros(text, 3))  # fmt: skip

    def controlnet_inputs(shape: int) -> Any:
        batch, size = (1, 3)[shape], (8, 12)[shape]
        return _call(_randn(shape, batch, 4, size, size), (10, 500)[shape], _randn(shape + 1, batch, 7, _CROSS),
                     _randn(shape + 2, batch, 3, 2 * size, 2 * size), conditioning_scale=0.5)  # fmt: skip

    return [
        OutsideModel("diff_unet2d_int_t", "diffusers UNet2DModel (attention blocks), the timestep a Python int, "
                     "whole UNet2DOutput", _diffusers("UNet2DModel", **_unet_config(False)),
                     _latents(_Timestep.INT, False), **_TOLERANCE),
        OutsideModel("diff_unet_cond_0dim_t", "diffusers UNet2DConditionModel with encoder_hidden_states, the "
                     "timestep a 0-dim tensor", _diffusers("UNet2DConditionModel", **_unet_config(True)),
                     _latents(_Timestep.SCALAR, True), **_TOLERANCE),
        OutsideModel("diff_unet_cond_batch_t", "diffusers UNet2DConditionModel, one timestep per sample",
                     _diffusers("UNet2DConditionModel", **_unet_config(True)), _latents(_Timestep.BATCH, True),
                     **_TOLERANCE),
        OutsideModel("diff_vae_encode", "diffusers AutoencoderKL.encode: the latent distribution's mean, std and "
                     "scaled mode", vae_encoder, _images((16, 24)), **_TOLERANCE),
        OutsideModel("diff_vae_decode", "diffusers AutoencoderKL.decode of scaled latents, whole DecoderOutput",
                     vae_decoder, _images((8, 6), channels=4), **_TOLERANCE),
        OutsideModel("diff_vq_model", "diffusers VQModel: encode, nearest-codebook quantisation, decode",
                     _diffusers("VQModel", **_vae_config(), num_vq_embeddings=32, vq_embed_dim=4),
                     _images((16, 24)), **_TOLERANCE),
        OutsideModel("diff_dit", "diffusers DiTTransformer2DModel: patches, adaLN-zero by timestep and class label",
                     _diffusers("DiTTransformer2DModel", num_attention_heads=2, attention_head_dim=8, in_channels=4,
                                num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=10),
                     dit_inputs, **_TOLERANCE),
        OutsideModel("diff_flux", "diffusers FluxTransformer2DModel: joint and single blocks, 3-axis RoPE from "
                     "image and text ids, keyword inputs", _diffusers("FluxTransformer2DModel", patch_size=1,
                     in_channels=8, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
                     joint_attention_dim=16, pooled_projection_dim=16, axes_dims_rope=(2, 2, 4)),
                     flux_inputs, **_TOLERANCE),
        OutsideModel("diff_controlnet", "diffusers ControlNetModel: conditioning image embedding, int timestep, "
                     "conditioning_scale, a tuple of residuals per block", _diffusers("ControlNetModel", **_BLOCKS,
                     in_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                     cross_attention_dim=_CROSS, attention_head_dim=8, conditioning_embedding_out_channels=(8, 16)),
                     controlnet_inputs, **_TOLERANCE),
        *_sampling_loops(),
    ]  # fmt: skip


def _sampling_loops() -> list[OutsideModel]:
    """Schedulers: denoising loops inside ``forward``, as a pipeline's ``__call__`` runs them
    (classifier-free guidance around a conditional UNet stepped by DDIM; Euler and DPM-Solver++,
    which keep a step index and past outputs in plain attributes that ``set_timesteps`` resets at
    the start of every call), and a scheduler's pure tensor functions."""
    import torch

    class GuidedDdim(torch.nn.Module):
        """Two DDIM steps (eta 0) of a conditional UNet with classifier-free guidance: the
        latents doubled, the prediction chunked into unconditional and text halves."""

        def __init__(self) -> None:
            super().__init__()
            diffusers = _module("diffusers")
            self.unet = diffusers.UNet2DConditionModel(**_unet_config(True))
            self.scheduler = diffusers.DDIMScheduler(num_train_timesteps=100)
            self.scheduler.set_timesteps(2)

        def forward(self, latents: torch.Tensor, text: torch.Tensor, empty: torch.Tensor,
                    guidance: float) -> torch.Tensor:  # fmt: skip
            context = torch.cat((empty.expand_as(text), text))
            for t in self.scheduler.timesteps:
                both = self.scheduler.scale_model_input(torch.cat((latents, latents)), t)
                unconditional, conditional = self.unet(both, t, context).sample.chunk(2)
                noise = unconditional + guidance * (conditional - unconditional)
                latents = self.scheduler.step(noise, t, latents, eta=0.0).prev_sample
            return latents

    def guided_inputs(shape: int) -> Any:
        batch, size = (1, 2)[shape], (8, 16)[shape]
        return _call(_randn(shape, batch, 4, size, size), _randn(shape + 1, batch, 5, _CROSS),
                     _randn(shape + 2, 1, 5, _CROSS), (7.5, 3.0)[shape])  # fmt: skip

    class SchedulerMath(torch.nn.Module):
        """A scheduler's tensor functions, as a training or an img2img step calls them: DDIM's
        ``step`` (eta 0) at a Python int timestep, ``add_noise`` and ``get_velocity`` at a batch
        of timesteps (``alphas_cumprod`` indexed by a tensor and broadcast)."""

        def __init__(self) -> None:
            super().__init__()
            self.scheduler = _module("diffusers").DDIMScheduler(num_train_timesteps=100, prediction_type="v_prediction")
            self.scheduler.set_timesteps(10)

        def forward(self, prediction: torch.Tensor, sample: torch.Tensor, noise: torch.Tensor, timesteps: torch.Tensor,
                    t: int) -> tuple[torch.Tensor, ...]:  # fmt: skip
            stepped = self.scheduler.step(prediction, t, sample, eta=0.0)
            noisy = self.scheduler.add_noise(sample, noise, timesteps)
            velocity = self.scheduler.get_velocity(sample, noise, timesteps)
            return stepped.prev_sample, stepped.pred_original_sample, noisy, velocity

    def math_inputs(shape: int) -> Any:
        import torch

        batch, size = (1, 3)[shape], (8, 6)[shape]
        timesteps = torch.randint(0, 100, (batch,), generator=_seeded(shape))
        return _call(*(_randn(shape + i, batch, 4, size, size) for i in range(3)), timesteps, (91, 41)[shape])

    class SteppedLoop(torch.nn.Module):
        """Euler and multistep DPM-Solver++ (second order) stepped three times each in forward,
        ``set_timesteps`` called at the start of each loop as a pipeline calls it (their step
        index and past outputs are plain attributes it resets)."""

        def __init__(self) -> None:
            super().__init__()
            diffusers = _module("diffusers")
            self.predict = torch.nn.Conv2d(4, 4, 1)
            self.euler = diffusers.EulerDiscreteScheduler(num_train_timesteps=100)
            self.dpm = diffusers.DPMSolverMultistepScheduler(num_train_timesteps=100, solver_order=2)

        def forward(self, sample: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            results = []
            for scheduler in (self.euler, self.dpm):
                scheduler.set_timesteps(3)
                x = sample * scheduler.init_noise_sigma
                for t in scheduler.timesteps:
                    x = scheduler.step(self.predict(scheduler.scale_model_input(x, t)), t, x).prev_sample
                results.append(x)
            return results[0], results[1]

    return [
        OutsideModel("diff_ddim_guided_loop", "two DDIM steps of a conditional UNet with classifier-free guidance "
                     "(latents doubled, prediction chunked, a float guidance scale) in forward", GuidedDdim,
                     guided_inputs, **_TOLERANCE),
        OutsideModel("diff_scheduler_math", "diffusers DDIMScheduler (v-prediction): step at an int timestep, "
                     "add_noise and get_velocity at a batch of timesteps", SchedulerMath, math_inputs, **_TOLERANCE),
        OutsideModel("diff_scheduler_loop", "Euler and DPM-Solver++ (2nd order) stepped 3 times in forward, "
                     "set_timesteps at each call (step index and past outputs in attributes)", SteppedLoop,
                     _images((8, 6), channels=4), **_TOLERANCE),
    ]  # fmt: skip


def _graph(shape: int, edge_features: int = 0) -> tuple[Any, ...]:
    """A batch of graphs as PyTorch Geometric stores it: node features, ``edge_index`` (random
    edges, self loops and repeats among them), the batch vector, and the number of graphs (a
    Python int, as the pooling functions take it); one graph of 7 nodes and 12 edges at shape 0,
    three of 15 nodes and 40 edges at shape 1. With ``edge_features``, edge attributes too."""
    import torch

    nodes, edges, graphs = ((7, 12, 1), (15, 40, 3))[shape]
    edge_index = torch.randint(0, nodes, (2, edges), generator=_seeded(shape))
    batch = (torch.arange(nodes) * graphs // nodes).sort().values
    extra = (_randn(shape + 1, edges, edge_features),) if edge_features else ()
    return (_randn(shape, nodes, 8), edge_index, *extra, batch, graphs)


def _geometric_models() -> list[OutsideModel]:
    """PyTorch Geometric's layers (its pure-Python paths: no compiled extension is installed)."""
    import torch

    class Gcn(torch.nn.Module):
        """Two GCN layers (self loops added, symmetric normalisation) and a mean pool per graph."""

        def __init__(self) -> None:
            super().__init__()
            nn = _module("torch_geometric.nn")
            self.first, self.second = nn.GCNConv(8, 16), nn.GCNConv(16, 4)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                    graphs: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            h = self.second(self.first(x, edge_index).relu(), edge_index)
            return h, _module("torch_geometric.nn").global_mean_pool(h, batch, size=graphs)

    class Attention(torch.nn.Module):
        """GATConv with two heads, GATv2Conv with edge attributes returning its attention
        weights, a max pool per graph."""

        def __init__(self) -> None:
            super().__init__()
            nn = _module("torch_geometric.nn")
            self.first, self.second = nn.GATConv(8, 8, heads=2), nn.GATv2Conv(16, 4, edge_dim=3)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor, batch: torch.Tensor,
                    graphs: int) -> tuple[torch.Tensor, ...]:  # fmt: skip
            h = self.first(x, edge_index).relu()
            h, (looped, weights) = self.second(h, edge_index, edge_attr, return_attention_weights=True)
            return h, looped, weights, _module("torch_geometric.nn").global_max_pool(h, batch, size=graphs)

    class Aggregations(torch.nn.Module):
        """SAGEConv by max, GINConv with a trained epsilon, GraphConv by mean, TransformerConv
        (4 heads, root weight gated by beta), and a sum pool per graph."""

        def __init__(self) -> None:
            super().__init__()
            nn = _module("torch_geometric.nn")
            mlp = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
            self.sage = nn.SAGEConv(8, 16, aggr="max")
            self.gin = nn.GINConv(mlp, train_eps=True)
            self.graph_conv = nn.GraphConv(8, 8, aggr="mean")
            self.transformer = nn.TransformerConv(8, 4, heads=4, beta=True)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                    graphs: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
            h = self.graph_conv(self.gin(self.sage(x, edge_index).relu(), edge_index), edge_index)
            h = self.transformer(h, edge_index)
            return h, _module("torch_geometric.nn").global_add_pool(h, batch, size=graphs)

    def custom_layer() -> Any:
        geometric = _module("torch_geometric")
        message_passing: Any = geometric.nn.MessagePassing

        class EdgeGated(message_passing):
            """A user's layer: messages from both ends and the edge's attributes, gated by a
            sigmoid, summed, and the sum, mean and max of the raw messages beside it (a
            multi-aggregation); edge weights normalised by ``utils.softmax`` over each target."""

            def __init__(self) -> None:
                super().__init__(aggr=["sum", "mean", "max"])
                self.message_net = torch.nn.Linear(2 * 8 + 3, 8)
                self.gate = torch.nn.Linear(3, 1)

            def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
                weight = geometric.utils.softmax(self.gate(edge_attr), edge_index[1], num_nodes=x.shape[0])
                return self.propagate(edge_index, x=x, edge_attr=edge_attr, weight=weight)

            # Unannotated: PyG reads message()'s annotations at run time in this module's globals,
            # where torch is not imported (importing the module is cheap); it takes them as tensors.
            def message(self, x_i, x_j, edge_attr, weight):
                return weight * self.message_net(torch.cat((x_i, x_j, edge_attr), -1))

        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.layer = EdgeGated()

            def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor, batch: torch.Tensor,
                        graphs: int) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
                h = self.layer(x, edge_index, edge_attr)
                degree = geometric.utils.degree(edge_index[1], x.shape[0])
                return h, geometric.utils.scatter(h * degree[:, None], batch, 0, dim_size=graphs, reduce="mean")

        return Model()

    class UnsizedPool(torch.nn.Module):
        """A pool per graph without the number of graphs: PyG reads it from the batch vector's
        maximum (a value of the data)."""

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                    graphs: int) -> torch.Tensor:  # fmt: skip
            return _module("torch_geometric.nn").global_mean_pool(x, batch)

    class NormsDense(torch.nn.Module):
        """Per-graph normalisations (GraphNorm, PyG's LayerNorm in graph mode) between SGConv
        (two hops) and APPNP layers, JumpingKnowledge by max over the layers, and the nodes of each
        graph padded into a dense batch (``to_dense_batch`` given the batch size and a bound on
        the nodes per graph, which export needs: without them it reads them from the data) with its
        mask."""

        def __init__(self) -> None:
            super().__init__()
            nn = _module("torch_geometric.nn")
            self.hop = nn.SGConv(8, 8, K=2)
            self.graph_norm = nn.GraphNorm(8)
            self.propagate = nn.APPNP(K=3, alpha=0.2)
            self.layer_norm = nn.LayerNorm(8, mode="graph")
            self.jump = nn.JumpingKnowledge("max")

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor,
                    graphs: int) -> tuple[torch.Tensor, ...]:  # fmt: skip
            first = self.graph_norm(self.hop(x, edge_index), batch, graphs).relu()
            second = self.layer_norm(self.propagate(first, edge_index), batch, graphs)
            h = self.jump([first, second])
            dense, mask = _module("torch_geometric.utils").to_dense_batch(h, batch, batch_size=graphs,
                                                                          max_num_nodes=x.shape[0])  # fmt: skip
            return h, dense, mask

    return [
        OutsideModel("pyg_gcn", "torch_geometric GCNConv x2 (self loops, symmetric norm), global_mean_pool by a "
                     "batch vector, edge_index an input", Gcn, lambda shape: _call(*_graph(shape)), **_TOLERANCE),
        OutsideModel("pyg_gat", "torch_geometric GATConv (2 heads), GATv2Conv with edge_dim returning attention "
                     "weights, global_max_pool", Attention, lambda shape: _call(*_graph(shape, 3)), **_TOLERANCE),
        OutsideModel("pyg_aggregations", "torch_geometric SAGEConv max, GINConv train_eps, GraphConv mean, "
                     "TransformerConv beta, global_add_pool", Aggregations, lambda shape: _call(*_graph(shape)),
                     **_TOLERANCE),
        OutsideModel("pyg_message_passing", "a MessagePassing subclass: x_i/x_j/edge_attr messages, multi-aggregation "
                     "sum/mean/max, utils.softmax, degree, scatter mean", custom_layer,
                     lambda shape: _call(*_graph(shape, 3)), **_TOLERANCE),
        OutsideModel("pyg_norms_dense", "torch_geometric SGConv K=2, GraphNorm, APPNP, LayerNorm(mode=graph), "
                     "JumpingKnowledge max, to_dense_batch with its mask", NormsDense,
                     lambda shape: _call(*_graph(shape)), **_TOLERANCE),
        OutsideModel("pyg_pool_unsized", "torch_geometric global_mean_pool without size (read from the batch "
                     "vector)", UnsizedPool, lambda shape: _call(*_graph(shape))),
    ]  # fmt: skip


def _einops_models() -> list[OutsideModel]:
    """einops' operations and layers inside models."""
    import torch

    class PatchTransformer(torch.nn.Module):
        """A ViT written with einops: patches by the ``Rearrange`` layer, a class token by
        ``repeat``, heads split and merged by ``rearrange``, mean pooling by the ``Reduce`` layer."""

        def __init__(self) -> None:
            super().__init__()
            layers = _module("einops.layers.torch")
            self.patches = torch.nn.Sequential(layers.Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=4, p2=4),
                                               torch.nn.Linear(48, 32))  # fmt: skip
            self.token = torch.nn.Parameter(torch.randn(1, 1, 32))
            self.qkv = torch.nn.Linear(32, 96)
            self.out = torch.nn.Linear(32, 32)
            self.pool = torch.nn.Sequential(layers.Reduce("b n d -> b d", "mean"), torch.nn.LayerNorm(32))

        def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            einops = _module("einops")
            x = self.patches(images)
            x = torch.cat((einops.repeat(self.token, "1 1 d -> b 1 d", b=x.shape[0]), x), 1)
            q, k, v = einops.rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=4)
            attended = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1) @ v
            x = x + self.out(einops.rearrange(attended, "b h n d -> b n (h d)"))
            return self.pool(x), x[:, 0]

    class Operations(torch.nn.Module):
        """einops functions on a feature map: 2x2 max pooling by ``reduce``, nearest upsampling by
        ``repeat``, space-to-depth by ``rearrange``, ``pack``/``unpack`` of a map and a vector,
        ``einsum`` with named axes, ``parse_shape``."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.mix = torch.nn.Parameter(torch.randn(4, 16, 5))

        def forward(self, x: torch.Tensor, extra: torch.Tensor) -> tuple[torch.Tensor, ...]:
            einops = _module("einops")
            h = self.conv(x)
            pooled = einops.reduce(h, "b c (h 2) (w 2) -> b c h w", "max")
            upsampled = einops.repeat(pooled, "b c h w -> b c (h 2) (w 2)")
            depth = einops.rearrange(h, "b c (h p) (w q) -> b (c p q) h w", p=2, q=2)
            packed, shapes = einops.pack((einops.rearrange(depth, "b c h w -> b h w c"), extra), "b *")
            mixed = einops.einsum(depth, self.mix, "b c h w, g c k -> b g k h w")
            sizes = einops.parse_shape(h, "b c h w")
            first, second = einops.unpack(packed * 2, shapes, "b *")
            return upsampled - h, mixed.mean((-1, -2)), first, second, h.new_tensor([sizes["h"], sizes["w"]])

    class Mixer(torch.nn.Module):
        """An MLP-Mixer block with einops' ``EinMix`` layers: token mixing over a fixed number of
        patches, channel mixing with a grouped weight, patches by ``Rearrange``."""

        def __init__(self) -> None:
            super().__init__()
            layers = _module("einops.layers.torch")
            self.patches = layers.Rearrange("b c (h p) (w q) -> b (h w) (p q c)", p=4, q=4)
            self.tokens = layers.EinMix("b t c -> b u c", weight_shape="t u", bias_shape="u", t=16, u=16)
            self.channels = layers.EinMix("b t (g c) -> b t (g d)", weight_shape="g c d", bias_shape="g d", g=4,
                                          c=12, d=8)  # fmt: skip
            self.norm = torch.nn.LayerNorm(48)

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            x = self.patches(images)
            x = x + self.tokens(self.norm(x))
            return self.channels(self.norm(x))

    def operation_inputs(shape: int) -> Any:
        batch, size = (1, 3)[shape], (8, 12)[shape]
        return _call(_randn(shape, batch, 3, size, size), _randn(shape + 1, batch, 5))

    return [
        OutsideModel("einops_vit", "einops Rearrange patches, repeat class token, rearrange heads, Reduce mean "
                     "pooling layer", PatchTransformer, _images((16, 24)), **_TOLERANCE),
        OutsideModel("einops_mixer", "einops EinMix token and grouped channel mixing, Rearrange patches",
                     Mixer, _images((16, 16)), **_TOLERANCE),
        OutsideModel("einops_operations", "einops reduce max-pool, repeat upsample, rearrange space-to-depth, "
                     "pack/unpack, einsum with named axes, parse_shape", Operations, operation_inputs,
                     **_TOLERANCE),
    ]  # fmt: skip


def _functional_call() -> list[OutsideModel]:
    """Weights given as an argument: ``torch.func.functional_call`` runs a sub-module with a dict of
    tensors in place of its parameters (hypernetworks, ensembles, meta-learning's inner loop), and
    the same sub-module with its own beside it."""
    import torch

    class Functional(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))

        def forward(self, x: torch.Tensor, weights: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            return torch.func.functional_call(self.net, weights, (x,)), self.net(x)

    def weights_inputs(shape: int) -> Any:
        sizes = {"0.weight": (8, 4), "0.bias": (8,), "2.weight": (2, 8), "2.bias": (2,)}
        weights = {name: _randn(shape + i, *size) for i, (name, size) in enumerate(sizes.items())}
        return _call(_randn(shape, (2, 5)[shape], 4), weights)

    return [
        OutsideModel("functional_call_weights", "torch.func.functional_call with a dict of weights as an argument, "
                     "the module's own weights beside it", Functional, weights_inputs),
    ]  # fmt: skip
