"""The tenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
libraries no earlier round used, each an optional extra, as their users call them: kornia's
filters, colour conversions, geometry (warps, pyramids, rotations) and morphology; x-transformers'
``TransformerWrapper`` with rotary, ALiBi, T5 relative bias, memory tokens and cross-attention;
perceiver-pytorch's Perceiver and Perceiver IO; MONAI's UNet, SegResNet, SwinUNETR and DynUNet;
PEFT's LoRA (and DoRA, IA3) on small ``transformers`` models from configs; e3nn's equivariant
tensor products, gates and a point convolution; torchdiffeq's ``odeint`` with fixed-step solvers
(and an adaptive one) inside ``forward``. timm and vit-pytorch were tried and dropped: both import
torchvision, which no CPU build matches torch 2.13.0.

A model whose package is not installed is reported as unavailable, with the import error, like a
``transformers`` model. Kept apart from ``outside_models.py`` like the rounds before; importing it
is cheap (builders import torch and the libraries when they run).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded
from benchmarks.outside_round9 import _images, _module

# Float32 models of a few hundred ops: the static runtime's kernels (fused convolutions, out
# variants) round otherwise than eager's; 1e-4 as the transformers models of the sweep.
_TOLERANCE = dict(rtol=1e-4, atol=1e-4)


def tenth_round() -> list[OutsideModel]:
    """The tenth round's models, library by library."""
    return (_kornia_models() + _x_transformers_models() + _perceiver_models() + _monai_models()
            + _peft_models() + _e3nn_models() + _torchdiffeq_models())  # fmt: skip


