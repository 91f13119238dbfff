"""The twenty-third round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
hand-written models of semantics no earlier round had (a Python list and a dict passed in and
changed by ``forward``: activations appended, a state entry replaced; numpy and complex scalars as
arguments; a model traced by ``torch.fx`` and rewritten, one wrapped by ``torch.compile`` and one by
``nn.DataParallel`` on the CPU; outputs that are overlapping and broadcast views of the inputs;
Python floats and lists read from tensors returned; ``index_reduce_``, ``put_``, ``take`` and
``masked_scatter``; RReLU in eval, ``channel_shuffle``, local response norm, ``addr``; pruning
masks, the old hook-based weight and spectral norms and ``parametrize.cached``; ``.data``
written in ``forward``);
and ``transformers`` architectures no earlier round built, called as their users call them
(PoolFormer's pooling mixer, Wav2Vec2-BERT's conformer over filter banks, GroupViT's grouping
blocks, UnivNet's location-variable convolutions, PaliGemma's image tokens in a prefix-LM).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded, _tokens
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round22 import _rows


def twenty_third_round() -> list[OutsideModel]:
    """The twenty-third round's models, group by group."""
    return _container_models() + _wrapped_models() + _output_models() + _operator_models() + _transformers_models()


def _container_models() -> list[OutsideModel]:
    """Arguments that are Python objects ``forward`` changes or that are not torch's types."""
    import numpy
    import torch
    from torch import nn

    class Collecting(nn.Module):
        """Each block's output appended to a list the caller passes in (``trace.append(h)``), as
        users collect activations for inspection or a feature pyramid without hooks; the caller
        reads the list after the call."""

        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(3))

        def forward(self, x: torch.Tensor, trace: list[torch.Tensor]) -> torch.Tensor:
            for block in self.blocks:
                x = block(x)
                trace.append(x)
            return x.mean(1)

    def collecting(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16), [])

    class Stateful(nn.Module):
        """A recurrent cell whose state lives in a dict the caller keeps between calls: the
        hidden entry is replaced by the new state (``state["hidden"] = h``, a new tensor, not a
        write into the old one), as streaming code written without a cache class does."""

        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.GRUCell(16, 16)

        def forward(self, x: torch.Tensor, state: dict[str, torch.Tensor]) -> torch.Tensor:
            hidden = state["hidden"]
            for step in x.unbind(1):
                hidden = self.cell(step, hidden)
            state["hidden"] = hidden
            return hidden.tanh()

    def stateful(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(_randn(shape, batch, (5, 7)[shape], 16), {"hidden": _randn(shape + 5, batch, 16)})

    class NumpyScaled(nn.Module):
        """A temperature and a count given as numpy scalars (``numpy.float32``, ``numpy.int64``),
        as code that computes its settings with numpy passes them on."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, temperature: Any, keep: Any) -> torch.Tensor:
            return torch.softmax(self.proj(x) / temperature, dim=-1)[..., : int(keep)]

    def numpy_scalars(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], 5, 16), numpy.float32((0.5, 2.0)[shape]), numpy.int64((4, 9)[shape]))

    class Rotating(nn.Module):
        """A Python ``complex`` argument rotating a complex signal (``z * phase``), the phase
        changing between calls."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, phase: complex) -> torch.Tensor:
            signal = torch.view_as_complex(self.proj(x).unflatten(-1, (8, 2)))
            return torch.view_as_real(signal * phase).flatten(-2)

    def rotating(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], 5, 16), (0.6 + 0.8j, -1j)[shape])

    return [
        OutsideModel("list_argument_appended", "hand-written: forward appends each block's output to a list the "
                     "caller passes in (trace.append(h))", Collecting, collecting, **_TOLERANCE),
        OutsideModel("dict_argument_replaced", "hand-written: a GRU cell whose state is a dict entry the caller "
                     "keeps, replaced by forward (state['hidden'] = h)", Stateful, stateful, **_TOLERANCE),
        OutsideModel("numpy_scalar_arguments", "hand-written: numpy.float32 temperature and numpy.int64 count "
                     "arguments", NumpyScaled, numpy_scalars, **_TOLERANCE),
        OutsideModel("complex_scalar_argument", "hand-written: a Python complex argument rotating a complex "
                     "signal", Rotating, rotating, **_TOLERANCE),
    ]  # fmt: skip


