"""The twenty-first round of models from outside the zoo (``benchmarks/outside_models.py`` runs them):
hand-written models of semantics no earlier round had (an explicit float mask broadcast over
heads into ``scaled_dot_product_attention`` with grouped-query heads and the eval-time
``dropout_p``, a boolean mask that leaves padded queries no key, lazy modules initialised by a
first call, helpers under ``torch.compiler.disable`` and ``torch.jit.ignore``, a ``ModuleDict``
head chosen by a string argument with ``functools.partial`` activations, non-persistent running
statistics updated by every call, in-place writes into strided and diagonal slices of the
caller's tensor, ``pad_sequence`` padding on the left, boolean-mask indexing, ``.item()`` used as
a Python int, ``einsum`` with ellipses, results gathered from a generator, a bfloat16 autocast
region with a float32 region nested inside);
and ``transformers`` architectures no earlier round built, called as their users call them
(CodeGen, Megatron-BERT's pre-training heads, ViTDet's windows, Bros's boxes and ESM's masked LM).

A model whose package is not installed is reported as unavailable, with the import error. Kept
apart from ``outside_models.py`` like the rounds before; importing it is cheap (builders import
torch and the libraries when they run).
"""

from __future__ import annotations

import functools
from typing import Any

from benchmarks.outside_models import OutsideModel, _call, _randn, _seeded, _tokens
from benchmarks.outside_round12 import _TOLERANCE  # float32 models of a few hundred ops at most
from benchmarks.outside_round13 import HfCase, _hf_cases
from benchmarks.outside_round18 import _with


def twenty_first_round() -> list[OutsideModel]:
    """The twenty-first round's models, group by group."""
    return _attention_models() + _module_models() + _state_models() + _shape_models() + _transformers_models()


