"""The twenty-second round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
hand-written models of semantics no earlier round had (ATen operators called directly by their
overloads, custom operators defined by schema through ``torch.library.Library``, one returning a
view of its input and one a list, ``causal_lower_right``/``causal_upper_left`` bias objects as
``scaled_dot_product_attention`` masks, forward-mode AD's dual numbers, a ``__call__`` that
rewrites the call before ``forward``, buffers rebound by assignment and an ``nn.Buffer``, results
cast into the caller's float16 and int64 tensors in place, a ``TorchFunctionMode`` in ``forward``,
a jagged nested tensor built in ``forward``, a parametrization with two originals, ``scatter``
with a reduce string, advanced indexing of non-adjacent dims assigned, a ``torch.Size``
argument, ``linalg``'s ``_ex`` and Hermitian routines);
and ``transformers`` architectures no earlier round built, called as their users call them
(BiT's weight-standardised convolutions, GLPN's depth head, Swin2SR's upsampler, MobileViTV2's
separable linear attention, LiLT's layout stream and DBRX's clipped-QKV experts).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _pixels, _randn, _seeded, _tokens
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round18 import _with


def twenty_second_round() -> list[OutsideModel]:
    """The twenty-second round's models, group by group."""
    return _operator_models() + _call_models() + _state_models() + _indexing_models() + _transformers_models()


def _rows(shape: int, width: int = 16) -> Any:
    """One (batch, length, width) input: batch 1 then 3, length 5 then 7."""
    return _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], width))


