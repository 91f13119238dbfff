"""The nineteenth round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
accelerate's module hooks as its users attach them (a ``ModelHook`` replacing ``forward`` on the
instance); eight hand-written models of call patterns no earlier round had (``torch.func``
derivatives inside ``forward``, a layer run on a meta tensor to find a size, parameters and
buffers among the outputs, a list of sequences whose length changes between calls collated
inside the model, ``sdpa_kernel`` contexts around grouped-query attention, lazily conjugated and
negated views as arguments, a Python float of 0.0 then -0.0, integer and rounding edge cases);
and ``transformers`` architectures no earlier round built, called as their users call them
(GPT-2's double heads on multiple choices with both losses, XLM's beam-searching SQuAD head,
TAPAS's table cells, MarkupLM's XPaths, SAM's point prompts, OWL-ViT's text-queried boxes, LED's
global attention, LayoutLMv3's boxes and patches).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded, _tokens
from benchmarks.outside_round9 import _module
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round18 import _with


def nineteenth_round() -> list[OutsideModel]:
    """The nineteenth round's models, library by library."""
    return _accelerate_models() + _derivative_models() + _call_models() + _arithmetic_models() + _transformers_models()


def _accelerate_models() -> list[OutsideModel]:
    """accelerate's hooks (``accelerate.hooks.add_hook_to_module``), which replace a module's
    ``forward`` on the instance with a wrapper that runs the hook before and after it."""
    import torch

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.mlp(self.norm(x))

    def hooked() -> torch.nn.Module:
        """Two blocks, each with a ``ModelHook`` whose ``pre_forward`` scales its input by a
        buffer of the block and whose ``post_forward`` clamps its output, and the whole model
        with accelerate's own ``AlignDevicesHook(io_same_device=True)`` (inputs sent to the
        execution device, outputs brought back to the inputs' device), as ``dispatch_model``
        attaches it."""
        hooks = _module("accelerate.hooks")

        class Scaled(hooks.ModelHook):  # type: ignore[name-defined]  # a module looked up by name
            def pre_forward(self, module: Any, *args: Any, **kwargs: Any) -> Any:
                return tuple(arg * module.get_buffer("scale") for arg in args), kwargs

            def post_forward(self, module: Any, output: Any) -> Any:
                return output.clamp(-3.0, 3.0)

        model = torch.nn.Sequential(Block(), Block())
        for index, block in enumerate(model):
            block.register_buffer("scale", torch.full((16,), 1.0 + 0.25 * index))
            hooks.add_hook_to_module(block, Scaled())
        hooks.add_hook_to_module(model, hooks.AlignDevicesHook(execution_device="cpu", io_same_device=True))
        return model

    return [
        OutsideModel("accelerate_hooks", "accelerate add_hook_to_module: a ModelHook's pre_forward and "
                     "post_forward around each block (forward replaced on the instance), AlignDevicesHook "
                     "on the whole", hooked, lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 9)[shape], 16)),
                     **_TOLERANCE),
    ]  # fmt: skip


def _derivative_models() -> list[OutsideModel]:
    """Derivatives by ``torch.func`` transforms inside ``forward``, as physics-informed networks
    compute their residuals."""
    import torch

    class Residual(torch.nn.Module):
        """A physics-informed network's heat-equation residual ``u_t - 0.1 * u_xx`` at
        collocation points, ``u`` a small tanh MLP of ``(x, t)``: ``u_t`` by ``torch.func.jvp``
        along a tangent of ones in ``t`` (in-place writes make the tangents), ``u_xx`` by a
        ``jvp`` of a ``jvp``, and ``u`` itself again by ``vmap`` of the MLP on one point.
        ``jacrev``, ``grad``, ``jacfwd`` and ``hessian`` were tried first and dropped: export
        refuses each ("'Tensor' object has no attribute 'constant'")."""

        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32),
                                           torch.nn.Tanh(), torch.nn.Linear(32, 1))  # fmt: skip

        def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            along_x, along_t = torch.zeros_like(points), torch.zeros_like(points)
            along_x[:, 0] = 1
            along_t[:, 1] = 1

            def u_x(where: torch.Tensor) -> torch.Tensor:
                return torch.func.jvp(self.net, (where,), (along_x,))[1]

            along = torch.func.jvp(self.net, (points,), (along_t,))
            values, u_t = along[0], along[1]
            u_xx = torch.func.jvp(u_x, (points,), (along_x,))[1]
            pointwise = torch.func.vmap(lambda point: self.net(point).squeeze(-1))(points)
            return values, u_t - 0.1 * u_xx, pointwise

    return [
        OutsideModel("func_derivatives", "hand-written physics-informed residual: torch.func jvp, a jvp of "
                     "a jvp (a second derivative) and vmap of an MLP inside forward", Residual,
                     lambda shape: _call(_randn(shape, (16, 40)[shape], 2)), **_TOLERANCE),
    ]  # fmt: skip