def _attention_models() -> list[OutsideModel]:
    """Attention as its users write it around ``scaled_dot_product_attention``."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Grouped(nn.Module):
        """Grouped-query attention (4 query heads over 2 key-value heads, ``enable_gqa``) under
        one explicit float mask of shape (batch, 1, length, length) that broadcasts over the heads:
        a learned relative-position bias plus the padding as ``-inf``, and ``dropout_p`` taken from
        the module only while training (0 in eval), as model code passes it."""

        def __init__(self) -> None:
            super().__init__()
            self.q, self.kv, self.out = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)
            self.bias = nn.Parameter(torch.randn(31, generator=_seeded(3)) / 4)
            self.dropout = 0.1

        def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
            length = x.shape[1]
            q = self.q(x).unflatten(-1, (4, 8)).transpose(1, 2)
            k, v = self.kv(x).unflatten(-1, (2, 2, 8)).permute(2, 0, 3, 1, 4).unbind(0)
            offsets = torch.arange(length)[None, :] - torch.arange(length)[:, None] + 15
            mask = self.bias[offsets.clamp(0, 30)][None, None] + padding[:, None, None, :]
            dropout = self.dropout if self.training else 0.0
            attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, enable_gqa=True)
            return self.out(attended.transpose(1, 2).flatten(2))

    def padded(shape: int) -> Any:
        batch, length = (1, 3)[shape], (6, 9)[shape]
        padding = torch.zeros(batch, length)
        padding[-1, -2:] = float("-inf")
        return _call(_randn(shape, batch, length, 32), padding)

    class Masked(nn.Module):
        """A boolean mask that leaves one query row no key at all (the padded sequence's padded
        queries, masked against every key as some collators build masks) beside a per-head float
        bias of shape (1, heads, length, length) that broadcasts over the batch."""

        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(16, 48)
            self.bias = nn.Parameter(torch.randn(1, 4, 1, 1, generator=_seeded(4)))

        def forward(self, x: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            q, k, v = self.qkv(x).unflatten(-1, (3, 4, 4)).permute(2, 0, 3, 1, 4).unbind(0)
            pairs = keep[:, None, :, None] & keep[:, None, None, :]
            hidden = F.scaled_dot_product_attention(q, k, v, attn_mask=pairs)
            distance = (torch.arange(x.shape[1])[None, :] - torch.arange(x.shape[1])[:, None]).abs()
            biased = F.scaled_dot_product_attention(q, k, v, attn_mask=-self.bias * distance)
            return hidden, biased

    def kept(shape: int) -> Any:
        batch, length = (1, 3)[shape], (6, 9)[shape]
        keep = torch.ones(batch, length, dtype=torch.bool)
        keep[-1, -2:] = False
        return _call(_randn(shape, batch, length, 16), keep)

    return [
        OutsideModel("sdpa_float_mask_gqa", "hand-written: scaled_dot_product_attention with enable_gqa (4 over 2 "
                     "heads), a float bias + -inf padding mask broadcast over heads, dropout_p 0 in eval",
                     Grouped, padded, **_TOLERANCE),
        OutsideModel("sdpa_masked_rows", "hand-written: scaled_dot_product_attention with a bool mask leaving "
                     "padded queries no key, and a per-head float bias broadcast over the batch", Masked, kept,
                     **_TOLERANCE),
    ]  # fmt: skip


def _module_models() -> list[OutsideModel]:
    """How modules are put together: lazily, with helpers kept from compilers, chosen by name."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    def lazy() -> nn.Module:
        """``LazyConv2d``, ``LazyBatchNorm2d``, ``LazyConv1d`` and ``LazyLinear`` given their
        shapes by a first call (in training mode, so the batch norm's running statistics move),
        then put in eval, as a model whose input sizes are only known from data is built."""

        class Lazy(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.image = nn.Sequential(nn.LazyConv2d(8, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU())
                self.rows = nn.LazyConv1d(6, 3)
                self.head = nn.LazyLinear(5)

            def forward(self, image: torch.Tensor) -> torch.Tensor:
                features = self.image(image)
                rows = torch.relu(self.rows(features.mean(2)))
                return self.head(rows.amax(-1))

        model = Lazy()
        with torch.no_grad():
            model(torch.randn(4, 3, 10, 10, generator=_seeded(17)))
        return model.eval()

    class Kept(nn.Module):
        """A helper under ``torch.compiler.disable`` (kept from ``torch.compile`` by its author)
        and one under ``torch.jit.ignore`` (kept from TorchScript), both called by ``forward``."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        @torch.compiler.disable
        def scores(self, x: torch.Tensor) -> torch.Tensor:
            return torch.softmax(self.proj(x), dim=-1)

        @torch.jit.ignore
        def norms(self, x: torch.Tensor) -> torch.Tensor:
            return x.norm(dim=-1, keepdim=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.scores(x) * self.norms(x)

    class Heads(nn.Module):
        """A ``ModuleDict`` of task heads chosen by a string argument, and activations kept as
        ``functools.partial`` of functional ones (leaky ReLU with its slope, tanh GELU)."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(12, 24)
            self.heads = nn.ModuleDict(
                {"classify": nn.Linear(24, 4), "regress": nn.Sequential(nn.Linear(24, 8), nn.Linear(8, 1))}
            )
            self.activations = {
                "classify": functools.partial(F.leaky_relu, negative_slope=0.2),
                "regress": functools.partial(F.gelu, approximate="tanh"),
            }

        def forward(self, x: torch.Tensor, task: str) -> torch.Tensor:
            return self.heads[task](self.activations[task](self.body(x)))

    return [
        OutsideModel("lazy_modules", "LazyConv2d, LazyBatchNorm2d, LazyConv1d, LazyLinear initialised by a first "
                     "call in training mode, then eval", lazy,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 3, 10, (10, 14)[shape])), **_TOLERANCE),
        OutsideModel("compiler_disabled_helpers", "hand-written: forward calls a torch.compiler.disable helper and a "
                     "torch.jit.ignore helper", Kept,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16)), **_TOLERANCE),
        OutsideModel("moduledict_by_name", "hand-written: a ModuleDict head chosen by a string argument, "
                     "functools.partial activations (leaky_relu slope, tanh gelu)", Heads,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], 12), ("classify", "regress")[shape]),
                     **_TOLERANCE),
    ]  # fmt: skip


