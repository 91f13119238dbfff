"""The twelfth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: ncps' liquid
networks (a closed-form continuous-time RNN on a sparse ``AutoNCP`` wiring with irregular time
spans, an ODE-unfolded LTC given its state); mambapy's pure-PyTorch Mamba (the parallel scan, the
sequential scan and the recurrent step of generation) and its Jamba (Mamba, attention and
mixture-of-experts layers); torchsde's
``sdeint`` on a Brownian interval made in forward; pyro's distributions (a mixture density
network's ``log_prob``, a neural spline flow); tab-transformer-pytorch's TabTransformer and
FT-Transformer (returning its attention maps) and rtdl-revisiting-models' FT-Transformer and
ResNet on categorical and continuous features; vector-quantize-pytorch's vector, residual,
finite-scalar and lookup-free quantizers; local-attention's windowed attention and its local
transformer; linear-attention-transformer's language model; siren-pytorch's SIREN with a latent
modulator; pytorch-tabnet's TabNet (sparsemax and entmax masks, its explanation masks).
pykan was tried and dropped: ``import kan`` fails on a dependency it does not declare (pandas).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded
from benchmarks.outside_round9 import _module
from benchmarks.outside_round10 import _tokens

# Float32 models of a few hundred ops at most, as the tenth and eleventh rounds.
_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def twelfth_round() -> list[OutsideModel]:
    """The twelfth round's models, library by library."""
    return (_ncps_models() + _mamba_models() + _sde_models() + _pyro_models() + _tabular_models()
            + _quantizer_models() + _attention_models() + _siren_models() + _tabnet_models())  # fmt: skip


def _sequences(lengths: tuple[int, int], features: int) -> Callable[[int], Any]:
    """Sequences of ``lengths[shape]`` steps of ``features`` at batch 1 then 3."""
    return lambda shape: _call(_randn(shape, (1, 3)[shape], lengths[shape], features))


def _ncps_models() -> list[OutsideModel]:
    """ncps' liquid networks, batch first, returning the sequence and the final state."""
    import torch

    class ClosedForm(torch.nn.Module):
        """A ``CfC`` on an ``AutoNCP`` wiring (sparse masks between sensory, inter, command and
        motor neurons), mixed memory (an LSTM cell beside it), given irregular time spans (one
        per step, shared by the batch: ncps ``squeeze``s a step's spans, so spans per sample do
        not broadcast against the state at a batch above 1)."""

        def __init__(self) -> None:
            super().__init__()
            ncps = _module("ncps")
            _module("ncps.torch")
            self.rnn = ncps.torch.CfC(6, ncps.wirings.AutoNCP(16, 3, seed=3), mixed_memory=True)

        def forward(self, x: torch.Tensor, spans: torch.Tensor) -> tuple[torch.Tensor, Any]:
            return self.rnn(x, timespans=spans)

    class Liquid(torch.nn.Module):
        """An ``LTC`` (liquid time-constant cells, 6 ODE unfolds per step) on a fully connected
        wiring, given its initial state."""

        def __init__(self) -> None:
            super().__init__()
            ncps = _module("ncps")
            _module("ncps.torch")
            self.rnn = ncps.torch.LTC(6, ncps.wirings.FullyConnected(8, 2))

        def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.rnn(x, state)

    def spans(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 8)[shape]
        spans = torch.rand(1, length, generator=_seeded(shape)) + 0.5  # one per step: ncps squeezes a step's spans
        return _call(_randn(shape, batch, length, 6), spans)

    def states(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 8)[shape]
        return _call(_randn(shape, batch, length, 6), _randn(shape + 1, batch, 8))

    return [
        OutsideModel("ncps_cfc_autoncp", "ncps CfC on an AutoNCP wiring (sparse masks), mixed memory, irregular "
                     "time spans: the sequence and the final state", ClosedForm, spans, **_TOLERANCE),
        OutsideModel("ncps_ltc", "ncps LTC (liquid time-constant cells, 6 ODE unfolds a step) given its state",
                     Liquid, states, **_TOLERANCE),
    ]  # fmt: skip