def _kornia_models() -> list[OutsideModel]:
    """kornia's differentiable image operations on batches of images, as a preprocessing or a
    loss module calls them."""
    import torch

    class Filters(torch.nn.Module):
        """Gaussian, box and median blurs, Sobel edges, a Laplacian, unsharp masking, and Canny's
        magnitude and edges (non-maximum suppression and hysteresis by convolutions)."""

        def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
            filters = _module("kornia.filters")
            blurred = filters.gaussian_blur2d(images, (5, 5), (1.5, 1.5))
            box = filters.box_blur(images, (3, 3), border_type="replicate")
            median = filters.median_blur(images, (3, 3))
            edges = filters.sobel(images)
            laplacian = filters.laplacian(images, 3)
            sharp = filters.unsharp_mask(images, (3, 3), (1.0, 1.0))
            magnitude, canny = filters.canny(images, low_threshold=0.1, high_threshold=0.2)
            return blurred, box, median, edges, laplacian, sharp, magnitude, canny

    class Colour(torch.nn.Module):
        """Colour spaces there and back (HSV, Lab, YCbCr, grayscale) and adjustments by a
        per-sample factor (brightness, contrast, saturation, hue, gamma)."""

        def forward(self, images: torch.Tensor, factor: torch.Tensor) -> tuple[torch.Tensor, ...]:
            color, enhance = _module("kornia.color"), _module("kornia.enhance")
            hsv = color.rgb_to_hsv(images)
            lab = color.rgb_to_lab(images)
            back = color.lab_to_rgb(lab)
            ycbcr = color.rgb_to_ycbcr(images)
            gray = color.rgb_to_grayscale(images)
            adjusted = enhance.adjust_brightness(images, factor * 0.2)
            adjusted = enhance.adjust_contrast(adjusted, factor + 0.5)
            adjusted = enhance.adjust_saturation(adjusted, factor + 0.5)
            adjusted = enhance.adjust_hue(adjusted, factor - 0.5)
            adjusted = enhance.adjust_gamma(adjusted.clamp(0, 1), factor + 0.5)
            return hsv, back, ycbcr, gray, adjusted

    def colour_inputs(shape: int) -> Any:
        batch, size = (1, 3)[shape], (16, 12)[shape]
        images = torch.rand(batch, 3, size, size, generator=_seeded(shape))
        return _call(images, torch.rand(batch, generator=_seeded(shape + 1)))

    class Geometry(torch.nn.Module):
        """Warps by matrices made from the inputs (a rotation about the centre by a per-sample
        angle, a perspective from four point pairs), ``rotate``/``translate``/``scale``, a
        Gaussian pyramid down and up, and a resize with antialiasing."""

        def forward(self, images: torch.Tensor, angle: torch.Tensor, corners: torch.Tensor) -> tuple[torch.Tensor, ...]:
            geometry = _module("kornia.geometry")
            batch, _, height, width = images.shape
            centre = images.new_tensor([(width - 1) / 2, (height - 1) / 2]).expand(batch, 2)
            rotation = geometry.transform.get_rotation_matrix2d(centre, angle, torch.ones_like(centre))
            rotated = geometry.transform.warp_affine(images, rotation, (height, width), align_corners=True)
            source = images.new_tensor([[0.0, 0.0], [width - 1, 0.0], [width - 1, height - 1], [0.0, height - 1]])
            homography = geometry.transform.get_perspective_transform(source.expand(batch, 4, 2), source + corners)
            warped = geometry.transform.warp_perspective(images, homography, (height, width))
            turned = geometry.transform.rotate(images, angle)
            moved = geometry.transform.translate(images, corners[:, 0])
            down = geometry.transform.pyrdown(images)
            up = geometry.transform.pyrup(down)
            resized = geometry.transform.resize(images, (7, 9), antialias=True)
            return rotated, warped, turned, moved, up, resized

    def geometry_inputs(shape: int) -> Any:
        batch, size = (1, 3)[shape], (16, 12)[shape]
        return _call(torch.rand(batch, 3, size, size, generator=_seeded(shape)),
                     torch.rand(batch, generator=_seeded(shape + 1)) * 90,
                     torch.rand(batch, 4, 2, generator=_seeded(shape + 2)) * 2 - 1)  # fmt: skip

    class Morphology(torch.nn.Module):
        """Dilation, erosion, opening, a morphological gradient and top-hat with a structuring
        element, beside the SSIM and PSNR of a blurred copy (kornia's metrics as a loss uses them)."""

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("kernel", torch.tensor([[0.0, 1.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]))

        def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
            kornia = _module("kornia")
            morphology = kornia.morphology
            blurred = kornia.filters.gaussian_blur2d(images, (3, 3), (1.0, 1.0))
            return (morphology.dilation(images, self.kernel), morphology.erosion(images, self.kernel),
                    morphology.opening(images, self.kernel), morphology.gradient(images, self.kernel),
                    morphology.top_hat(images, self.kernel), kornia.metrics.ssim(images, blurred, 5),
                    kornia.metrics.psnr(images, blurred, 1.0))  # fmt: skip

    def unit_images(sizes: tuple[int, int]) -> Callable[[int], Any]:
        return lambda shape: _call(torch.rand((1, 3)[shape], 3, sizes[shape], sizes[shape], generator=_seeded(shape)))

    return [
        OutsideModel("kornia_filters", "kornia gaussian/box/median blur, sobel, laplacian, unsharp_mask, canny "
                     "(magnitude and hysteresis edges)", Filters, unit_images((16, 12)), **_TOLERANCE),
        OutsideModel("kornia_colour", "kornia rgb to HSV/Lab (and back)/YCbCr/grayscale, brightness/contrast/"
                     "saturation/hue/gamma by per-sample factors", Colour, colour_inputs, **_TOLERANCE),
        OutsideModel("kornia_geometry", "kornia warp_affine by get_rotation_matrix2d, warp_perspective by "
                     "get_perspective_transform, rotate, translate, pyrdown/pyrup, antialiased resize",
                     Geometry, geometry_inputs, **_TOLERANCE),
        OutsideModel("kornia_morphology", "kornia dilation/erosion/opening/gradient/top_hat with a structuring "
                     "element buffer, metrics.ssim and psnr", Morphology, unit_images((16, 12)), **_TOLERANCE),
    ]  # fmt: skip


def _tokens(lengths: tuple[int, int], vocab: int = 64) -> Callable[[int], Any]:
    """Token ids of ``lengths[shape]`` at batch 1 then 3."""

    def make(shape: int) -> Any:
        import torch

        return _call(torch.randint(0, vocab, ((1, 3)[shape], lengths[shape]), generator=_seeded(shape)))

    return make


def _x_transformers_models() -> list[OutsideModel]:
    """x-transformers' wrappers as its README builds them (width 32, two layers, four heads)."""
    import torch

    def wrapper(layers: str, memory: int = 0, **attention: Any) -> Callable[[], Any]:
        def build() -> Any:
            x = _module("x_transformers")
            stack = getattr(x, layers)(dim=32, depth=2, heads=4, **attention)
            return x.TransformerWrapper(num_tokens=64, max_seq_len=32, num_memory_tokens=memory, attn_layers=stack)

        return build

    class Masked(torch.nn.Module):
        """An encoder with ALiBi and a padding mask (a boolean mask an input), returning the
        embeddings and the logits."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = wrapper("Encoder", alibi_pos_bias=True, alibi_num_heads=2, use_rmsnorm=True, ff_glu=True)()

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.encoder(ids, mask=mask), self.encoder(ids, mask=mask, return_embeddings=True)

    def masked_inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (9, 13)[shape]
        ids = torch.randint(0, 64, (batch, length), generator=_seeded(shape))
        lengths = torch.tensor((length, length - 4, 2)[:batch])
        return _call(ids, torch.arange(length)[None] < lengths[:, None])

    class CrossAttending(torch.nn.Module):
        """An encoder-decoder as x-transformers' ``XTransformer`` builds one: the decoder attends to
        the encoder's embeddings under the source mask, T5's relative position bias in the
        encoder, rotary positions in the decoder."""

        def __init__(self) -> None:
            super().__init__()
            x = _module("x_transformers")
            self.model = x.XTransformer(dim=32, enc_num_tokens=64, enc_depth=2, enc_heads=4, enc_max_seq_len=32,
                                        enc_rel_pos_bias=True, dec_num_tokens=64, dec_depth=2, dec_heads=4,
                                        dec_max_seq_len=32, dec_rotary_pos_emb=True)  # fmt: skip

        def forward(self, source: torch.Tensor, target: torch.Tensor, source_mask: torch.Tensor) -> torch.Tensor:
            encoded = self.model.encoder(source, mask=source_mask, return_embeddings=True)
            return self.model.decoder.net(target, context=encoded, context_mask=source_mask)

    def cross_inputs(shape: int) -> Any:
        batch, source, target = (1, 3)[shape], (8, 11)[shape], (5, 7)[shape]
        mask = torch.arange(source)[None] < torch.tensor((source, 6, 3)[:batch])[:, None]
        return _call(torch.randint(0, 64, (batch, source), generator=_seeded(shape)),
                     torch.randint(0, 64, (batch, target), generator=_seeded(shape + 1)), mask)  # fmt: skip

    class Intermediates(torch.nn.Module):
        """A continuous decoder (vectors in and out) returning its intermediates: the hidden
        states and the attention maps post-softmax of every layer, as a user reads them."""

        def __init__(self) -> None:
            super().__init__()
            x = _module("x_transformers")
            decoder = x.Decoder(dim=32, depth=2, heads=4, rotary_pos_emb=True, residual_attn=True)
            self.model = x.ContinuousTransformerWrapper(dim_in=6, dim_out=4, max_seq_len=32, attn_layers=decoder)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], tuple[torch.Tensor, ...]]:
            out, intermediates = self.model(x, return_intermediates=True)
            return out, intermediates.hiddens, tuple(i.post_softmax_attn for i in intermediates.attn_intermediates)

    def vectors(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (7, 10)[shape], 6))

    return [
        OutsideModel("xt_decoder_rotary", "x-transformers TransformerWrapper(Decoder) with rotary embeddings, "
                     "macaron feed-forwards, sandwich norm, shifted tokens", wrapper("Decoder", rotary_pos_emb=True,
                     macaron=True, sandwich_norm=True, shift_tokens=1), _tokens((9, 13)), **_TOLERANCE),
        OutsideModel("xt_encoder_alibi_mask", "x-transformers Encoder with ALiBi, RMSNorm, GLU feed-forward, a "
                     "boolean padding mask, logits and return_embeddings", Masked, masked_inputs, **_TOLERANCE),
        OutsideModel("xt_memory_tokens_talking_heads", "x-transformers Decoder with memory tokens and memory "
                     "key/values, T5 relative bias, pre/post talking heads, query-key norm, grouped key/value "
                     "heads, attention on attention, gated residuals", wrapper("Decoder", memory=2,
                     rel_pos_bias=True, attn_pre_talking_heads=True, attn_post_talking_heads=True, attn_qk_norm=True,
                     attn_kv_heads=2, attn_num_mem_kv=2, attn_on_attn=True, gate_residual=True),
                     _tokens((9, 13)), **_TOLERANCE),
        OutsideModel("xt_cross_attention", "x-transformers XTransformer: encoder (T5 relative bias) embeddings as "
                     "the rotary decoder's context under a source mask", CrossAttending, cross_inputs, **_TOLERANCE),
        OutsideModel("xt_continuous_intermediates", "x-transformers ContinuousTransformerWrapper(Decoder) with "
                     "residual attention, return_intermediates: hiddens and post-softmax maps", Intermediates,
                     vectors, **_TOLERANCE),
    ]  # fmt: skip


def _perceiver_models() -> list[OutsideModel]:
    """perceiver-pytorch's models: images as a channels-last array with Fourier features, and
    Perceiver IO decoding a sequence of queries."""
    import torch

    def perceiver() -> Any:
        return _module("perceiver_pytorch").Perceiver(input_channels=3, input_axis=2, num_freq_bands=4, max_freq=8.0,
                                                      depth=2, num_latents=16, latent_dim=32, cross_dim_head=16,
                                                      latent_dim_head=16, latent_heads=2, num_classes=5,
                                                      self_per_cross_attn=2)  # fmt: skip

    class PerceiverIO(torch.nn.Module):
        """Perceiver IO over a masked sequence, decoded at a query per output position."""

        def __init__(self) -> None:
            super().__init__()
            self.model = _module("perceiver_pytorch").PerceiverIO(dim=12, queries_dim=8, logits_dim=5, depth=2,
                                                                  num_latents=16, latent_dim=32, cross_dim_head=16,
                                                                  latent_dim_head=16, latent_heads=2)  # fmt: skip

        def forward(self, x: torch.Tensor, mask: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
            return self.model(x, mask=mask, queries=queries)

    def io_inputs(shape: int) -> Any:
        batch, length = (1, 3)[shape], (10, 14)[shape]
        mask = torch.arange(length)[None] < torch.tensor((length, 9, 4)[:batch])[:, None]
        return _call(_randn(shape, batch, length, 12), mask, _randn(shape + 1, batch, (4, 6)[shape], 8))

    def channels_last_images(shape: int) -> Any:
        size = (8, 6)[shape]
        return _call(_randn(shape, (1, 3)[shape], size, size, 3))

    return [
        OutsideModel("perceiver_image", "perceiver-pytorch Perceiver on a b h w c image with Fourier features, "
                     "2 self-attentions per cross-attention, class logits", perceiver, channels_last_images,
                     **_TOLERANCE),
        OutsideModel("perceiver_io", "perceiver-pytorch PerceiverIO with a padding mask and a query per output",
                     PerceiverIO, io_inputs, **_TOLERANCE),
    ]  # fmt: skip


def _monai_models() -> list[OutsideModel]:
    """MONAI's segmentation networks, 2-D and small, and one 3-D."""

    def net(class_name: str, **config: Any) -> Callable[[], Any]:
        return lambda: getattr(_module("monai.networks.nets"), class_name)(**config)

    def dynunet(deep_supervision: bool) -> Callable[[], Any]:
        return net(
            "DynUNet",
            spatial_dims=2,
            in_channels=1,
            out_channels=2,
            kernel_size=(3, 3, 3),
            strides=(1, 2, 2),
            upsample_kernel_size=(2, 2),
            filters=(8, 16, 32),
            res_block=True,
            deep_supervision=deep_supervision,
        )

    def volumes(shape: int) -> Any:
        size = (16, 8)[shape]
        return _call(_randn(shape, (1, 2)[shape], 1, size, size, size))

    return [
        OutsideModel("monai_unet", "MONAI UNet 2-D (residual units, strided convolutions, instance norm, PReLU)",
                     net("UNet", spatial_dims=2, in_channels=1, out_channels=2, channels=(8, 16, 32),
                         strides=(2, 2), num_res_units=1), _images((16, 24), channels=1), **_TOLERANCE),
        OutsideModel("monai_segresnet_3d", "MONAI SegResNet 3-D (group norm, residual blocks, trilinear-free "
                     "upsampling)", net("SegResNet", spatial_dims=3, in_channels=1, out_channels=2,
                     init_filters=8, blocks_down=(1, 1, 1), blocks_up=(1, 1)), volumes, **_TOLERANCE),
        OutsideModel("monai_swin_unetr", "MONAI SwinUNETR 2-D (shifted windows with masks, patch merging)",
                     net("SwinUNETR", in_channels=1, out_channels=2, feature_size=12, depths=(1, 1, 1, 1),
                         num_heads=(1, 2, 2, 4), spatial_dims=2, window_size=4), _images((64, 96), channels=1),
                     **_TOLERANCE),
        OutsideModel("monai_dynunet", "MONAI DynUNet 2-D (nnU-Net: per-level kernels and strides, residual "
                     "blocks)", dynunet(False), _images((16, 24), channels=1), **_TOLERANCE),
        OutsideModel("monai_dynunet_supervised", "MONAI DynUNet 2-D built with deep supervision heads (kept in a "
                     "list attribute at every call), called in eval mode", dynunet(True),
                     _images((16, 24), channels=1), **_TOLERANCE),
    ]  # fmt: skip


def _peft_models() -> list[OutsideModel]:
    """PEFT adapters on random ``transformers`` models from small configs, as fine-tuned models
    are served (eval mode, adapters not merged)."""

    def bert() -> Any:
        transformers = _module("transformers")
        config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=64, vocab_size=64, num_labels=3)  # fmt: skip
        return transformers.BertForSequenceClassification(config)

    def llama() -> Any:
        transformers = _module("transformers")
        config = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, intermediate_size=64, vocab_size=64,
                                          use_cache=False)  # fmt: skip
        return transformers.LlamaForCausalLM(config)

    def adapted(base: Callable[[], Any], config_name: str, **config: Any) -> Callable[[], Any]:
        def build() -> Any:
            peft = _module("peft")
            return peft.get_peft_model(base(), getattr(peft, config_name)(**config))

        return build

    def multi_adapter() -> Any:
        """Two LoRA adapters on one model, the second one active (``set_adapter``)."""
        peft = _module("peft")
        model = peft.get_peft_model(llama(), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
        model.add_adapter("second", peft.LoraConfig(r=2, lora_alpha=8, target_modules=["k_proj", "o_proj"]))
        model.set_adapter("second")
        return model

    return [
        OutsideModel("peft_lora_bert", "PEFT LoRA (r=4, query/value) on BertForSequenceClassification, "
                     "modules_to_save classifier", adapted(bert, "LoraConfig", r=4, lora_alpha=8,
                     target_modules=["query", "value"], modules_to_save=["classifier"], task_type="SEQ_CLS"),
                     _tokens((9, 13)), **_TOLERANCE),
        OutsideModel("peft_dora_llama", "PEFT DoRA (weight-decomposed LoRA) on every Llama projection",
                     adapted(llama, "LoraConfig", r=4, use_dora=True, target_modules="all-linear",
                             task_type="CAUSAL_LM"), _tokens((9, 13)), **_TOLERANCE),
        OutsideModel("peft_ia3_bert", "PEFT IA3 (learned rescaling of keys, values and feed-forward) on BERT",
                     adapted(bert, "IA3Config", target_modules=["key", "value", "output.dense"],
                             feedforward_modules=["output.dense"], task_type="SEQ_CLS"), _tokens((9, 13)),
                     **_TOLERANCE),
        OutsideModel("peft_two_adapters", "PEFT: two LoRA adapters on Llama, the second made active by "
                     "set_adapter", multi_adapter, _tokens((9, 13)), **_TOLERANCE),
    ]  # fmt: skip


def _e3nn_models() -> list[OutsideModel]:
    """e3nn's equivariant layers on point clouds: irreps features, spherical harmonics of edge
    vectors, tensor products with weights from a radial network, gates."""
    import torch

    class TensorProducts(torch.nn.Module):
        """A fully connected tensor product of node features with their spherical harmonics, an
        equivariant linear map, a gate, and the norm of each irrep."""

        def __init__(self) -> None:
            super().__init__()
            o3, nn = _module("e3nn.o3"), _module("e3nn.nn")
            self.irreps_in = o3.Irreps("4x0e + 2x1o")
            self.sh_irreps = o3.Irreps.spherical_harmonics(2)
            gate = nn.Gate("4x0e", [torch.relu], "2x0e", [torch.sigmoid], "2x1e")
            self.product = o3.FullyConnectedTensorProduct(self.irreps_in, self.sh_irreps, gate.irreps_in)
            self.gate = gate
            self.linear = o3.Linear(gate.irreps_out, "3x0e + 1x1e")
            self.norm = nn.NormActivation(self.linear.irreps_out, torch.tanh)

        def forward(self, features: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            o3 = _module("e3nn.o3")
            harmonics = o3.spherical_harmonics(self.sh_irreps, positions, normalize=True, normalization="component")
            h = self.linear(self.gate(self.product(features, harmonics)))
            return h, self.norm(h)

    def point_features(shape: int) -> Any:
        points = (5, 9)[shape]
        return _call(_randn(shape, points, 10), _randn(shape + 1, points, 3))

    class PointConvolution(torch.nn.Module):
        """An equivariant point convolution as e3nn's tutorial writes it: edge vectors from the
        positions, a radial basis (``soft_one_hot_linspace``) through ``FullyConnectedNet`` giving
        the weights of a per-edge ``FullyConnectedTensorProduct``, summed into the targets by
        ``index_add``."""

        def __init__(self) -> None:
            super().__init__()
            o3 = _module("e3nn.o3")
            self.sh_irreps = o3.Irreps.spherical_harmonics(1)
            self.product = o3.FullyConnectedTensorProduct("4x0e + 2x1o", self.sh_irreps, "4x0e + 2x1o",
                                                          shared_weights=False)  # fmt: skip
            self.radial = _module("e3nn.nn").FullyConnectedNet(
                [6, 16, self.product.weight_numel], torch.nn.functional.silu
            )

        def forward(self, features: torch.Tensor, positions: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
            source, target = edges
            vectors = positions[target] - positions[source]
            harmonics = _module("e3nn.o3").spherical_harmonics(self.sh_irreps, vectors, True, normalization="component")
            basis = _module("e3nn.math").soft_one_hot_linspace(vectors.norm(dim=1), 0.0, 3.0, 6, basis="smooth_finite",
                                                    cutoff=True)  # fmt: skip
            messages = self.product(features[source], harmonics, self.radial(basis * 6**0.5))
            return torch.zeros_like(features).index_add(0, target, messages) / edges.shape[1] ** 0.5

    def graph_inputs(shape: int) -> Any:
        points, edges = (6, 10)[shape], (14, 30)[shape]
        return _call(_randn(shape, points, 10), _randn(shape + 1, points, 3),
                     torch.randint(0, points, (2, edges), generator=_seeded(shape)))  # fmt: skip

    return [
        OutsideModel("e3nn_tensor_product", "e3nn spherical_harmonics, FullyConnectedTensorProduct, Gate, "
                     "o3.Linear, NormActivation", TensorProducts, point_features, **_TOLERANCE),
        OutsideModel("e3nn_point_convolution", "e3nn per-edge tensor product weighted by FullyConnectedNet of "
                     "soft_one_hot_linspace radial basis, index_add to targets", PointConvolution, graph_inputs,
                     **_TOLERANCE),
    ]  # fmt: skip


def _torchdiffeq_models() -> list[OutsideModel]:
    """torchdiffeq's ``odeint`` inside a model (a neural ODE), the time points an input."""
    import torch

    class Dynamics(torch.nn.Module):
        """dy/dt of a small network, with time as an input feature."""

        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))

        def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return self.net(torch.cat((y, t.expand(*y.shape[:-1], 1)), -1))

    class NeuralOde(torch.nn.Module):
        """``odeint(dynamics, y0, t, method, options)``: the whole trajectory at the given times."""

        def __init__(self, method: str, **options: Any) -> None:
            super().__init__()
            self.dynamics = Dynamics()
            self.method, self.options = method, options

        def forward(self, y0: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return _module("torchdiffeq").odeint(self.dynamics, y0, t, method=self.method, options=self.options,
                                                 rtol=1e-5, atol=1e-6)  # fmt: skip

    def ode_inputs(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], 4), torch.linspace(0, (1.0, 1.5)[shape], (4, 6)[shape]))

    return [
        OutsideModel("ode_rk4", "torchdiffeq odeint rk4 (3/8 rule), fixed steps of 0.1 between the output times",
                     lambda: NeuralOde("rk4", step_size=0.1), ode_inputs, **_TOLERANCE),
        OutsideModel("ode_dopri5", "torchdiffeq odeint dopri5 (adaptive steps: accepted by the error's value)",
                     lambda: NeuralOde("dopri5"), ode_inputs, **_TOLERANCE),
    ]  # fmt: skip