def _state_models() -> list[OutsideModel]:
    """State written by every call: a module's own buffers, and slices of the caller's tensor."""
    import torch
    from torch import nn

    class Tracking(nn.Module):
        """Running statistics in non-persistent buffers (``register_buffer(persistent=False)``,
        left out of the state dict), updated in place by every call in eval as a drift monitor
        does (an exponential mean and a call count), and the input normalised by them."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 8)
            self.register_buffer("mean", torch.zeros(16), persistent=False)
            self.register_buffer("calls", torch.zeros((), dtype=torch.int64), persistent=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            mean = self.get_buffer("mean")
            mean.mul_(0.9).add_(x.mean((0, 1)), alpha=0.1)
            calls = self.get_buffer("calls")
            calls.add_(1)
            return self.proj(x - mean), calls.clone()

    class Slices(nn.Module):
        """Writes into slices of the caller's state tensor in place: a shift of its rows by a
        copy, a new first row assigned, every other column clamped (a strided view) and the
        leading square's diagonal scaled (``torch.diagonal``'s view)."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
            state[:, 1:].copy_(state[:, :-1].clone())
            state[:, 0] = torch.tanh(self.proj(x))
            state[..., ::2].clamp_(-0.5, 0.5)
            torch.diagonal(state[:, :, :4], dim1=1, dim2=2).mul_(0.5)
            return state.sum(1)

    def stated(shape: int) -> Any:
        batch = (1, 3)[shape]
        return _call(_randn(shape, batch, 16), _randn(shape + 5, batch, 4, 16))

    return [
        OutsideModel("running_stats_buffers", "hand-written: non-persistent buffers (an exponential mean, a call "
                     "count) updated in place by every call in eval", Tracking,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16)), **_TOLERANCE),
        OutsideModel("input_slices_inplace", "hand-written: the caller's state shifted by copy_ of a slice, a row "
                     "assigned, strided columns clamp_, a diagonal view mul_", Slices, stated, **_TOLERANCE),
    ]  # fmt: skip