def _operator_models() -> list[OutsideModel]:
    """Operators called below ``torch.nn``: ATen overloads, schema-defined custom operators, SDPA's
    bias objects."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Direct(nn.Module):
        """ATen operators called by their overloads, as code lowered by hand or copied from a
        graph calls them: ``convolution``, ``_native_batch_norm_legit_no_training`` (its three
        results), ``native_layer_norm`` (mean and reciprocal deviation out too), ``_softmax``, an
        ``empty_strided`` result of transposed strides filled by ``copy_`` and ``index_put``
        accumulating repeated indices."""

        def __init__(self) -> None:
            super().__init__()
            self.conv, self.bn, self.norm = nn.Conv2d(4, 8, 3, padding=1), nn.BatchNorm2d(8), nn.LayerNorm(8)
            self.bn.get_buffer("running_mean").normal_(generator=_seeded(5))
            self.bn.get_buffer("running_var").uniform_(0.5, 2.0, generator=_seeded(6))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            aten = torch.ops.aten
            conv = aten.convolution.default(x, self.conv.weight, self.conv.bias, [1, 1], [1, 1], [1, 1], False,
                                            [0, 0], 1)  # fmt: skip
            bn = self.bn
            normed = aten._native_batch_norm_legit_no_training.default(
                conv, bn.weight, bn.bias, bn.running_mean, bn.running_var, 0.1, 1e-5
            )[0]
            rows = normed.flatten(2).transpose(1, 2)
            layer, mean, rstd = aten.native_layer_norm.default(rows, [8], self.norm.weight, self.norm.bias, 1e-5)
            probs = aten._softmax.default(layer, -1, False)
            batch, length = probs.shape[0], probs.shape[1]
            transposed = aten.empty_strided.default([batch, length, 8], [length * 8, 1, length])
            aten.copy_.default(transposed, probs)
            index = torch.arange(length) % 3
            summed = aten.index_put.default(probs.new_zeros(batch, 3, 8).transpose(0, 1), [index],
                                            probs.transpose(0, 1), True)  # fmt: skip
            return transposed, mean, rstd, summed

    def library_ops() -> nn.Module:
        """Custom operators defined by schema on a ``torch.library.Library`` fragment, as C++
        extensions and older Python code define them: one whose result is a view of its input
        (``Tensor(a) x -> Tensor(a)``, a window of the last dim, written through in place and
        returned beside its base), and one taking an optional tensor and an int list and
        returning a list of tensors; CPU and Meta kernels registered apart."""
        _define_library_ops()

        class Library(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.proj = nn.Linear(16, 16)

            def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, ...]:
                hidden = self.proj(x)
                window = torch.ops.srbench_round22.window(hidden, 4)
                window.mul_(2)  # through the view: hidden's columns 4-7
                parts = torch.ops.srbench_round22.split_scaled(hidden, scale, [4, 12])
                unscaled = torch.ops.srbench_round22.split_scaled(hidden, None, [8, 8])
                return hidden, window, *parts, *unscaled

        return Library()

    class Biased(nn.Module):
        """``torch.nn.attention.bias``'s ``causal_lower_right`` and ``causal_upper_left`` objects
        as ``scaled_dot_product_attention``'s masks, built in ``forward`` from the lengths: new
        queries over a longer context (a prefix then the queries), aligned to its end and to its
        start."""

        def __init__(self) -> None:
            super().__init__()
            self.q, self.kv, self.out = nn.Linear(16, 16), nn.Linear(16, 32), nn.Linear(16, 16)

        def forward(self, queries: torch.Tensor, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            from torch.nn.attention.bias import causal_lower_right, causal_upper_left

            q = self.q(queries).unflatten(-1, (2, 8)).transpose(1, 2)
            k, v = self.kv(context).unflatten(-1, (2, 2, 8)).permute(2, 0, 3, 1, 4).unbind(0)
            lengths = (queries.shape[1], context.shape[1])
            right = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(*lengths))
            left = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_upper_left(*lengths))
            return self.out(right.transpose(1, 2).flatten(2)), self.out(left.transpose(1, 2).flatten(2))

    def prefixed(shape: int) -> Any:
        batch, new, total = (1, 3)[shape], (2, 3)[shape], (6, 9)[shape]
        return _call(_randn(shape, batch, new, 16), _randn(shape + 2, batch, total, 16))

    class Dual(nn.Module):
        """Forward-mode AD in ``forward`` (``torch.autograd.forward_ad``): the input made a dual
        number with a tangent, an MLP run on it, the primal and the directional derivative
        unpacked, as sensitivity analysis does without ``torch.func``."""

        def __init__(self) -> None:
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))

        def forward(self, x: torch.Tensor, tangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            import torch.autograd.forward_ad as fwad

            with fwad.dual_level():
                out = fwad.unpack_dual(self.mlp(fwad.make_dual(x, tangent)))
            return out.primal, out.tangent

    return [
        OutsideModel("aten_direct_calls", "hand-written: torch.ops.aten overloads called directly (convolution, "
                     "_native_batch_norm_legit_no_training, native_layer_norm's 3 results, _softmax, empty_strided "
                     "+ copy_, index_put accumulate)", Direct,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 4, (6, 8)[shape], 6)), **_TOLERANCE),
        OutsideModel("library_schema_ops", "hand-written: torch.library.Library ops by schema: one returning a view "
                     "of its input (Tensor(a) -> Tensor(a)) written in place and returned with its base, one "
                     "with Tensor? and int[] returning Tensor[]",
                     library_ops, lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16),
                                                      _randn(shape + 1, 4)), **_TOLERANCE),
        OutsideModel("sdpa_causal_bias", "hand-written: scaled_dot_product_attention with causal_lower_right and "
                     "causal_upper_left bias objects (fewer queries than keys)", Biased, prefixed, **_TOLERANCE),
        OutsideModel("forward_ad_dual", "hand-written: torch.autograd.forward_ad dual_level, make_dual through an "
                     "MLP, unpack_dual's primal and tangent out", Dual,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 8), _randn(shape + 3, (1, 3)[shape], 8)),
                     **_TOLERANCE),
    ]  # fmt: skip


_LIBRARY: list[Any] = []  # the round's torch.library fragment, defined once per process


def _define_library_ops() -> None:
    """Define ``srbench_round22::window`` and ``srbench_round22::split_scaled`` once (a second
    definition of a schema is an error, and the sweep builds a model more than once)."""
    import torch

    if _LIBRARY:
        return
    library = torch.library.Library("srbench_round22", "FRAGMENT")
    library.define("window(Tensor(a) x, int start) -> Tensor(a)")
    library.define("split_scaled(Tensor x, Tensor? scale, int[] sizes) -> Tensor[]")

    def window(x: torch.Tensor, start: int) -> torch.Tensor:
        return x.narrow(-1, start, 4)

    def split_scaled(x: torch.Tensor, scale: torch.Tensor | None, sizes: list[int]) -> list[torch.Tensor]:
        parts = [part.clone() for part in x.split(sizes, dim=-1)]
        return parts if scale is None else [part * scale.sum() for part in parts]

    for kernel in ("CPU", "Meta"):
        library.impl("window", window, kernel)
        library.impl("split_scaled", split_scaled, kernel)
    _LIBRARY.append(library)


def _call_models() -> list[OutsideModel]:
    """Calls in forms no earlier round made: a ``__call__`` of its own, arguments of Python
    types that are not tensors or numbers, a function mode around ``forward``'s ops."""
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.overrides import TorchFunctionMode

    class Rewritten(nn.Module):
        """A module whose ``__call__`` rewrites the call before ``nn.Module.__call__`` runs
        ``forward`` (the input scaled, an optional bias filled in), as wrappers that normalise
        their inputs do. (A ``__call__`` taking other arguments than ``forward`` is refused by
        export, which binds the call to ``forward``'s signature.)"""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 8)

        def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> Any:
            return super().__call__(x / 2.0, torch.ones(8) if bias is None else bias)

        def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
            return torch.softmax(self.proj(x) + bias, dim=-1)

    class Sized(nn.Module):
        """A ``torch.Size`` argument to resize the map to and a ``str`` interpolation mode beside
        the tensor, both changing between the two calls, the size also read for a view. (A
        ``slice``, a ``torch.dtype``, a ``torch.device`` and a ``torch.memory_format`` argument
        were tried first: export refuses each as an input, "Unsupported input type"; and it hands
        ``forward`` the size as a plain tuple, so ``size.numel()`` fails under it.)"""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x: torch.Tensor, size: torch.Size, mode: str) -> tuple[torch.Tensor, torch.Tensor]:
            resized = F.interpolate(self.conv(x), size=size, mode=mode)
            return resized, resized.reshape(x.shape[0], 4, size[0] * size[1])

    def sized(shape: int) -> Any:
        image = _randn(shape, (1, 3)[shape], 3, (10, 12)[shape], 10)
        return _call(image, (torch.Size([6, 6]), torch.Size([8, 5]))[shape], ("bilinear", "nearest")[shape])

    class Tanh(TorchFunctionMode):
        """Every GELU called under it made the tanh approximation, softmax taken in float64."""

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = dict(kwargs or {})
            if func is F.gelu:
                kwargs["approximate"] = "tanh"
            if func is torch.softmax or func is F.softmax:
                kwargs["dtype"] = torch.float64
            return func(*args, **kwargs)

    class Moded(nn.Module):
        """A ``TorchFunctionMode`` entered in ``forward`` that rewrites the calls made under it
        (GELUs to the tanh approximation, softmax in float64), as numerics-debugging and
        quantisation-simulation code does."""

        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(16, 32), nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with Tanh():
                hidden = F.gelu(self.up(x))
                weights = F.softmax(self.down(hidden), dim=-1)
            return hidden, weights

    return [
        OutsideModel("call_rewritten", "hand-written: a __call__ of its own that scales the input and fills in an "
                     "optional bias before nn.Module.__call__ runs forward", Rewritten, _rows, **_TOLERANCE),
        OutsideModel("size_mode_arguments", "hand-written: a torch.Size argument (interpolate's size, its product for "
                     "a reshape) and a str mode, both changing between calls", Sized, sized, **_TOLERANCE),
        OutsideModel("torch_function_mode", "hand-written: a TorchFunctionMode in forward rewriting gelu to tanh "
                     "and softmax to float64", Moded, _rows, **_TOLERANCE),
    ]  # fmt: skip


