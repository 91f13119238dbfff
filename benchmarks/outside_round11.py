"""The eleventh round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: gpytorch's
exact and variational Gaussian processes (predictive mean and covariance in eval, a deep kernel)
and a botorch model's posterior; normflows' RealNVP and Glow flows and zuko's conditional neural
spline and autoregressive flows (log-densities and inverses); torchmetrics' functional image and
pairwise metrics wrapped in a module; a sentence-transformers pipeline (an encoder writing its
token embeddings into the features dict, ``Pooling``, ``Dense``, ``Normalize``) called with a
dict; rotary-embedding-torch's rotary, xPos and axial embeddings; performer-pytorch's causal and
masked language models. And hand-written models of patterns the earlier rounds had not: inputs in
a dict, a dataclass and a namedtuple with nested dicts out; ``torch.where`` with scalar
branches, ``cdist`` and integer index arithmetic; triangular and Cholesky solvers; ``torch.fft``
round trips and complex intermediates returned as real; ``masked_fill(-inf)`` then softmax with
fully masked rows; cumulative ops; ``scatter_reduce``, ``bucketize`` and ``searchsorted``.
torch-harmonics and torchaudio were tried and dropped: their compiled extensions do not load
against torch 2.13.0 (undefined symbols).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded
from benchmarks.outside_round9 import _images, _module
from benchmarks.outside_round10 import _tokens

# Float32 models of a few hundred ops at most: the static runtime's kernels round otherwise than
# eager's; 1e-4 as the tenth round.
_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def eleventh_round() -> list[OutsideModel]:
    """The eleventh round's models, library by library, then the hand-written patterns."""
    return (_gpytorch_models() + _botorch_models() + _flow_models() + _torchmetrics_models()
            + _sentence_transformers_models() + _rotary_models() + _performer_models() + _patterns())  # fmt: skip


def _points(sizes: tuple[int, int], features: int, dtype: Any = None) -> Callable[[int], Any]:
    """``sizes[shape]`` points of ``features`` coordinates in the unit cube."""

    def make(shape: int) -> Any:
        import torch

        return _call(torch.rand(sizes[shape], features, generator=_seeded(shape), dtype=dtype))

    return make


def _padded_tokens(shape: int, lengths: tuple[int, int]) -> tuple[Any, Any]:
    """Token ids of ``lengths[shape]`` at batch 1 then 3, and a boolean mask of the tokens kept:
    the first sequence whole, the others padded at the end (4 tokens short, then 3 long)."""
    import torch

    batch, length = (1, 3)[shape], lengths[shape]
    ids = torch.randint(0, 64, (batch, length), generator=_seeded(shape))
    return ids, torch.arange(length)[None] < torch.tensor((length, length - 4, 3)[:batch])[:, None]