def _shape_models() -> list[OutsideModel]:
    """Shapes that come from data (a list padded, a mask, a read value), ellipses, generators and
    autocast regions."""
    import torch
    from torch import nn

    class Selected(nn.Module):
        """Boolean-mask indexing: the rows whose norm passes a threshold picked by ``x[keep]``
        (as many as the data says) and projected, and the others zeroed by a masked assignment."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            keep = x.norm(dim=-1) > 4.0
            picked = self.proj(x[keep])
            zeroed = x.clone()
            zeroed[~keep] = 0.0
            return picked, zeroed

    class Trimmed(nn.Module):
        """``.item()`` used as a Python int: the batch is trimmed to its longest length read from
        the lengths tensor, as padding-aware code does before a recurrent or attention layer."""

        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            longest = int(lengths.max().item())
            return self.proj(x[:, :longest]).sum(1) / lengths[:, None]

    def trimmed(shape: int) -> Any:
        lengths = (torch.tensor([4]), torch.tensor([3, 6, 5]))[shape]
        return _call(_randn(shape, len(lengths), 8, 16), lengths)

    class Ellipses(nn.Module):
        """``einsum`` with ellipses (a batched product over any leading dims, a per-position inner
        product, a three-operand bilinear form, a trace of the leading square), ``unflatten`` and
        ``movedim`` of two dims at once."""

        def __init__(self) -> None:
            super().__init__()
            self.mix = nn.Parameter(torch.randn(8, 8, generator=_seeded(7)) / 3)
            self.form = nn.Parameter(torch.randn(32, 32, generator=_seeded(8)) / 6)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            grid = x.unflatten(-1, (4, 8))
            mixed = torch.einsum("...ij,jk->...ik", grid, self.mix)
            inner = torch.einsum("b...d,b...d->b...", mixed, grid)
            bilinear = torch.einsum("...i,ij,...j->...", x, self.form, x)
            trace = torch.einsum("...ii->...", grid[..., :4, :4])
            return mixed, inner, bilinear, trace, torch.movedim(mixed, (1, -1), (-1, 1))

    class Staged(nn.Module):
        """Stages yielded by a generator method, gathered with ``tuple(...)``, and the heads'
        results returned as a tuple built from a generator expression, with a dict of means."""

        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(16, 16), nn.SiLU()) for _ in range(3))
            self.heads = nn.ModuleList(nn.Linear(16, 2) for _ in range(3))

        def stages(self, x: torch.Tensor) -> Any:
            for block in self.blocks:
                x = block(x) + x
                yield x

        def forward(self, x: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], dict[str, torch.Tensor]]:
            features = tuple(self.stages(x))
            means = {f"stage{index}": feature.mean(-1) for index, feature in enumerate(features)}
            return tuple(head(feature) for head, feature in zip(self.heads, features)), means

    class Mixed(nn.Module):
        """A bfloat16 ``torch.autocast`` region on CPU (its linear layers in bfloat16) with a
        region nested inside that turns autocast off for a float32 softmax, as mixed-precision
        code keeps its reductions in float32; both the bfloat16 and the float32 results out."""

        def __init__(self) -> None:
            super().__init__()
            self.up, self.down = nn.Linear(16, 32), nn.Linear(32, 16)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                hidden = self.up(x)
                with torch.autocast("cpu", enabled=False):
                    weights = torch.softmax(hidden.float(), dim=-1)
                out = self.down(hidden * weights)
            return out, weights

    def rows(shape: int) -> Any:
        return _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 16) * 1.5)

    class Left(nn.Module):
        """Requests padded on the left inside the model (``pad_sequence(padding_side="left")``), as
        decoder-only serving code aligns prompts to the right, and the last position read."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(50, 16, padding_idx=0)
            self.mix = nn.Linear(16, 16)

        def forward(self, sequences: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
            from torch.nn.utils.rnn import pad_sequence

            padded = pad_sequence(sequences, batch_first=True, padding_value=0, padding_side="left")
            states = torch.tanh(self.mix(self.embed(padded))).cumsum(1)
            return states[:, -1], padded

    def requests(shape: int) -> Any:
        generator = _seeded(shape)
        return _call([torch.randint(1, 50, (length,), generator=generator) for length in ((5, 3), (4, 7, 2))[shape]])

    return [
        OutsideModel("pad_sequence_left", "hand-written: a list of token sequences padded on the left in forward "
                     "(pad_sequence padding_side='left'), the last position read", Left, requests, **_TOLERANCE),
        OutsideModel("bool_mask_indexing", "hand-written: x[keep] by a data-dependent bool mask (rows projected), "
                     "x[~keep] = 0", Selected, rows, **_TOLERANCE),
        OutsideModel("item_as_int", "hand-written: int(lengths.max().item()) trims the batch by slicing",
                     Trimmed, trimmed, **_TOLERANCE),
        OutsideModel("einsum_ellipsis", "hand-written: einsum with ellipses (batched product, inner product, "
                     "3-operand bilinear, trace), unflatten, movedim of two dims", Ellipses,
                     lambda shape: _call(_randn(shape, (1, 3)[shape], (5, 7)[shape], 32)), **_TOLERANCE),
        OutsideModel("generator_stages", "hand-written: stages from a generator method gathered by tuple(), heads' "
                     "results as a tuple from a generator expression, a dict of means", Staged, rows, **_TOLERANCE),
        OutsideModel("autocast_nested_off", "hand-written: autocast(cpu, bfloat16) with a nested autocast(enabled="
                     "False) float32 softmax; bfloat16 and float32 results", Mixed, rows, rtol=1e-2, atol=1e-2),
    ]  # fmt: skip


def _boxes(shape: int, batch: int, length: int) -> dict[str, Any]:
    """Bros's boxes: one (x0, y0, x1, y1) in [0, 1] per token, corners in order."""
    import torch

    corners = torch.rand(batch, length, 2, 2, generator=_seeded(shape + 3)).sort(dim=2).values
    return dict(bbox=corners.transpose(2, 3).flatten(2))


def _sentence_labels(shape: int, batch: int, length: int) -> dict[str, Any]:
    """Megatron-BERT's next-sentence labels: 0 and 1 in turn."""
    import torch

    return dict(next_sentence_label=torch.arange(batch) % 2)


def _transformers_models() -> list[OutsideModel]:
    """transformers architectures no earlier round built, from small configs."""
    encoder = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=1000)
    models: list[HfCase] = [
        ("hf_codegen", "CodeGenForCausalLM", "CodeGenConfig", "logits",
         dict(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=64, vocab_size=1000, use_cache=False),
         _tokens(1000, (12, 20))),
        ("hf_megatron_bert_pretraining", "MegatronBertForPreTraining", "MegatronBertConfig", None,
         dict(encoder, max_position_embeddings=64),
         _with(_tokens(1000, (12, 20), labels_like_ids=True),
               _sentence_labels)),
        ("hf_vitdet", "VitDetModel", "VitDetConfig", "last_hidden_state",
         dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32,
              pretrain_image_size=32, patch_size=8, window_size=2, window_block_indices=[0],
              use_relative_position_embeddings=True),
         lambda shape: _call(pixel_values=_randn(shape, (1, 2)[shape], 3, 32, (32, 48)[shape]))),
        ("hf_bros", "BrosModel", "BrosConfig", "last_hidden_state",
         dict(encoder, max_position_embeddings=64), _with(_tokens(1000, (12, 20)), _boxes)),
        ("hf_esm_mlm", "EsmForMaskedLM", "EsmConfig", None,
         dict(encoder, vocab_size=33, max_position_embeddings=64, position_embedding_type="rotary",
              token_dropout=True, mask_token_id=32, pad_token_id=1),
         _tokens(33, (12, 20), labels_like_ids=True)),
    ]  # fmt: skip
    return _hf_cases(models)