def _state_models() -> list[OutsideModel]:
    """State and storage in forms no earlier round had: buffers rebound, the caller's tensors of
    other dtypes written, weights of two originals, a nested tensor built in ``forward``."""
    import torch
    from torch import nn
    from torch.nn.utils import parametrize

    class Rebound(nn.Module):
        """A buffer rebound by assignment in ``forward`` (not written in place: a new tensor put
        in its place, the last batch's mean kept for inspection) and one declared with the
        ``nn.Buffer`` API; the rebound buffer is returned too."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)
            self.register_buffer("last_mean", torch.zeros(16))
            self.scale = nn.Buffer(torch.linspace(0.5, 1.5, 16))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            out = self.proj(x) * self.scale
            self.last_mean = out.detach().mean((0, 1))
            return out, self.last_mean

    class Casting(nn.Module):
        """Results written into the caller's tensors of other dtypes in place: a float32
        projection copied into a float16 state (cast by ``copy_``), its first columns zeroed by
        assignment, and an int64 count advanced by a bool mask (``+=`` promotes the bool)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor, state: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
            hidden = self.proj(x)
            state.copy_(hidden)
            state[..., :2] = 0
            counts += hidden > 0
            return hidden.sum(-1)

    def casting(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 7)[shape]
        return _call(_randn(shape, batch, length, 16), torch.zeros(batch, length, 8, dtype=torch.float16),
                     torch.full((batch, length, 8), 3, dtype=torch.int64))  # fmt: skip

    class LowRank(nn.Module):
        """A weight held as two originals (``right_inverse`` returns a pair: the factors of a
        truncated SVD), recombined at each call."""

        def forward(self, left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
            return left @ right

        def right_inverse(self, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            u, s, vh = torch.linalg.svd(weight, full_matrices=False)
            return u[:, :4] * s[:4], vh[:4]

    def factored() -> nn.Module:
        """A linear layer whose weight is parametrized by two originals, and a plain head."""

        class Factored(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.proj = nn.Linear(16, 12)
                self.head = nn.Linear(12, 6)
                parametrize.register_parametrization(self.proj, "weight", LowRank())

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.head(torch.relu(self.proj(x)))

        return Factored()

    class Jagged(nn.Module):
        """A jagged nested tensor built in ``forward`` from a list of sequences of differing
        lengths (``torch.nested.nested_tensor(layout=torch.jagged)``), projected and normalised
        per token, then padded back by ``to_padded_tensor``."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, sequences: list[torch.Tensor]) -> torch.Tensor:
            nested = torch.nested.nested_tensor(sequences, layout=torch.jagged)
            return torch.relu(self.proj(nested)).to_padded_tensor(0.0)

    def sequences(shape: int) -> Any:
        lengths = ((5, 3), (4, 7, 2))[shape]
        return _call([_randn(shape + index, length, 16) for index, length in enumerate(lengths)])

    return [
        OutsideModel("buffer_rebound", "hand-written: a buffer rebound by assignment in forward (and returned), "
                     "an nn.Buffer attribute", Rebound, _rows, **_TOLERANCE),
        OutsideModel("input_dtype_writes", "hand-written: float32 results copy_'d into the caller's float16 state, "
                     "columns assigned, the caller's int64 counts += a bool mask", Casting, casting, **_TOLERANCE),
        OutsideModel("two_original_parametrization", "hand-written: a parametrization whose right_inverse returns "
                     "two originals (SVD factors) recombined at each call", factored, _rows, **_TOLERANCE),
        OutsideModel("nested_in_forward", "hand-written: a jagged nested tensor built in forward from a list, "
                     "Linear and ReLU on it, to_padded_tensor", Jagged, sequences, **_TOLERANCE),
    ]  # fmt: skip


def _indexing_models() -> list[OutsideModel]:
    """Indexing and linear algebra in overloads no earlier round called."""
    import torch
    from torch import nn

    class Reduced(nn.Module):
        """``scatter`` with a reduce string (the older ``reduce="multiply"``/``"add"`` overloads,
        a tensor source and a scalar one), advanced indices on non-adjacent dims assigned
        (``x[rows, :, cols] = v``, the indexed dims moved first), ``masked_fill_`` by a 0-dim
        tensor and ``index_add_`` with ``alpha``."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
            hidden = self.proj(x)
            multiplied = hidden.scatter(-1, index, hidden.flip(-1), reduce="multiply")
            added = hidden.scatter(-1, index, 0.5, reduce="add")
            assigned = hidden.clone()
            rows = torch.arange(hidden.shape[0])
            assigned[rows, :, index[:, 0, 0]] = hidden[:, :, 0].sigmoid()
            filled = hidden.clone().masked_fill_(hidden < 0, hidden.amax())
            accumulated = hidden.clone().index_add_(1, index[0, :, 0] % hidden.shape[1], hidden, alpha=-0.5)
            return multiplied, added, assigned, filled, accumulated

    def reduced(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 7)[shape]
        index = torch.randint(0, 8, (batch, length, 3), generator=_seeded(shape))
        return _call(_randn(shape, batch, length, 8), index)

    class Spectral(nn.Module):
        """``linalg``'s ``_ex`` variants (``inv_ex``, ``cholesky_ex``, ``solve_ex``: results and
        int32 ``info`` out), Hermitian routines (``eigh``'s values and the projector its vectors
        make, ``eigvalsh``), ``matrix_power`` with a negative exponent, ``cross`` and ``vecdot``."""

        def forward(self, x: torch.Tensor, rhs: torch.Tensor) -> tuple[torch.Tensor, ...]:
            gram = x @ x.mT + torch.eye(x.shape[-1])
            inverse, inverse_info = torch.linalg.inv_ex(gram)
            factor, factor_info = torch.linalg.cholesky_ex(gram)
            solved, solved_info = torch.linalg.solve_ex(gram, rhs)
            values, vectors = torch.linalg.eigh(gram)
            projector = vectors[..., -2:] @ vectors[..., -2:].mT  # the sign of each vector cancels
            return (inverse, inverse_info, factor, factor_info, solved, solved_info, values, projector,
                    torch.linalg.eigvalsh(gram, UPLO="U"), torch.linalg.matrix_power(gram, -2),
                    torch.linalg.cross(rhs[..., :3, 0], rhs[..., 3:6, 0]), torch.linalg.vecdot(x, x))  # fmt: skip

    def systems(shape: int) -> Any:
        batch, size = (1, 3)[shape], (6, 8)[shape]
        return _call(_randn(shape, batch, size, size), _randn(shape + 1, batch, size, 2))

    return [
        OutsideModel("scatter_reduce_strings", "hand-written: scatter(reduce='multiply'/'add') with tensor and scalar "
                     "sources, x[rows, :, cols] = v, masked_fill_ by a 0-dim tensor, index_add_ alpha", Reduced,
                     reduced, **_TOLERANCE),
        OutsideModel("linalg_ex_hermitian", "hand-written: linalg inv_ex/cholesky_ex/solve_ex (int32 info), eigh "
                     "values and projector, eigvalsh(UPLO='U'), matrix_power(-2), cross, vecdot", Spectral, systems,
                     rtol=1e-3, atol=1e-4),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    models: list[HfCase] = [
        ("hf_bit", "BitModel", "BitConfig", "pooler_output",
         dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="bottleneck", num_groups=4,
              global_padding="SAME", embedding_dynamic_padding=True, out_features=["stage2"]),
         _pixels((32, 40))),
        ("hf_glpn_depth", "GLPNForDepthEstimation", "GLPNConfig", "predicted_depth",
         dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32], patch_sizes=[7, 3],
              strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=16,
              head_in_index=-1),
         _pixels((32, 48))),
        ("hf_swin2sr", "Swin2SRForImageSuperResolution", "Swin2SRConfig", "reconstruction",
         dict(image_size=16, patch_size=1, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
              upscale=2, upsampler="pixelshuffle"),
         _pixels((16, 20))),
        ("hf_mobilevitv2", "MobileViTV2Model", "MobileViTV2Config", "pooler_output",
         dict(image_size=64, patch_size=2, width_multiplier=0.25, n_attn_blocks=[1, 1, 1]),
         _pixels((64, 96))),
        ("hf_lilt", "LiltModel", "LiltConfig", "last_hidden_state",
         dict(encoder, hidden_size=96, channel_shrink_ratio=4, max_2d_position_embeddings=1024,
              max_position_embeddings=64),
         _with(_tokens(1000, (12, 20)), _boxes)),
        ("hf_dbrx", "DbrxForCausalLM", "DbrxConfig", "logits",
         dict(d_model=64, n_heads=4, n_layers=2, max_seq_len=64, vocab_size=1000,
              attn_config=dict(kv_n_heads=2, clip_qkv=4.0, rope_theta=10000.0),
              ffn_config=dict(ffn_hidden_size=64, moe_num_experts=4, moe_top_k=2)),
         _tokens(1000, (12, 20))),
    ]  # fmt: skip
    return _hf_cases(models)


def _boxes(shape: int, batch: int, length: int) -> dict[str, Any]:
    """LiLT's token boxes: one (x0, y0, x1, y1) in [0, 1000) per token, each corner's x and y
    sorted so that the second corner is below and right of the first (LiLT embeds the width and
    height, which must not be negative)."""
    import torch

    corners = torch.randint(0, 1000, (batch, length, 2, 2), generator=_seeded(shape + 3)).sort(dim=2).values
    return dict(bbox=corners.flatten(2))