def _gpytorch_models() -> list[OutsideModel]:
    """gpytorch's models in eval mode on fixed training data, as its TorchScript/ONNX export
    example calls them (``fast_pred_var``, ``trace_mode``, ``debug(False)``; the sweep's eager
    call before preparing caches an ``ExactGP``'s prediction strategy, as that example's first
    call does)."""
    import torch

    def settings() -> Any:
        gpytorch = _module("gpytorch")
        return gpytorch.settings.fast_pred_var(), gpytorch.settings.trace_mode(), gpytorch.settings.debug(False)

    def training_data() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.rand(16, 2, generator=_seeded(7))
        return x, torch.sin(3 * x.sum(-1))

    class Predictive(torch.nn.Module):
        """``likelihood(gp(x))``'s mean and covariance matrix, the GP an ``ExactGP`` of a mean
        and a kernel on the features a network makes (the identity without one)."""

        def __init__(self, kernel: Callable[[], Any], features: torch.nn.Module | None) -> None:
            super().__init__()
            gpytorch = _module("gpytorch")
            width = 2 if features is None else 3

            exact_gp: Any = gpytorch.models.ExactGP

            class Exact(exact_gp):
                def __init__(self, x: torch.Tensor, y: torch.Tensor, likelihood: Any) -> None:
                    super().__init__(x, y, likelihood)
                    self.features = features or torch.nn.Identity()
                    self.mean_module = gpytorch.means.LinearMean(width)
                    self.covar_module = gpytorch.kernels.ScaleKernel(kernel())

                def forward(self, x: torch.Tensor) -> Any:
                    z = self.features(x)
                    return gpytorch.distributions.MultivariateNormal(self.mean_module(z), self.covar_module(z))

            self.likelihood = gpytorch.likelihoods.GaussianLikelihood()
            self.gp = Exact(*training_data(), self.likelihood)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            fast, trace, debug = settings()
            with fast, trace, debug:
                predictive = self.likelihood(self.gp(x))
                return predictive.mean, predictive.covariance_matrix

    def exact(kernel: str, deep: bool, **config: Any) -> Callable[[], Any]:
        def build() -> Any:
            network = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
            features = network if deep else None
            return Predictive(lambda: getattr(_module("gpytorch").kernels, kernel)(**config), features)

        return build

    class Variational(torch.nn.Module):
        """A sparse variational GP (``ApproximateGP`` with a ``VariationalStrategy`` over 6
        learned inducing points, a Cholesky variational distribution): the predictive mean and
        the marginal variances' square roots."""

        def __init__(self) -> None:
            super().__init__()
            gpytorch = _module("gpytorch")
            inducing = torch.rand(6, 2, generator=_seeded(8))

            approximate_gp: Any = gpytorch.models.ApproximateGP

            class Sparse(approximate_gp):
                def __init__(self) -> None:
                    distribution = gpytorch.variational.CholeskyVariationalDistribution(6)
                    strategy = gpytorch.variational.VariationalStrategy(self, inducing, distribution,
                                                                        learn_inducing_locations=True)  # fmt: skip
                    super().__init__(strategy)
                    self.mean_module = gpytorch.means.ConstantMean()
                    self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.PolynomialKernel(power=2))

                def forward(self, x: torch.Tensor) -> Any:
                    return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

            self.gp = Sparse()
            with torch.no_grad():  # whitened by a first call (``updated_strategy``), trained parameters
                self.forward(inducing)
                self.gp.variational_strategy._variational_distribution.variational_mean.normal_(generator=_seeded(9))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            fast, trace, debug = settings()
            with fast, trace, debug:
                output = self.gp(x)
                return output.mean, output.covariance_matrix.diagonal(dim1=-2, dim2=-1).clamp_min(1e-6).sqrt()

    return [
        OutsideModel("gp_exact_rbf", "gpytorch ExactGP (LinearMean, ScaleKernel(RBFKernel)), GaussianLikelihood: "
                     "predictive mean and covariance under fast_pred_var/trace_mode", exact("RBFKernel", False),
                     _points((5, 9), 2), **_TOLERANCE),
        OutsideModel("gp_deep_kernel", "gpytorch ExactGP on an MLP's features (deep kernel: "
                     "ScaleKernel(PolynomialKernel)), predictive mean and covariance (from the prediction "
                     "strategy an eval call caches)", exact("PolynomialKernel", True, power=2), _points((5, 9), 2),
                     **_TOLERANCE),
        OutsideModel("gp_variational", "gpytorch ApproximateGP with VariationalStrategy (6 inducing points, "
                     "CholeskyVariationalDistribution, whitening): mean and marginal standard deviations",
                     Variational, _points((5, 9), 2), **_TOLERANCE),
    ]  # fmt: skip