def _wrapped_models() -> list[OutsideModel]:
    """Models as other tools hand them over: traced and rewritten by ``torch.fx``, wrapped by
    ``torch.compile`` and by ``nn.DataParallel``."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.up, self.down = nn.LayerNorm(16), nn.Linear(16, 32), nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.down(torch.relu(self.up(self.norm(x))))

    def rewritten() -> nn.Module:
        """``torch.fx.symbolic_trace`` of a block, its ReLU swapped for a GELU and a scale
        inserted after it by editing the graph, as FX passes do; the ``GraphModule`` is the
        model."""
        traced = torch.fx.symbolic_trace(Block())
        for node in list(traced.graph.nodes):
            if node.op == "call_function" and node.target is torch.relu:
                node.target = torch.nn.functional.gelu
                users = list(node.users)
                with traced.graph.inserting_after(node):
                    scaled = traced.graph.call_function(torch.mul, (node, 0.5))
                for user in users:
                    user.replace_input_with(node, scaled)
        traced.recompile()
        return traced

    def compiled() -> Any:
        """``torch.compile(block, backend="eager")``: the ``OptimizedModule`` users hold once
        they compile, eager's calls going through TorchDynamo."""
        return torch.compile(Block(), backend="eager")

    def parallel() -> nn.Module:
        """``nn.DataParallel`` on a machine without GPUs (it calls the module as is), as code
        written for several GPUs runs on the CPU."""
        return nn.DataParallel(Block())

    return [
        OutsideModel("fx_rewritten_graph", "hand-written: torch.fx.symbolic_trace GraphModule, relu replaced by "
                     "gelu and a mul inserted by graph surgery", rewritten, _rows, **_TOLERANCE),
        OutsideModel("compiled_wrapper", "hand-written: the OptimizedModule of torch.compile(backend='eager') as "
                     "the model", compiled, _rows, **_TOLERANCE),
        OutsideModel("data_parallel_cpu", "hand-written: nn.DataParallel around a block, no GPU", parallel, _rows,
                     **_TOLERANCE),
    ]  # fmt: skip