def _mamba_models() -> list[OutsideModel]:
    """mambapy's Mamba and Jamba in pure PyTorch (its Mamba-2 imports ``mamba_ssm``'s Triton kernels)."""
    import torch

    def mamba(pscan: bool) -> Callable[[], Any]:
        def build() -> Any:
            mamba = _module("mambapy.mamba")
            return mamba.Mamba(mamba.MambaConfig(d_model=16, n_layers=2, d_state=8, pscan=pscan))

        return build

    def jamba() -> Any:
        jamba = _module("mambapy.jamba")
        config = jamba.JambaLMConfig(d_model=16, n_layers=4, mlp_size=32, d_state=8, num_attention_heads=4,
                                     num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                                     attn_layer_offset=1, attn_layer_period=2, vocab_size=64)  # fmt: skip
        return jamba.JambaLM(config)

    class Decode(torch.nn.Module):
        """Mamba's recurrent ``step``, a token at a time from zero caches (the convolution's
        last inputs and the state), as generation runs it: each step's output and the caches."""

        def __init__(self) -> None:
            super().__init__()
            mamba = _module("mambapy.mamba")
            self.config = mamba.MambaConfig(d_model=16, n_layers=2, d_state=8)
            self.mamba = mamba.Mamba(self.config)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Any]:
            batch, inner = x.shape[0], self.config.d_inner
            state, conv = self.config.d_state, self.config.d_conv - 1
            caches = [(x.new_zeros(batch, inner, state), x.new_zeros(batch, inner, conv))
                      for _ in range(self.config.n_layers)]  # fmt: skip
            outputs = []
            for token in x.unbind(1):
                output, caches = self.mamba.step(token, caches)
                outputs.append(output)
            return torch.stack(outputs, 1), caches

    return [
        OutsideModel("mambapy_pscan", "mambapy Mamba (selective scan by its parallel scan, pscan, in place "
                     "on padded lengths), 2 layers", mamba(True), _sequences((6, 11), 16), **_TOLERANCE),
        OutsideModel("mambapy_sequential", "mambapy Mamba with the sequential selective scan (a Python loop over "
                     "time)", mamba(False), _sequences((6, 11), 16), **_TOLERANCE),
        OutsideModel("mambapy_step", "mambapy Mamba's recurrent step a token at a time from zero caches "
                     "(generation): outputs and the caches", Decode, _sequences((4, 6), 16), **_TOLERANCE),
        OutsideModel("mambapy_jamba", "mambapy JambaLM: Mamba layers (inner layer norms) and grouped-query "
                     "SDPA layers, top-2 of 4 experts on every other layer: logits and router logits", jamba,
                     _tokens((7, 11)), **_TOLERANCE),
    ]  # fmt: skip