def _botorch_models() -> list[OutsideModel]:
    """botorch's ``SingleTaskGP`` in float64 on fixed data, as a Bayesian optimisation loop
    evaluates it: the posterior's mean and variance, and analytic acquisition values."""
    import torch

    def training_data() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.rand(10, 2, generator=_seeded(11), dtype=torch.float64)
        return x, (torch.sin(4 * x[:, :1]) + x[:, 1:] ** 2)

    class Posterior(torch.nn.Module):
        """``model.posterior(X)``'s mean and variance (botorch's default Matern-5/2 kernel,
        input normalisation and outcome standardisation)."""

        def __init__(self) -> None:
            super().__init__()
            botorch = _module("botorch")
            x, y = training_data()
            transforms = botorch.models.transforms
            self.model = botorch.models.SingleTaskGP(x, y, input_transform=transforms.Normalize(2),
                                                     outcome_transform=transforms.Standardize(1))  # fmt: skip

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            posterior = self.model.posterior(x)
            return posterior.mean, posterior.variance

    class Acquisition(torch.nn.Module):
        """Analytic ``LogExpectedImprovement`` and ``UpperConfidenceBound`` of ``b x 1 x d``
        candidates, on a ``SingleTaskGP`` given a polynomial kernel (a kernel without
        ``covar_dist``'s ``torch.equal``)."""

        def __init__(self) -> None:
            super().__init__()
            botorch, gpytorch = _module("botorch"), _module("gpytorch")
            x, y = training_data()
            kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.PolynomialKernel(power=2))
            model = botorch.models.SingleTaskGP(x, y, covar_module=kernel)
            self.log_ei = botorch.acquisition.LogExpectedImprovement(model, best_f=y.max())
            self.ucb = botorch.acquisition.UpperConfidenceBound(model, beta=0.2)

        def forward(self, candidates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            gpytorch = _module("gpytorch")
            with gpytorch.settings.trace_mode(), gpytorch.settings.debug(False):
                return self.log_ei(candidates), self.ucb(candidates)

    def candidates(shape: int) -> Any:
        return _call(torch.rand((3, 7)[shape], 1, 2, generator=_seeded(shape), dtype=torch.float64))

    return [
        OutsideModel("botorch_posterior", "botorch SingleTaskGP (Matern-5/2, Normalize, Standardize) "
                     "posterior(X) mean and variance, float64", Posterior, _points((4, 7), 2, torch.float64),
                     rtol=1e-7, atol=1e-7),
        OutsideModel("botorch_acquisition", "botorch LogExpectedImprovement and UpperConfidenceBound on a "
                     "SingleTaskGP with a polynomial kernel, b x 1 x d candidates, float64", Acquisition,
                     candidates, rtol=1e-7, atol=1e-7),
    ]  # fmt: skip


def _flow_models() -> list[OutsideModel]:
    """normflows' and zuko's normalizing flows: densities and the inverse (sampling) direction
    on given base samples, so no random op runs in forward."""
    import torch

    class RealNvp(torch.nn.Module):
        """normflows' RealNVP as its README builds it (affine coupling blocks of MLPs, swap
        permutations, a diagonal Gaussian base): ``log_prob(x)`` and ``forward(z)``."""

        def __init__(self) -> None:
            super().__init__()
            nf = _module("normflows")
            flows: list[Any] = []
            for _ in range(4):
                flows += [nf.flows.AffineCouplingBlock(nf.nets.MLP([2, 16, 16, 4], init_zeros=False)),
                          nf.flows.Permute(4, mode="swap")]  # fmt: skip
            self.flow = nf.NormalizingFlow(nf.distributions.DiagGaussian(4), flows)

        def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.flow.log_prob(x), self.flow.forward(z)

    def pairs(shape: int) -> Any:
        batch = (5, 11)[shape]
        return _call(_randn(shape, batch, 4), _randn(shape + 1, batch, 4))

    class Glow(torch.nn.Module):
        """normflows' Glow: two ``GlowBlock``s (affine coupling of a conv net with a sigmoid scale,
        an invertible 1x1 convolution through its LU decomposition, ActNorm) after a ``Squeeze``;
        the log-determinant and the latent of images, and the inverse of the latent. ActNorm is
        initialised on a first batch at build, as a trained model's is."""

        def __init__(self) -> None:
            super().__init__()
            nf = _module("normflows")
            blocks = [nf.flows.GlowBlock(12, 16, split_mode="channel", scale=True, use_lu=True) for _ in range(2)]
            self.flows = torch.nn.ModuleList([*blocks, nf.flows.Squeeze()])  # images to latents: the last first
            with torch.no_grad():
                self.forward(torch.rand(4, 3, 8, 8, generator=_seeded(12)))

        def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            z, log_det = images, images.new_zeros(images.shape[0])
            flows: list[Any] = list(self.flows)
            for flow in reversed(flows):
                z, change = flow.inverse(z)
                log_det = log_det + change
            back = z
            for flow in flows:
                back, _ = flow(back)
            return z, log_det, back

    class Zuko(torch.nn.Module):
        """zuko's conditional flow called as its users call it, ``flow(context)`` a distribution:
        its ``log_prob`` of samples and its transform's inverse of base samples."""

        def __init__(self, flow: str, **config: Any) -> None:
            super().__init__()
            self.flow = getattr(_module("zuko").flows, flow)(features=3, context=2, transforms=2, **config)

        def forward(self, x: torch.Tensor, context: torch.Tensor, base: torch.Tensor) -> tuple[torch.Tensor, ...]:
            distribution = self.flow(context)
            return distribution.log_prob(x), distribution.transform.inv(base)

    def conditional(shape: int) -> Any:
        batch = (4, 9)[shape]
        return _call(_randn(shape, batch, 3), _randn(shape + 1, batch, 2), _randn(shape + 2, batch, 3))

    return [
        OutsideModel("nf_realnvp", "normflows NormalizingFlow: 4 AffineCouplingBlocks of MLPs, swap Permute, "
                     "DiagGaussian base; log_prob(x) and forward(z)", RealNvp, pairs, **_TOLERANCE),
        OutsideModel("nf_glow", "normflows Squeeze + 2 GlowBlocks (sigmoid affine coupling, LU 1x1 convolution, "
                     "ActNorm initialised on a batch): inverse with log-determinant, forward back",
                     Glow, _images((8, 4)), **_TOLERANCE),
        OutsideModel("zuko_nsf", "zuko NSF (monotonic rational-quadratic splines: searchsorted bins) conditional "
                     "flow: log_prob and transform.inv", lambda: Zuko("NSF", hidden_features=(16, 16)),
                     conditional, **_TOLERANCE),
        OutsideModel("zuko_maf", "zuko MAF (masked autoregressive, its inverse a loop over features) "
                     "conditional flow: log_prob and transform.inv", lambda: Zuko("MAF", hidden_features=(16, 16)),
                     conditional, **_TOLERANCE),
    ]  # fmt: skip


def _torchmetrics_models() -> list[OutsideModel]:
    """torchmetrics' functional metrics wrapped in a module, as a loss or a validation head
    computes them on a batch."""
    import torch

    class ImageQuality(torch.nn.Module):
        """SSIM (with its full map), PSNR, universal image quality index, spectral angle mapper,
        total variation, the relative dimensionless global error (ERGAS) between an image and a
        prediction."""

        def forward(self, preds: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
            functional = _module("torchmetrics.functional.image")
            ssim, ssim_map = functional.structural_similarity_index_measure(preds, target, data_range=1.0,
                                                                            return_full_image=True)  # fmt: skip
            return (ssim, ssim_map, functional.peak_signal_noise_ratio(preds, target, data_range=1.0),
                    functional.universal_image_quality_index(preds, target),
                    functional.spectral_angle_mapper(preds, target), functional.total_variation(preds),
                    functional.error_relative_global_dimensionless_synthesis(preds, target))  # fmt: skip

    def image_pairs(shape: int) -> Any:
        batch, size = (1, 3)[shape], (16, 12)[shape]
        target = torch.rand(batch, 3, size, size, generator=_seeded(shape))
        return _call((target + 0.1 * torch.rand(target.shape, generator=_seeded(shape + 1))).clamp(0, 1), target)

    class PairwiseMulticlass(torch.nn.Module):
        """Pairwise cosine and Euclidean similarity of embeddings (zeroed diagonal), and
        multiclass accuracy (macro, and micro of the top 2) of logits against labels, with
        ``validate_args=False`` as torchmetrics advises for speed. Binary AUROC, average
        precision and calibration error were tried and left out: they check whether the scores
        are probabilities
        (``if not torch.all((tensor >= 0) * (tensor <= 1))``) whatever the flag, a value export
        cannot capture."""

        def forward(self, x: torch.Tensor, logits: torch.Tensor, classes: torch.Tensor) -> tuple[torch.Tensor, ...]:
            functional = _module("torchmetrics.functional")
            classification = functional.classification
            return (functional.pairwise_cosine_similarity(x, zero_diagonal=True),
                    functional.pairwise_euclidean_distance(x, zero_diagonal=True),
                    classification.multiclass_accuracy(logits, classes, num_classes=4, validate_args=False),
                    classification.multiclass_accuracy(logits, classes, num_classes=4, average="micro", top_k=2,
                                                       validate_args=False))  # fmt: skip

    def retrieval_inputs(shape: int) -> Any:
        points, samples = (5, 8)[shape], (12, 20)[shape]
        return _call(_randn(shape, points, 6), _randn(shape + 1, samples, 4), torch.arange(samples) % 4)

    return [
        OutsideModel("tm_image_quality", "torchmetrics functional SSIM (and its map), PSNR, UQI, spectral "
                     "angle mapper, total variation, ERGAS", ImageQuality, image_pairs, **_TOLERANCE),
        OutsideModel("tm_pairwise_multiclass", "torchmetrics pairwise cosine/euclidean (zero diagonal), "
                     "multiclass accuracy (macro, micro top-2)", PairwiseMulticlass,
                     retrieval_inputs, **_TOLERANCE),
    ]  # fmt: skip


def _sentence_transformers_models() -> list[OutsideModel]:
    """A ``SentenceTransformer`` assembled from modules around a random BERT from a config (the
    library's own ``Transformer`` module loads a checkpoint by name; this one writes the same
    ``token_embeddings`` key), called as its ``encode`` calls it: with the tokenizer's dict."""
    import torch

    class Encoder(torch.nn.Module):
        """A BERT writing ``token_embeddings`` into the features dict, as sentence-transformers'
        ``Transformer`` module does."""

        def __init__(self) -> None:
            super().__init__()
            transformers = _module("transformers")
            config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             intermediate_size=64, vocab_size=64)  # fmt: skip
            self.bert = transformers.BertModel(config, add_pooling_layer=False)

        def forward(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
            output = self.bert(input_ids=features["input_ids"], attention_mask=features["attention_mask"])
            return {**features, "token_embeddings": output.last_hidden_state}

    def build() -> Any:
        st = _module("sentence_transformers")
        modules = _module("sentence_transformers.models")
        return st.SentenceTransformer(modules=[Encoder(), modules.Pooling(32, ("mean", "max", "cls")),
                                               modules.Dense(96, 16), modules.Normalize()], device="cpu")  # fmt: skip

    def features(shape: int) -> Any:
        ids, mask = _padded_tokens(shape, (9, 13))
        return _call({"input_ids": ids, "attention_mask": mask.long()})

    return [
        OutsideModel("st_pooling_normalize", "sentence-transformers SentenceTransformer(modules=[BERT encoder, "
                     "Pooling mean+max+cls, Dense, Normalize]) on the tokenizer's dict, the features dict out",
                     build, features, **_TOLERANCE),
    ]  # fmt: skip


def _rotary_models() -> list[OutsideModel]:
    """rotary-embedding-torch in attention as its README uses it."""
    import torch

    class RotaryAttention(torch.nn.Module):
        """Multi-head attention of a sequence with rotary queries and keys (frequencies cached in a
        buffer for the longest length seen), the same with xPos scaling
        (``rotate_queries_and_keys``), and axial rotary of a 2-D feature map
        (``get_axial_freqs``, ``apply_rotary_emb``)."""

        def __init__(self) -> None:
            super().__init__()
            rotary = _module("rotary_embedding_torch")
            self.qkv = torch.nn.Linear(32, 96)
            self.rotary = rotary.RotaryEmbedding(dim=8)
            self.xpos = rotary.RotaryEmbedding(dim=8, use_xpos=True)
            self.axial = rotary.RotaryEmbedding(dim=4, freqs_for="pixel", max_freq=16)

        def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

        def forward(self, x: torch.Tensor, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            q, k, v = self.qkv(x).unflatten(-1, (3, 4, 8)).permute(2, 0, 3, 1, 4)
            rotated = self.attend(self.rotary.rotate_queries_or_keys(q), self.rotary.rotate_queries_or_keys(k), v)
            xq, xk = self.xpos.rotate_queries_and_keys(q, k)
            scaled = self.attend(xq, xk, v)
            height, width = grid.shape[1:3]
            freqs = self.axial.get_axial_freqs(height, width)
            axial = _module("rotary_embedding_torch").apply_rotary_emb(freqs, grid)
            return rotated, scaled, axial

    def inputs(shape: int) -> Any:
        batch, length, size = (1, 3)[shape], (7, 12)[shape], (4, 6)[shape]
        return _call(_randn(shape, batch, length, 32), _randn(shape + 1, batch, size, size, 8))

    return [
        OutsideModel("rotary_xpos_axial", "rotary-embedding-torch RotaryEmbedding (cached frequencies) on "
                     "queries and keys, xPos rotate_queries_and_keys, axial pixel frequencies on a feature map",
                     RotaryAttention, inputs, **_TOLERANCE),
    ]  # fmt: skip


def _performer_models() -> list[OutsideModel]:
    """performer-pytorch's language models (FAVOR+ attention by random features drawn at build),
    in eval mode (no feature redraw)."""
    import torch

    def lm(**config: Any) -> Callable[[], Any]:
        return lambda: _module("performer_pytorch").PerformerLM(num_tokens=64, max_seq_len=32, dim=32, depth=2,
                                                                heads=4, dim_head=8, **config)  # fmt: skip

    class Masked(torch.nn.Module):
        """A bidirectional Performer with generalized (ReLU kernel) attention, two local-attention
        heads, rotary positions, under a padding mask."""

        def __init__(self) -> None:
            super().__init__()
            self.model = lm(causal=False, generalized_attention=True, local_attn_heads=2, local_window_size=4,
                            rotary_position_emb=True)()  # fmt: skip

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.model(ids, mask=mask)

    def masked_inputs(shape: int) -> Any:
        return _call(*_padded_tokens(shape, (8, 12)))

    return [
        OutsideModel("performer_causal", "performer-pytorch PerformerLM causal (FAVOR+ prefix sums: cumsum "
                     "of key-value outer products)", lm(causal=True), _tokens((9, 13)), **_TOLERANCE),
        OutsideModel("performer_masked_local", "performer-pytorch PerformerLM bidirectional, generalized ReLU "
                     "attention, local attention heads, rotary positions, padding mask", Masked, masked_inputs,
                     **_TOLERANCE),
    ]  # fmt: skip


def _patterns() -> list[OutsideModel]:
    """Hand-written models of patterns the earlier rounds had not used."""
    return _structured_inputs() + _numerics_patterns() + _indexing_patterns()


def _structured_inputs() -> list[OutsideModel]:
    """A model called with a dict, a dataclass (registered with pytree, as export needs) and a
    namedtuple, returning dicts in dicts."""
    import collections
    import dataclasses

    import torch
    from torch.utils import _pytree

    Box = collections.namedtuple("Box", ["low", "high"])

    @dataclasses.dataclass
    class Batch:
        tokens: torch.Tensor
        weights: torch.Tensor

    if Batch not in _pytree.SUPPORTED_NODES:
        _pytree.register_dataclass(Batch)

    class Structured(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(32, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, inputs: dict[str, torch.Tensor], batch: Batch, box: Any) -> dict[str, Any]:
            h = self.embed(batch.tokens) * batch.weights.unsqueeze(-1) + inputs["bias"]
            clipped = h.clamp(box.low, box.high)
            return {"head": {"logits": self.head(clipped), "pooled": clipped.mean(1)},
                    "aux": {"raw": h, "box": {"span": box.high - box.low}}, "echo": inputs["bias"]}  # fmt: skip

    def inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 9)[shape]
        tokens = torch.randint(0, 32, (batch, length), generator=_seeded(shape))
        low = -torch.rand(8, generator=_seeded(shape + 1))
        return _call({"bias": _randn(shape, 8)}, Batch(tokens, torch.rand(batch, length, generator=_seeded(shape))),
                     Box(low, low + 1.5))  # fmt: skip

    return [
        OutsideModel("structured_inputs", "inputs in a dict, a registered dataclass and a namedtuple; nested dicts "
                     "out, an input returned", Structured, inputs, **_TOLERANCE),
    ]  # fmt: skip


def _numerics_patterns() -> list[OutsideModel]:
    """Solvers, transforms with complex intermediates, masked softmax and cumulative ops."""
    import torch
    from torch.nn import functional as F

    class Solvers(torch.nn.Module):
        """A kernel matrix made positive definite, its Cholesky factor, ``cholesky_solve``,
        ``solve_triangular`` (lower, upper, from the right), ``cholesky_inverse``,
        ``linalg.solve`` and ``lu_factor``/``lu_solve`` of a batch of systems (``lstsq`` left out:
        export refuses its data-dependent output shapes on CPU)."""

        def forward(self, x: torch.Tensor, rhs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            gram = x @ x.mT + torch.eye(x.shape[-2])
            factor = torch.linalg.cholesky(gram)
            solved = torch.cholesky_solve(rhs, factor)
            lower = torch.linalg.solve_triangular(factor, rhs, upper=False)
            upper = torch.linalg.solve_triangular(factor.mT, lower, upper=True)
            right = torch.linalg.solve_triangular(factor, rhs.mT, upper=False, left=False)
            lu, pivots = torch.linalg.lu_factor(gram + x.sum(-1, keepdim=True))
            return (solved, upper, right, torch.cholesky_inverse(factor), torch.linalg.solve(gram, rhs),
                    torch.linalg.lu_solve(lu, pivots, rhs))  # fmt: skip

    def systems(shape: int) -> Any:
        batch, size = (1, 3)[shape], (4, 6)[shape]
        return _call(_randn(shape, batch, size, size), _randn(shape + 1, batch, size, 2))

    class Spectral(torch.nn.Module):
        """``rfft``/``irfft`` with a length, ``fft2``/``ifft2``, ``fftshift``, a complex filter (a
        parameter as ``polar``) applied in frequency, ``stft``/``istft``; complex intermediates
        returned as real (``.real``, ``abs``, ``angle``, ``view_as_real``)."""

        def __init__(self) -> None:
            super().__init__()
            self.magnitude = torch.nn.Parameter(torch.rand(9))
            self.phase = torch.nn.Parameter(torch.rand(9))

        def forward(self, signal: torch.Tensor, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
            spectrum = torch.fft.rfft(signal, n=16)
            filtered = torch.fft.irfft(spectrum * torch.polar(self.magnitude, self.phase), n=16)
            image_spectrum = torch.fft.fftshift(torch.fft.fft2(image), dim=(-2, -1))
            back = torch.fft.ifft2(torch.fft.ifftshift(image_spectrum, dim=(-2, -1))).real
            window = torch.hann_window(8)
            frames = torch.stft(signal, 8, hop_length=2, window=window, return_complex=True)
            restored = torch.istft(frames, 8, hop_length=2, window=window, length=signal.shape[-1])
            return (filtered, back, image_spectrum.abs().log1p(), image_spectrum.angle(),
                    torch.view_as_real(frames), restored)  # fmt: skip

    def spectral_inputs(shape: int) -> Any:
        batch, length, size = (1, 3)[shape], (16, 24)[shape], (8, 6)[shape]
        return _call(_randn(shape, batch, length), _randn(shape + 1, batch, size, size))

    class MaskedSoftmax(torch.nn.Module):
        """Attention scores ``masked_fill``ed with ``-inf`` where a padding mask and a causal mask
        say, softmax (rows fully masked give NaN, zeroed with ``nan_to_num``, as many models
        do), log-softmax, ``logsumexp`` of masked rows, ``torch.where`` choosing ``-inf``."""

        def forward(self, scores: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, ...]:
            length = scores.shape[-1]
            causal = torch.ones(length, length, dtype=torch.bool).tril()
            masked = scores.masked_fill(~(keep[:, None, :] & causal), float("-inf"))
            probabilities = masked.softmax(-1).nan_to_num(0.0)
            padded = scores.masked_fill(~keep[:, None, :], float("-inf"))
            return (probabilities, F.log_softmax(padded, -1), torch.logsumexp(padded, -1),
                    torch.where(keep[:, None, :], scores, float("-inf")).amax(-1))  # fmt: skip

    def masked_inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (6, 9)[shape]
        keep = torch.arange(length)[None] >= torch.tensor((0, 2, length)[:batch])[:, None]  # a row fully masked
        return _call(_randn(shape, batch, length, length), keep)

    class Cumulative(torch.nn.Module):
        """``cumsum`` (of floats, ints and booleans: int64 results), ``cumprod``,
        ``logcumsumexp``, ``cummax``/``cummin`` (values and indices), a reversed cumsum by flips,
        and exclusive prefix sums of a mask as positions."""

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
            values, indices = torch.cummax(x, dim=1)
            low, low_indices = torch.cummin(x, dim=-1)
            positions = mask.cumsum(-1) - mask.long()
            return (x.cumsum(1), (x.sigmoid() + 0.5).cumprod(-1), torch.logcumsumexp(x, dim=1), values, indices,
                    low, low_indices, x.flip(-1).cumsum(-1).flip(-1), positions, (x > 0).int().cumsum(0))  # fmt: skip

    def cumulative_inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (7, 10)[shape]
        return _call(_randn(shape, batch, length), torch.rand(batch, length, generator=_seeded(shape)) > 0.4)

    return [
        OutsideModel("linalg_solvers", "cholesky, cholesky_solve, solve_triangular (lower/upper/right), "
                     "cholesky_inverse, linalg.solve, lu_factor/lu_solve", Solvers, systems, **_TOLERANCE),
        OutsideModel("fft_complex_real", "rfft/irfft with n, fft2/ifft2 with fftshift, polar complex filter, "
                     "stft/istft, complex results returned as real/abs/angle/view_as_real", Spectral,
                     spectral_inputs, **_TOLERANCE),
        OutsideModel("masked_fill_softmax", "masked_fill(-inf) by padding and causal masks then softmax (a fully "
                     "masked row: NaN to 0), log_softmax, logsumexp, where(mask, x, -inf)", MaskedSoftmax,
                     masked_inputs, **_TOLERANCE),
        OutsideModel("cumulative_ops", "cumsum of float/int/bool, cumprod, logcumsumexp, cummax/cummin with "
                     "indices, reversed cumsum, exclusive prefix positions", Cumulative, cumulative_inputs,
                     **_TOLERANCE),
    ]  # fmt: skip


def _indexing_patterns() -> list[OutsideModel]:
    """Scalar branches, distances and integer index arithmetic, scatter reductions, bucketing."""
    import torch

    class NearestCells(torch.nn.Module):
        """``cdist`` (p=2 and p=1) to a buffer of centres, the nearest centre's flat index split
        into a row and a column by ``//`` and ``%``, gathers by them, ``torch.where`` with scalar
        branches (float and int), an index clamped into range."""

        centres: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("centres", torch.rand(12, 3, generator=_seeded(20)))

        def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, ...]:
            distances = torch.cdist(points, self.centres)
            nearest = distances.argmin(-1)
            row, column = nearest // 4, nearest % 4
            grid = self.centres.view(3, 4, 3)
            snapped = grid[row, column]
            far = torch.where(distances.min(-1).values > 0.3, 1.0, 0.0)
            labels = torch.where(nearest % 2 == 0, nearest, -1)
            shifted = (nearest + points.shape[0]).clamp(max=11)
            manhattan = torch.cdist(points, self.centres, p=1)
            return distances, snapped, far, labels, self.centres[shifted], manhattan, row * 10 + column

    class ScatterBuckets(torch.nn.Module):
        """``scatter_reduce`` by segment with sum, prod, mean, amax and amin (with and without the
        initial values), ``bucketize`` into boundaries (``right`` either way), ``searchsorted``
        into sorted rows with a ``sorter`` and ``side='right'``, int32 results."""

        boundaries: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("boundaries", torch.tensor([-1.0, -0.25, 0.0, 0.5, 1.5]))

        def forward(self, values: torch.Tensor, segments: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, ...]:
            out = values.new_zeros(4)
            reductions = ("sum", "prod", "mean", "amax", "amin")
            reduced = tuple(out.scatter_reduce(0, segments, values, reduce, include_self=include)
                            for reduce in reductions for include in (True, False))  # fmt: skip
            order = rows.argsort(-1)
            queries = values[: rows.shape[-1]].expand(rows.shape[0], -1).contiguous()
            return (*reduced, torch.bucketize(values, self.boundaries), torch.bucketize(values, self.boundaries,
                    right=True, out_int32=True), torch.searchsorted(rows, queries, sorter=order, side="right"),
                    torch.searchsorted(rows.sort(-1).values, queries))  # fmt: skip

    def scatter_inputs(shape: int) -> Any:
        count, rows = (9, 14)[shape], (1, 3)[shape]
        return _call(_randn(shape, count), torch.randint(0, 4, (count,), generator=_seeded(shape)),
                     _randn(shape + 1, rows, 5))  # fmt: skip

    return [
        OutsideModel("cdist_index_arithmetic", "cdist p=2/p=1 to a buffer, argmin split by // and %, gathers, "
                     "where with scalar branches (float, int), clamped index arithmetic", NearestCells,
                     _points((5, 9), 3), **_TOLERANCE),
        OutsideModel("scatter_bucketize", "scatter_reduce sum/prod/mean/amax/amin with and without self, bucketize "
                     "(right, int32), searchsorted with sorter and side='right'", ScatterBuckets, scatter_inputs,
                     **_TOLERANCE),
    ]  # fmt: skip