def _output_models() -> list[OutsideModel]:
    """Outputs in forms no earlier round returned: views of the inputs that overlap or repeat
    elements, Python numbers read from tensors."""
    import torch
    from torch import nn

    class Windows(nn.Module):
        """Views of the inputs returned as they are: ``unfold``'s overlapping windows, a
        ``meshgrid`` and ``broadcast_tensors`` (stride-0 dims), ``atleast_3d`` and an
        ``as_strided`` window with an offset; one computed output beside them."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, row: torch.Tensor) -> tuple[torch.Tensor, ...]:
            grid_x, grid_y = torch.meshgrid(x[0, :, 0], row, indexing="ij")
            broad_x, broad_row = torch.broadcast_tensors(x, row)
            return (x.unfold(1, 3, 2), grid_x, grid_y, broad_x, broad_row, torch.atleast_3d(row),
                    x.as_strided((2, 3), (1, 2), 1), self.proj(x))  # fmt: skip

    def windows(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 8), _randn(shape + 1, 8))

    class Numbers(nn.Module):
        """Python numbers read from tensors returned beside them: a loss as ``.item()``, the
        per-class means as ``.tolist()``, as training-free evaluation code returns metrics."""

        def __init__(self) -> None:
            super().__init__()
            self.head = nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, float, list[float]]:
            logits = self.head(x)
            return logits, logits.logsumexp(-1).mean().item(), logits.mean((0, 1)).tolist()

    return [
        OutsideModel("overlapping_view_outputs", "hand-written: the inputs' views out: unfold windows, meshgrid, "
                     "broadcast_tensors, atleast_3d, as_strided with an offset", Windows, windows, **_TOLERANCE),
        OutsideModel("python_number_outputs", "hand-written: .item() and .tolist() of results returned beside the "
                     "logits", Numbers, _rows, **_TOLERANCE),
    ]  # fmt: skip


def _operator_models() -> list[OutsideModel]:
    """Operators and module utilities no earlier round called."""
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch.nn.utils import parametrizations, parametrize, prune

    class Reducing(nn.Module):
        """``index_reduce_`` (``prod``, ``mean``, ``amax`` without the destination's values),
        ``put_`` accumulating at repeated flat indices, ``take``, ``masked_scatter_`` and
        ``index_fill_`` by a 0-dim tensor."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
            hidden = self.proj(x)
            rows = hidden.flatten(0, 1)
            groups = index % 3
            out = []
            for reduce in ("prod", "mean", "amax"):
                out.append(rows.new_ones(3, 8).index_reduce_(0, groups, rows, reduce, include_self=False))
            flat = index * 3 % rows.numel()
            out.append(rows.clone().put_(flat, rows[:, 0].exp(), accumulate=True))
            out.append(torch.take(rows, flat))
            out.append(rows.clone().masked_scatter_(rows > 0, -rows.flip(0)))
            out.append(rows.clone().index_fill_(1, groups[:2], rows.amin()))
            return tuple(out)

    def reducing(shape: int) -> Any:
        batch, length = (1, 3)[shape], (5, 7)[shape]
        return _call(_randn(shape, batch, length, 8), torch.randint(0, 40, (batch * length,), generator=_seeded(shape)))

    class Rare(nn.Module):
        """Functional pieces no earlier round called: ``rrelu`` in eval (the mean slope),
        ``channel_shuffle``, ``local_response_norm``, ``alpha_dropout`` in eval, ``addr`` and
        ``tensor_split`` at tensor indices. (``torch.combinations`` of a row was tried too: export
        fails on it, "Pending unbacked symbols ... not in returned outputs", its result's size
        taken from a mask it selects by.)"""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.act = nn.RReLU(0.1, 0.3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            maps = self.act(self.conv(x))
            shuffled = F.channel_shuffle(maps, 2)
            normed = F.local_response_norm(shuffled, 3)
            dropped = F.alpha_dropout(normed, 0.5, training=self.training)
            row = dropped[0, 0, 0]
            outer = torch.addr(dropped[0, 0], row[: dropped.shape[-2]], row, beta=0.5, alpha=2.0)
            parts = torch.tensor_split(dropped, torch.tensor([1, 5]), dim=1)
            return (dropped, outer, *parts)

    class Masked(nn.Module):
        """Weights by the module utilities that add hooks or parametrizations: ``prune``'s L1
        and random structured masks (a forward pre-hook multiplying ``weight_orig`` by
        ``weight_mask``), the old hook-based ``weight_norm`` and ``spectral_norm`` (in eval: no
        power iteration), and a parametrized orthogonal layer called twice under
        ``parametrize.cached()`` in ``forward``."""

        def __init__(self) -> None:
            super().__init__()
            self.pruned = prune.l1_unstructured(nn.Linear(16, 16), "weight", amount=0.5)
            prune.random_structured(self.pruned, "weight", amount=0.25, dim=0)
            self.normed = torch.nn.utils.weight_norm(nn.Linear(16, 16))
            self.spectral = torch.nn.utils.spectral_norm(nn.Linear(16, 16))
            self.rotation = parametrizations.orthogonal(nn.Linear(16, 16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            hidden = self.spectral(self.normed(torch.relu(self.pruned(x))))
            with parametrize.cached():
                return self.rotation(self.rotation(hidden))

    class DataWrites(nn.Module):
        """``.data`` written in ``forward``: a running scale kept in a parameter's ``.data``
        (clamped in place), as older code keeps statistics without buffers."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)
            self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 16), requires_grad=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.scale.data.clamp_(0.75, 1.25)
            return self.proj(x) * self.scale

    return [
        OutsideModel("index_reduce_put_take", "hand-written: index_reduce_ prod/mean/amax (include_self=False), put_ "
                     "accumulate, take, masked_scatter_, index_fill_ by a 0-dim tensor", Reducing, reducing,
                     **_TOLERANCE),
        OutsideModel("rrelu_shuffle_lrn", "hand-written: RReLU in eval, channel_shuffle, local_response_norm, "
                     "alpha_dropout in eval, addr, tensor_split at tensor indices", Rare,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 4, (6, 8)[shape], 8)), **_TOLERANCE),
        OutsideModel("pruned_hooked_norms", "hand-written: prune l1_unstructured + random_structured masks, old "
                     "weight_norm and spectral_norm hooks, orthogonal parametrization under parametrize.cached()",
                     Masked, _rows, rtol=1e-3, atol=1e-4),
        OutsideModel("data_attribute_writes", "hand-written: a parameter's .data clamped in place in forward",
                     DataWrites, _rows, **_TOLERANCE),
    ]  # fmt: skip


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    decoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000,
                   use_cache=False)  # fmt: skip
    models: list[HfCase] = [
        ("hf_poolformer", "PoolFormerModel", "PoolFormerConfig", "last_hidden_state",
         dict(depths=[1, 1], hidden_sizes=[16, 32], num_encoder_blocks=2, patch_sizes=[7, 3], strides=[4, 2],
              padding=[2, 1], pool_size=3, mlp_ratio=2.0),
         _images((32, 40))),
        ("hf_wav2vec2_bert", "Wav2Vec2BertModel", "Wav2Vec2BertConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
              feature_projection_input_dim=32, conv_depthwise_kernel_size=5, position_embeddings_type="relative_key",
              left_max_position_embeddings=16, right_max_position_embeddings=4, add_adapter=True,
              num_adapter_layers=1, output_hidden_size=64),
         _filter_banks(32, (40, 56))),
        ("hf_groupvit_vision", "GroupViTVisionModel", "GroupViTVisionConfig", "pooler_output",
         dict(hidden_size=32, intermediate_size=64, depths=[1, 1, 1], num_hidden_layers=3, num_group_tokens=[8, 4, 0],
              num_output_groups=[8, 4, 4], num_attention_heads=4, image_size=32, patch_size=8),
         _images((32, 32))),
        ("hf_univnet", "UnivNetModel", "UnivNetConfig", "waveforms",
         dict(model_in_channels=8, model_hidden_channels=8, num_mel_bins=16, resblock_kernel_sizes=[3],
              resblock_stride_sizes=[4], resblock_dilation_sizes=[[1, 3]], kernel_predictor_num_blocks=1,
              kernel_predictor_hidden_channels=8),
         _spectrogram(16, 8, (10, 14))),
        ("hf_paligemma", "PaliGemmaForConditionalGeneration", "PaliGemmaConfig", "logits",
         dict(text_config=dict(decoder, model_type="gemma", num_key_value_heads=1, head_dim=16),
              vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                 image_size=32, patch_size=8, projection_dim=64),
              image_token_index=999, projection_dim=64, vocab_size=1000),
         _image_prompt(999, 16, 32, (10, 14))),
    ]  # fmt: skip
    return _hf_cases(models)


def _images(sizes: tuple[int, int]) -> Any:
    """``pixel_values`` of ``sizes[shape]`` square, batch 1 then 3."""
    return lambda shape: _call(pixel_values=_randn(shape, (1, 3)[shape], 3, sizes[shape], sizes[shape]))


def _filter_banks(features: int, lengths: tuple[int, int]) -> Any:
    """Wav2Vec2-BERT's ``input_features`` (batch, frames, features) with an attention mask that
    pads the last sequence's last four frames."""

    def make(shape: int) -> Any:
        import torch

        batch, length = (1, 3)[shape], lengths[shape]
        mask = torch.ones(batch, length, dtype=torch.int64)
        mask[-1, length - 4 :] = 0
        return _call(input_features=_randn(shape, batch, length, features), attention_mask=mask)

    return make


def _spectrogram(mels: int, noise: int, frames: tuple[int, int]) -> Any:
    """UnivNet's mel spectrogram and its ``noise_sequence`` (drawn inside the model when not
    given: no two eager calls would agree), (batch, frames, channels) each."""

    def make(shape: int) -> Any:
        batch, length = (1, 3)[shape], frames[shape]
        return _call(input_features=_randn(shape, batch, length, mels),
                     noise_sequence=_randn(shape + 7, batch, length, noise))  # fmt: skip

    return make


def _image_prompt(image_token: int, image_tokens: int, size: int, lengths: tuple[int, int]) -> Any:
    """PaliGemma's call: ``image_tokens`` image placeholder ids, then text ids, ``pixel_values``
    and ``token_type_ids`` (0 for the prefix, 1 for the suffix the model predicts)."""

    def make(shape: int) -> Any:
        import torch

        call = _tokens(image_token, lengths)(shape)
        ids, mask = call.kwargs["input_ids"], call.kwargs["attention_mask"]
        batch = ids.shape[0]
        placeholders = torch.full((batch, image_tokens), image_token, dtype=ids.dtype)
        input_ids = torch.cat([placeholders, ids], dim=1)
        attention_mask = torch.cat([torch.ones_like(placeholders), mask], dim=1)
        token_type_ids = torch.zeros_like(input_ids)
        token_type_ids[:, -3:] = 1
        return _call(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                     pixel_values=_randn(shape, batch, 3, size, size))  # fmt: skip

    return make