def _sde_models() -> list[OutsideModel]:
    """torchsde's ``sdeint`` as its README calls it, the Brownian motion made in forward."""
    import torch

    class Sde(torch.nn.Module):
        """A neural SDE (diagonal noise, Ito), Euler-Maruyama at a fixed step on a
        ``BrownianInterval`` seeded by ``entropy``."""

        noise_type = "diagonal"
        sde_type = "ito"

        def __init__(self) -> None:
            super().__init__()
            self.drift = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
            self.diffusion = torch.nn.Linear(3, 3)

        def f(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return self.drift(y)

        def g(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return torch.sigmoid(self.diffusion(y))

        def forward(self, y0: torch.Tensor) -> torch.Tensor:
            torchsde = _module("torchsde")
            ts = torch.linspace(0, 1, 5)
            bm = torchsde.BrownianInterval(t0=0.0, t1=1.0, size=y0.shape, entropy=7)
            return torchsde.sdeint(self, y0, ts, method="euler", dt=0.1, bm=bm)

    return [
        OutsideModel("torchsde_euler", "torchsde sdeint (Euler-Maruyama, fixed dt) of a neural SDE, a "
                     "BrownianInterval seeded in forward", Sde, lambda shape: _call(_randn(shape, (1, 3)[shape], 3)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _pyro_models() -> list[OutsideModel]:
    """pyro's distributions in a model's forward: log-densities of data, as a loss does, with
    pyro's argument validation off (``pyro.validation_enabled(False)``): its checks read tensors'
    values, which ``torch.export`` cannot guard on."""
    import torch

    class MixtureDensity(torch.nn.Module):
        """A mixture density network: ``MixtureSameFamily`` of ``Normal(...).to_event(1)``
        components from an MLP's outputs, its ``log_prob``; a ``LowRankMultivariateNormal`` and
        a ``Gamma``/``Dirichlet``/``VonMises`` head's log-densities beside it."""

        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3 + 3 * 4 * 2))
            self.factor = torch.nn.Linear(4, 4 * 2)

        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            with _module("pyro").validation_enabled(False):
                return self.densities(x, y)

        def densities(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            dist = _module("pyro.distributions")
            out = self.net(x)
            logits, loc, scale = out[:, :3], out[:, 3:15].unflatten(-1, (3, 4)), out[:, 15:].unflatten(-1, (3, 4))
            components = dist.Normal(loc, torch.nn.functional.softplus(scale) + 1e-3).to_event(1)
            mixture = dist.MixtureSameFamily(dist.Categorical(logits=logits), components)
            low_rank = dist.LowRankMultivariateNormal(x, self.factor(x).unflatten(-1, (4, 2)), x.exp())
            positive = y.abs() + 0.1
            return (mixture.log_prob(y), low_rank.log_prob(y), dist.Gamma(positive, 2.0).log_prob(x.exp()).sum(-1),
                    dist.Dirichlet(positive).log_prob(x.softmax(-1)),
                    dist.VonMises(x, positive).log_prob(y).sum(-1))  # fmt: skip

    class SplineFlow(torch.nn.Module):
        """A normalising flow of pyro's transforms: a spline coupling, a permutation and an
        affine coupling (``DenseNN``s) on a standard normal, ``log_prob`` of samples (each
        transform's inverse) and the forward map of base samples. (An affine autoregressive
        transform's inverse loops over a permutation tensor's values: export refuses it.)"""

        def __init__(self) -> None:
            super().__init__()
            transforms = _module("pyro.distributions.transforms")
            self.spline = transforms.spline_coupling(4, count_bins=6)
            self.permute = transforms.Permute(torch.tensor([3, 2, 0, 1]))  # a plain transform, not a module
            self.affine = transforms.affine_coupling(4, hidden_dims=[16])

        def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            dist = _module("pyro.distributions")
            with _module("pyro").validation_enabled(False):
                base = dist.Normal(torch.zeros(4), torch.ones(4)).to_event(1)
                flow = dist.TransformedDistribution(base, [self.spline, self.permute, self.affine])
                return flow.log_prob(x), self.affine(self.permute(self.spline(z)))

    def pairs(shape: int) -> Any:
        batch = (5, 9)[shape]
        return _call(_randn(shape, batch, 4), _randn(shape + 1, batch, 4))

    return [
        OutsideModel("pyro_mixture_density", "pyro MixtureSameFamily of Normal.to_event(1) from an MLP "
                     "(log_prob), LowRankMultivariateNormal, Gamma, Dirichlet and VonMises log-densities",
                     MixtureDensity, pairs, **_TOLERANCE),
        OutsideModel("pyro_spline_flow", "pyro TransformedDistribution of spline_coupling, Permute and "
                     "affine_coupling: log_prob and the forward map", SplineFlow, pairs,
                     **_TOLERANCE),
    ]  # fmt: skip


def _tabular_models() -> list[OutsideModel]:
    """Transformers and ResNets for tabular data: categorical ids and continuous features."""
    import torch

    categories = (3, 5, 4)

    def features(shape: int, ids_first: bool = True) -> Any:
        batch = (1, 6)[shape]
        ids = torch.stack([torch.randint(0, count, (batch,), generator=_seeded(shape)) for count in categories], 1)
        continuous = _randn(shape, batch, 4)
        return _call(ids, continuous) if ids_first else _call(continuous, ids)

    class LucidFt(torch.nn.Module):
        """tab-transformer-pytorch's ``FTTransformer`` returning its attention maps."""

        def __init__(self) -> None:
            super().__init__()
            self.model = _module("tab_transformer_pytorch").FTTransformer(
                categories=categories, num_continuous=4, dim=16, depth=2, heads=2, dim_head=8, dim_out=2
            )

        def forward(self, ids: torch.Tensor, continuous: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.model(ids, continuous, return_attn=True)

    def tab_transformer() -> Any:
        mean_std = torch.tensor([[0.0, 1.0], [0.5, 2.0], [0.0, 0.5], [1.0, 1.0]])
        return _module("tab_transformer_pytorch").TabTransformer(
            categories=categories, num_continuous=4, dim=16, depth=2, heads=2, dim_head=8, dim_out=2,
            mlp_act=torch.nn.ReLU(), continuous_mean_std=mean_std)  # fmt: skip

    def rtdl_ft() -> Any:
        rtdl = _module("rtdl_revisiting_models")
        config = rtdl.FTTransformer.get_default_kwargs(n_blocks=2)
        return rtdl.FTTransformer(n_cont_features=4, cat_cardinalities=list(categories), d_out=2, **config)

    class RtdlResNet(torch.nn.Module):
        """rtdl-revisiting-models' ``ResNet`` and ``MLP`` on one-hot categories beside the
        continuous features."""

        def __init__(self) -> None:
            super().__init__()
            rtdl = _module("rtdl_revisiting_models")
            width = 4 + sum(categories)
            self.resnet = rtdl.ResNet(d_in=width, d_out=2, n_blocks=2, d_block=32, d_hidden=None,
                                      d_hidden_multiplier=2.0, dropout1=0.1, dropout2=0.0)  # fmt: skip
            self.mlp = rtdl.MLP(d_in=width, d_out=2, n_blocks=2, d_block=16, dropout=0.1)

        def forward(self, continuous: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            one_hot = [torch.nn.functional.one_hot(ids[:, i], count) for i, count in enumerate(categories)]
            x = torch.cat([continuous, *one_hot], 1).float()
            return self.resnet(x), self.mlp(x)

    return [
        OutsideModel("tab_transformer", "tab-transformer-pytorch TabTransformer (categorical embeddings with a "
                     "shared part, hyper-connections, continuous features normalised by a mean/std buffer)",
                     tab_transformer, features, **_TOLERANCE),
        OutsideModel("tab_ft_transformer_attn", "tab-transformer-pytorch FTTransformer returning its "
                     "post-softmax attention maps", LucidFt, features, **_TOLERANCE),
        OutsideModel("rtdl_ft_transformer", "rtdl-revisiting-models FTTransformer (default kwargs, 2 blocks: "
                     "linear and categorical embeddings, CLS token, ReGLU), called (x_cont, x_cat)", rtdl_ft,
                     lambda shape: features(shape, ids_first=False), **_TOLERANCE),
        OutsideModel("rtdl_resnet_mlp", "rtdl-revisiting-models ResNet and MLP on one-hot categories and "
                     "continuous features", RtdlResNet, lambda shape: features(shape, ids_first=False),
                     **_TOLERANCE),
    ]  # fmt: skip


def _quantizer_models() -> list[OutsideModel]:
    """vector-quantize-pytorch's quantizers in eval mode (no codebook update)."""
    import torch

    class Vector(torch.nn.Module):
        """``VectorQuantize`` with cosine similarity and a low-dimensional codebook, and
        ``ResidualVQ`` (three quantizers), each returning codes, indices and losses."""

        def __init__(self) -> None:
            super().__init__()
            vq = _module("vector_quantize_pytorch")
            self.cosine = vq.VectorQuantize(dim=16, codebook_size=32, codebook_dim=8, use_cosine_sim=True)
            self.residual = vq.ResidualVQ(dim=16, num_quantizers=3, codebook_size=16)

        def forward(self, x: torch.Tensor) -> tuple[Any, ...]:
            return (*self.cosine(x), *self.residual(x))

    class Scalar(torch.nn.Module):
        """``FSQ`` (levels 8, 5, 5, 5, projected from 16 dimensions) and ``LFQ`` (16 codes, an
        entropy auxiliary loss), their codes and indices, and FSQ's codes back from indices."""

        def __init__(self) -> None:
            super().__init__()
            vq = _module("vector_quantize_pytorch")
            self.fsq = vq.FSQ(levels=[8, 5, 5, 5], dim=16)
            self.lfq = vq.LFQ(dim=16, codebook_size=16, entropy_loss_weight=0.1)

        def forward(self, x: torch.Tensor) -> tuple[Any, ...]:
            codes, indices = self.fsq(x)
            quantized, lfq_indices, aux = self.lfq(x)
            return codes, indices, self.fsq.indices_to_codes(indices), quantized, lfq_indices, aux

    return [
        OutsideModel("vq_vector_residual", "vector-quantize-pytorch VectorQuantize (cosine similarity, "
                     "8-dim codebook) and ResidualVQ (3 quantizers): codes, indices, losses", Vector,
                     _sequences((6, 10), 16), **_TOLERANCE),
        OutsideModel("vq_fsq_lfq", "vector-quantize-pytorch FSQ (levels 8,5,5,5, projected) with "
                     "indices_to_codes, LFQ (16 codes, entropy loss)", Scalar, _sequences((6, 10), 16),
                     **_TOLERANCE),
    ]  # fmt: skip


def _attention_models() -> list[OutsideModel]:
    """local-attention's windowed attention and transformer, linear-attention-transformer's LM."""
    import torch

    class Windowed(torch.nn.Module):
        """``LocalAttention`` non-causal, one window back and one forward, padding the length to
        the window (``autopad``), rotary positions, under a padding mask."""

        def __init__(self) -> None:
            super().__init__()
            local = _module("local_attention")
            self.attention = local.LocalAttention(dim=8, window_size=4, causal=False, look_backward=1,
                                                  look_forward=1, autopad=True, exact_windowsize=False)  # fmt: skip

        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.attention(q, k, v, mask=mask)

    def windowed_inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (10, 13)[shape]
        mask = torch.arange(length)[None] < torch.tensor((length, length - 3, 5)[:batch])[:, None]
        return _call(*(_randn(shape + i, batch, 2, length, 8) for i in range(3)), mask)

    def local_transformer() -> Any:
        return _module("local_attention").LocalTransformer(num_tokens=64, max_seq_len=32, dim=32, depth=2,
                                                           local_attn_window_size=4, dim_head=8, heads=2,
                                                           use_dynamic_pos_bias=True)  # fmt: skip

    def linear_lm() -> Any:
        return _module("linear_attention_transformer").LinearAttentionTransformerLM(
            num_tokens=64, dim=32, depth=2, max_seq_len=16, heads=4, dim_head=8, causal=True,
            n_local_attn_heads=2, local_attn_window_size=4, ff_glu=True, shift_tokens=True)  # fmt: skip

    return [
        OutsideModel("local_attention_window", "local-attention LocalAttention (look back and forward one "
                     "window, autopad to the window, rotary) under a padding mask", Windowed, windowed_inputs,
                     **_TOLERANCE),
        OutsideModel("local_transformer_lm", "local-attention LocalTransformer (causal windows of 4, dynamic "
                     "position bias, hyper-connections)", local_transformer, _tokens((8, 13)), **_TOLERANCE),
        OutsideModel("linear_attention_lm", "linear-attention-transformer LM, causal (linear attention by cumsum), "
                     "2 local heads, GLU feed-forward, shifted tokens, axial positions", linear_lm,
                     _tokens((8, 16)), **_TOLERANCE),
    ]  # fmt: skip


def _siren_models() -> list[OutsideModel]:
    """siren-pytorch's SIREN as an implicit image representation."""
    import torch

    class Image(torch.nn.Module):
        """``SirenWrapper`` of a ``SirenNet`` with a latent modulator: the image made from the
        coordinate grid (a buffer cloned and made ``requires_grad_`` in forward), and its MSE
        against a given image."""

        def __init__(self) -> None:
            super().__init__()
            siren = _module("siren_pytorch")
            net = siren.SirenNet(dim_in=2, dim_hidden=32, dim_out=3, num_layers=3)
            self.wrapper = siren.SirenWrapper(net, image_width=6, image_height=5, latent_dim=8)

        def forward(self, latent: torch.Tensor, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.wrapper(latent=latent), self.wrapper(image, latent=latent)

    return [
        OutsideModel("siren_modulated", "siren-pytorch SirenWrapper of a SirenNet (sine layers, w0=30) with a "
                     "latent Modulator: the image and its MSE against another", Image,
                     lambda shape: _call(_randn(shape, 8), _randn(shape + 1, 1, 3, 5, 6)), **_TOLERANCE),
    ]  # fmt: skip


def _tabnet_models() -> list[OutsideModel]:
    """pytorch-tabnet's network, as its ``predict`` and ``explain`` call it, on continuous
    columns (with categorical columns its embedder loops over a boolean tensor's values,
    ``for ... is_continuous in enumerate(self.continuous_idx)``, which export cannot guard on)."""
    import torch

    class TabNet(torch.nn.Module):
        """``TabNet`` (ghost batch norm in chunks of 4 rows, shared and step-specific GLU
        blocks): its logits and sparsity loss, and ``forward_masks``' explanation and per-step
        masks."""

        def __init__(self, mask_type: str) -> None:
            super().__init__()
            network = _module("pytorch_tabnet.tab_network")
            self.net = network.TabNet(input_dim=6, output_dim=2, n_d=8, n_a=8, n_steps=3, virtual_batch_size=4,
                                      mask_type=mask_type, group_attention_matrix=torch.eye(6))  # fmt: skip

        def forward(self, x: torch.Tensor) -> tuple[Any, ...]:
            logits, sparsity = self.net(x)
            explanation, masks = self.net.forward_masks(x)
            return logits, sparsity, explanation, masks

    def rows(shape: int) -> Any:
        return _call(_randn(shape, (3, 10)[shape], 6))  # 3 rows, then 10: one ghost batch, then three

    return [
        OutsideModel("tabnet_sparsemax", "pytorch-tabnet TabNet (ghost batch norm, GLU blocks, sparsemax "
                     "attentive masks): logits, sparsity loss, forward_masks", lambda: TabNet("sparsemax"), rows,
                     **_TOLERANCE),
        OutsideModel("tabnet_entmax", "pytorch-tabnet TabNet with entmax-1.5 masks (sort, cumsum, a custom "
                     "autograd Function)", lambda: TabNet("entmax"), rows, **_TOLERANCE),
    ]  # fmt: skip