def _call_models() -> list[OutsideModel]:
    """Parameters among the outputs, a list of sequences of another length at each call,
    ``sdpa_kernel`` contexts, and a meta tensor inside."""
    import torch

    class Exposed(torch.nn.Module):
        """Returns, beside its result, what inference code hands on to a caller: a parameter
        itself, a parameter's transpose (a view), rows of a buffer (a view), and a view of its
        own result."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(16, 8)
            self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))
            self.register_buffer("table", torch.randn(10, 8, generator=_seeded(7)))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            result = self.proj(x) * self.scale + self.get_buffer("table")[: x.shape[1]]
            return result, self.scale, self.proj.weight.t(), self.get_buffer("table")[:3], result[..., :4]

    class Collated(torch.nn.Module):
        """Collation inside the model, as serving code batches requests: a list of token
        sequences (two then three, of differing lengths) padded by ``pad_sequence``, a mask from
        their lengths, a masked mean of embedded and mixed tokens; the per-sequence states cut
        out again by ``unpad_sequence`` (a list out, as long as the list in)."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(50, 16, padding_idx=0)
            self.mix = torch.nn.Conv1d(16, 16, 3, padding=1)

        def forward(self, sequences: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
            from torch.nn.utils.rnn import pad_sequence, unpad_sequence

            lengths = torch.tensor([len(sequence) for sequence in sequences])
            padded = pad_sequence(sequences, batch_first=True, padding_value=0)
            mask = torch.arange(padded.shape[1])[None] < lengths[:, None]
            states = self.mix(self.embed(padded).transpose(1, 2)).transpose(1, 2)
            pooled = (states * mask[..., None]).sum(1) / lengths[:, None]
            return pooled, unpad_sequence(states, lengths, batch_first=True)

    def sequences(shape: int) -> Any:
        lengths = ((5, 3), (4, 7, 2))[shape]
        generator = _seeded(shape)
        return _call([torch.randint(1, 50, (length,), generator=generator) for length in lengths])

    class Kernels(torch.nn.Module):
        """Grouped-query attention (8 query heads over 2 key-value heads, ``enable_gqa``) inside
        ``sdpa_kernel`` contexts, as code pins a backend: causal self-attention under the math
        backend with an explicit ``scale``, and causal attention of the last queries over a
        longer memory (``is_causal`` with fewer queries than keys: aligned top-left) under
        a list of backends."""

        def __init__(self) -> None:
            super().__init__()
            self.q = torch.nn.Linear(32, 32)
            self.kv = torch.nn.Linear(32, 16)
            self.out = torch.nn.Linear(32, 32)

        def forward(self, x: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            from torch.nn.attention import SDPBackend, sdpa_kernel

            def heads(t: torch.Tensor, count: int) -> torch.Tensor:
                return t.unflatten(-1, (count, 4)).transpose(1, 2)

            sdpa = torch.nn.functional.scaled_dot_product_attention
            q = heads(self.q(x), 8)
            k, v = heads(self.kv(x), 4).chunk(2, dim=1)
            with sdpa_kernel(SDPBackend.MATH):
                own = sdpa(q, k, v, is_causal=True, scale=0.3, enable_gqa=True)
            mk, mv = heads(self.kv(memory), 4).chunk(2, dim=1)
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
                recalled = sdpa(q[:, :, -2:], mk, mv, is_causal=True, enable_gqa=True)
            return self.out(own.transpose(1, 2).flatten(2)), recalled

    def attended(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(_randn(shape, batch, (6, 10)[shape], 32), _randn(shape + 1, batch, (9, 13)[shape], 32))

    class Probed(torch.nn.Module):
        """Sizes found by running a layer on a meta tensor inside ``forward`` (as code sizes a
        layer's output without arithmetic), and factories under a ``torch.device`` context. A
        lazy head (``LazyLinear``) was tried too and dropped: lazy modules were covered before
        (srbench refuses an uninitialized one, as export does)."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, stride=2)
            self.head = torch.nn.Linear(64, 5)

        def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            probe = self.conv(torch.empty(1, *image.shape[1:], device="meta"))
            with torch.device("cpu"):
                columns = torch.arange(probe.shape[-1], dtype=torch.float32) / probe.shape[-1]
            features = self.conv(image) + columns
            return self.head(features.flatten(1)), features

    return [
        OutsideModel("meta_probe", "hand-written: a layer run on a meta tensor in forward to find a size, "
                     "factories in a torch.device context", Probed,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, 9, 9)), **_TOLERANCE),
        OutsideModel("parameter_outputs", "hand-written model returning a parameter itself, a parameter's "
                     "transpose, rows of a buffer and a view of its result beside the result", Exposed,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (4, 6)[shape], 16)), **_TOLERANCE),
        OutsideModel("collated_list", "hand-written collation in the model: a list of 2 then 3 token sequences "
                     "of differing lengths padded by pad_sequence, a length mask, unpad_sequence's list out",
                     Collated, sequences, **_TOLERANCE),
        OutsideModel("sdpa_kernel_gqa", "hand-written grouped-query attention (enable_gqa) in sdpa_kernel "
                     "contexts: causal with a scale under MATH, causal with fewer queries than keys under "
                     "[FLASH_ATTENTION, MATH]", Kernels, attended, **_TOLERANCE),
    ]  # fmt: skip


def _arithmetic_models() -> list[OutsideModel]:
    """Integer and rounding edge cases, where a kernel's choice of formula shows."""
    import torch

    class Edges(torch.nn.Module):
        """Integer arithmetic that wraps and rounds: an int32 product that overflows, arithmetic
        right shifts and left shifts of negative values, ``%`` and ``//`` of negative ints and
        floats, ``int8`` negation of -128, uint8 subtraction below zero, ``round`` to two
        decimals (half to even), ``float_power`` (float64 out), ``nextafter`` and ``frexp``."""

        def forward(self, ints: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, ...]:
            wrapped = ints * 40_000 + 7
            shifted = (ints >> 3) + (ints << 2)
            modulo = ints % -7 + torch.remainder(ints, 5) - torch.fmod(ints, 5)
            floored = values // -0.3 + torch.floor_divide(ints, -4)
            bytes_ = ints.to(torch.int8)
            unsigned = ints.to(torch.uint8) - torch.tensor(200, dtype=torch.uint8)
            rounded = torch.round(values * 100.125, decimals=2)
            mantissa, exponent = torch.frexp(values)
            stepped = torch.nextafter(values, torch.full_like(values, float("inf")))
            return (wrapped, shifted, modulo, floored, -bytes_, unsigned, rounded, torch.float_power(values, 3),
                    mantissa, exponent, stepped - values)  # fmt: skip

    def integers(shape: int) -> Any:
        size = ((2, 8), (3, 20))[shape]
        ints = torch.randint(-(2**20), 2**20, size, generator=_seeded(shape), dtype=torch.int32)
        ints[0, 0] = -128
        return _call(ints, _randn(shape, *size) * 10)

    class Signed(torch.nn.Module):
        """Angles and signs from a Python float whose zero's sign decides, as polar and
        signed-distance code passes a side: ``atan2(y, x)`` of negative ``x`` is pi for ``y = 0.0``
        and -pi for ``-0.0``; ``copysign`` by it; ``1 / y`` is inf or -inf. Both calls are of the
        same shapes: ``0.0`` then ``-0.0``, equal by ``==``."""

        def forward(self, x: torch.Tensor, side: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            angle = torch.atan2(torch.full_like(x, side), -x.abs() - 1)
            return angle, torch.copysign(x, torch.full_like(x, side)), x.sign() / side

    class Spectral(torch.nn.Module):
        """A spectral filter called with a spectrum or its conjugate (``z.conj()``: a lazily
        conjugated view, as a correlation passes it) and a real gain that may be the imaginary
        part of such a view (lazily negated): the real part of the spectrum scaled, the filtered
        spectrum back to time, and a complex linear map."""

        def __init__(self) -> None:
            super().__init__()
            self.mix = torch.nn.Parameter(torch.randn(8, 8, dtype=torch.complex64, generator=_seeded(3)) / 4)

        def forward(self, z: torch.Tensor, gain: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            scaled = z.real * gain + z.imag
            return scaled, torch.fft.ifft(z * gain, dim=-1).abs(), torch.view_as_real(z @ self.mix)

    def spectra(shape: int) -> Any:
        """The first call's arguments plain, the second's lazy views of the same shapes."""
        z = torch.randn(2, 8, dtype=torch.complex64, generator=_seeded(shape))
        other = torch.randn(2, 8, dtype=torch.complex64, generator=_seeded(shape + 5))
        return _call(z, other.real) if shape == 0 else _call(z.conj(), other.conj().imag)

    return [
        OutsideModel("conj_neg_views", "hand-written spectral filter called with plain tensors, then with a "
                     "conjugated view (z.conj()) and a negated one (the imag of a conjugated view) of the same "
                     "shapes", Spectral, spectra, **_TOLERANCE),
        OutsideModel("signed_zero_scalars", "hand-written: a Python float argument 0.0 then -0.0 (equal by ==) into "
                     "atan2, copysign and a division, at one shape", Signed,
                     lambda shape: _call(_randn(0, 2, 8), (0.0, -0.0)[shape]), rtol=0.0, atol=0.0),
        OutsideModel("integer_edges", "hand-written integer and rounding edges: int32 overflow, shifts of "
                     "negatives, %, // and fmod of negatives, int8 -(-128), uint8 underflow, round(decimals), "
                     "float_power, nextafter, frexp", Edges, integers, rtol=0.0, atol=0.0),
    ]  # fmt: skip


def _choices(shape: int) -> Any:
    """GPT-2 double heads' call: two choices per example, the index of each choice's last token
    (``mc_token_ids``), language-model labels and the right choice."""
    import torch

    batch, length = (1, 3)[shape], (7, 10)[shape]
    generator = _seeded(shape)
    ids = torch.randint(0, 1000, (batch, 2, length), generator=generator)
    last = torch.randint(length - 3, length, (batch, 2), generator=generator)
    return _call(input_ids=ids, mc_token_ids=last, labels=ids, mc_labels=torch.arange(batch) % 2)


def _table(shape: int) -> Any:
    """TAPAS' call: a question of 4 tokens then table cells, row by row in 3 columns; the 7 token
    type ids per token (segment, column, row, previous answer, column rank, inverse rank,
    numeric relation); a float mask."""
    import torch

    batch, length = (1, 3)[shape], (16, 22)[shape]
    ids = torch.randint(1, 1000, (batch, length), generator=_seeded(shape))
    cell = (torch.arange(length) - 4).clamp(min=-1)
    table = (cell >= 0).long()
    types = torch.stack([table, table * (cell % 3 + 1), table * (cell // 3 + 1), torch.zeros_like(table),
                         table * (cell // 3 + 1), table * (cell // 3 + 1), torch.zeros_like(table)], -1)  # fmt: skip
    mask = torch.ones(batch, length)
    mask[-1, -3:] = 0
    return _call(input_ids=ids, attention_mask=mask, token_type_ids=types.expand(batch, -1, -1).contiguous())


def _xpaths(shape: int, batch: int, length: int) -> dict[str, Any]:
    """MarkupLM's XPaths: per token, tag ids and subscripts along a path of 4, padded by the
    config's pad ids past its depth."""
    import torch

    generator = _seeded(shape)
    depth = torch.randint(1, 5, (batch, length, 1), generator=generator)
    tags = torch.randint(0, 200, (batch, length, 4), generator=generator)
    subs = torch.randint(0, 20, (batch, length, 4), generator=generator)
    beyond = torch.arange(4) >= depth
    return dict(xpath_tags_seq=tags.masked_fill(beyond, 216), xpath_subs_seq=subs.masked_fill(beyond, 1001))


def _points(shape: int) -> Any:
    """SAM's call: an image, two point prompts per image (the second of the last image a
    padding point, label -1) and their labels."""
    import torch

    batch = (1, 2)[shape]
    points = torch.rand(batch, 1, 2, 2, generator=_seeded(shape)) * 64
    labels = torch.ones(batch, 1, 2, dtype=torch.int64)
    labels[-1, 0, -1] = -1
    return _call(pixel_values=_randn(shape, batch, 3, 64, 64), input_points=points, input_labels=labels)


def _queries(shape: int) -> Any:
    """OWL-ViT's call: images and, per image, text queries (the end-of-text token the largest
    id, as CLIP's tokenizer makes it: the model finds it by ``argmax``)."""
    import torch

    batch, queries = (1, 2)[shape], (2, 3)[shape]
    ids = torch.randint(1, 998, (batch * queries, 7), generator=_seeded(shape))
    ids[:, -1] = 999
    return _call(input_ids=ids, pixel_values=_randn(shape, batch, 3, 32, 32), attention_mask=torch.ones_like(ids))


def _global(shape: int, batch: int, length: int) -> dict[str, Any]:
    """LED's global attention on each sequence's first token, and decoder ids."""
    import torch

    first = torch.zeros(batch, length, dtype=torch.int64)
    first[:, 0] = 1
    decoder = torch.randint(0, 1000, (batch, (4, 6)[shape]), generator=_seeded(shape))
    return dict(global_attention_mask=first, decoder_input_ids=decoder)


def _layout(shape: int, batch: int, length: int) -> dict[str, Any]:
    """LayoutLMv3's boxes (x0 <= x1, y0 <= y1 on a 0-1000 grid) and the page's image."""
    import torch

    corners = torch.randint(0, 500, (batch, length, 2), generator=_seeded(shape))
    sizes = torch.randint(0, 400, (batch, length, 2), generator=_seeded(shape + 1))
    return dict(bbox=torch.cat((corners, corners + sizes), -1), pixel_values=_randn(shape, batch, 3, 32, 32))


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    sam = dict(
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=64, patch_size=8,
                           output_channels=16, global_attn_indexes=[1], window_size=4, mlp_dim=64, num_pos_feats=8),
        prompt_encoder_config=dict(hidden_size=16, image_size=64, patch_size=8, mask_input_channels=4),
        mask_decoder_config=dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, mlp_dim=32,
                                 iou_head_hidden_dim=16))  # fmt: skip
    owl = dict(
        text_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                         vocab_size=1000, max_position_embeddings=16, bos_token_id=1, eos_token_id=999),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8), projection_dim=32)  # fmt: skip
    models: list[HfCase] = [
        ("hf_gpt2_double_heads", "GPT2DoubleHeadsModel", "GPT2Config", None,
         dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=64, use_cache=False, bos_token_id=1,
              eos_token_id=2), _choices),
        ("hf_xlm_squad_beam", "XLMForQuestionAnswering", "XLMConfig", None,
         dict(emb_dim=64, n_layers=2, n_heads=4, vocab_size=1000, max_position_embeddings=64, start_n_top=3,
              end_n_top=3), _tokens(1000, (12, 20))),
        ("hf_tapas_cells", "TapasForQuestionAnswering", "TapasConfig", None,
         dict(encoder, num_aggregation_labels=4, max_position_embeddings=64), _table),
        ("hf_markuplm_xpaths", "MarkupLMModel", "MarkupLMConfig", "last_hidden_state",
         dict(encoder, max_depth=4, max_position_embeddings=64), _with(_tokens(1000, (12, 20)), _xpaths)),
        ("hf_sam_points", "SamModel", "SamConfig", None, sam, _points),
        ("hf_owlvit_queries", "OwlViTForObjectDetection", "OwlViTConfig", None, owl, _queries),
        ("hf_led_global", "LEDModel", "LEDConfig", "last_hidden_state",
         dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
              encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000, attention_window=[4, 4],
              max_encoder_position_embeddings=64, max_decoder_position_embeddings=64, use_cache=False),
         _with(_tokens(1000, (12, 20)), _global)),
        ("hf_layoutlmv3_boxes", "LayoutLMv3Model", "LayoutLMv3Config", "last_hidden_state",
         dict(encoder, input_size=32, patch_size=8, max_position_embeddings=64, coordinate_size=12, shape_size=8),
         _with(_tokens(1000, (12, 20)), _layout)),
    ]  # fmt: skip
    return _hf_cases(models)
