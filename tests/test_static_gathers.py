"""Reads at positions the input signature fixes, made in one call (srbench.static.gathers): a
chain of views of an input is one ``as_strided`` of it, a copy of such a chain and indexing with
constant index tensors are one ``torch.take``; views nothing reads any more are not run. Each is
checked beside eager on inputs of every layout the rewrites depend on (offsets, transposed,
expanded), with the conformance protocol's aliasing and input checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions
from srbench.static.calls import OffsetFrom
from srbench.static.choose import RunAs
from srbench.static.gathers import MAX_POSITIONS

OPTIONS = [StaticOptions(), StaticOptions(decompose=True), StaticOptions(enable_out_variant=False)]
OPTION_IDS = ["default", "decompose", "no-out"]


def ints(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 1000, shape, generator=torch.Generator().manual_seed(seed))


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Columns(nn.Module):
    """Each feature's ids flattened, as ``EmbeddingBag`` takes them from ``[batch, features, bag]``
    ids: a view at batch 1, a copy beyond (the bags of one feature lie apart)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x[:, index].reshape(-1) * (index + 1) for index in range(x.shape[1])])


class ReturnsAView(nn.Module):
    """Outputs that view the input through several view ops: eager returns views of it."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x[:, 1].reshape(-1), x.transpose(0, 1)[2:].unsqueeze(0)


class SharedView(nn.Module):
    """A view read by another view and by an op: it must still run."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        column = x[:, 0]
        return column.reshape(-1) + column.sum()


class Pairs(nn.Module):
    """DLRM's interaction: the strictly lower triangle of a batch of Gram matrices."""

    def __init__(self, n: int) -> None:
        super().__init__()
        rows, cols = torch.tril_indices(n, n, offset=-1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        products = torch.bmm(x, x.transpose(1, 2))
        return products[:, self.rows, self.cols] + 1


class MaskedColumns(nn.Module):
    """Indexing with a constant boolean mask and a constant index on separate dimensions."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mask", torch.tensor([True, False, True, True, False, True]), persistent=False)
        self.register_buffer("order", torch.tensor([2, 0, 1]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2)[self.order][:, self.mask]


class InputIndex(nn.Module):
    """Indexing with an index the caller passes: positions not fixed, no gather."""

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return (x * 2)[:, index]


def _calls(module: StaticModule) -> dict[str, str]:
    """The call label each node runs with (``skip`` for nodes that do not run)."""
    return {plan.node.name: plan.runs.label if plan.how.runs_code else plan.how.value for plan in module.prepared.plans}


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_views_of_an_input_are_one_call_at_any_offset(conformance, options):
    """The second call's input starts 5 elements into its storage: the view's offset is counted
    from the input's own."""
    shifted = ints(5 + 6 * 4, seed=1)[5:].view(1, 6, 4)
    module = conformance(Columns(), (ints(1, 3, 4),), (shifted,), options)
    labels = list(_calls(module).values())
    assert labels.count("Tensor.as_strided") == 3 and labels.count("skip") == 3  # the selects


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_a_reshape_that_must_copy_gathers_and_still_copies(conformance, options):
    """At batch 2 a feature's bags lie apart: ``reshape`` copies, and so does its gather; the
    second call's input is transposed (its bags lie together: views again). Decomposed, the copy
    is a ``clone`` (an op with an out variant of its own), which stays."""
    transposed = ints(2, 3, 4, seed=1).transpose(0, 1).contiguous().transpose(0, 1)
    module = conformance(Columns(), (ints(2, 3, 4),), (transposed,), options)
    labels = list(_calls(module).values())
    if not options.decompose:
        assert labels.count("torch.take") == 3 and labels.count("skip") == 3


class ReturnsCopy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 1].reshape(-1)


def test_a_gathered_copy_is_a_fresh_tensor(one_thread):
    x = ints(2, 3, 4)
    module = StaticModule(ReturnsCopy(), (x,), StaticOptions())
    assert _calls(module)["reshape"] == "torch.take"
    got = module.runtime()(x)
    x.add_(1)
    assert torch.equal(got, (x - 1)[:, 1].reshape(-1))


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_returned_views_of_an_input_alias_it_as_in_eager(conformance, options):
    conformance(ReturnsAView(), (ints(4, 5),), (ints(3, 7, seed=1)[:, 1:],), options)


class AbsoluteViews(nn.Module):
    """``as_strided`` with an offset places its view in the storage, not relative to its input."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.as_strided((2, 3), (3, 1), 2)[1] * 2, x[1:].as_strided((2,), (1,), 3) * 3


def test_views_at_an_absolute_offset_are_not_folded(conformance):
    """The second call's input starts 5 elements into its storage: ``as_strided`` still reads from
    the storage's element 2 (eager), not 2 past the input's start."""
    module = conformance(AbsoluteViews(), (ints(12),), (ints(17, seed=1)[5:],), StaticOptions())
    runs = [plan.runs for plan in module.prepared.plans if plan.how.runs_code]
    assert not any(isinstance(arg, OffsetFrom) for call in runs for arg in call.args)
    assert _calls(module)["select"] != "Tensor.as_strided"


def test_an_expanded_input(conformance):
    """Elements sharing memory (stride 0): the views fold, the copy keeps the op's own call."""
    conformance(Columns(), (ints(1, 1, 4).expand(2, 3, 4),), (ints(1, 4, 1, seed=1).expand(1, 4, 2),), StaticOptions())


def test_a_view_read_elsewhere_still_runs(conformance):
    module = conformance(SharedView(), (randn(4, 3),), (randn(5, 3, seed=1),), StaticOptions())
    assert _calls(module)["select"] != "skip"


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_indexing_with_constant_indices_is_one_take(conformance, options):
    module = conformance(Pairs(9), (randn(2, 9, 4),), (randn(5, 9, 4, seed=1),), options, rtol=0, atol=0)
    assert _calls(module)["index"] == "torch.take"
    if options.enable_out_variant:
        assert next(plan for plan in module.prepared.plans if plan.node.name == "index").how is RunAs.OUT


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_boolean_masks_and_reordering(conformance, options):
    module = conformance(MaskedColumns(), (randn(3, 6),), (randn(3, 6, seed=1).t().contiguous().t(),), options)
    assert "torch.take" in _calls(module).values()


def test_an_index_from_the_caller_is_not_gathered(conformance):
    first, second = (randn(3, 6), torch.tensor([4, 1])), (randn(2, 6), torch.tensor([0]))
    module = conformance(InputIndex(), first, second, StaticOptions())
    assert "torch.take" not in _calls(module).values()


def test_positions_beyond_the_limit_are_not_kept(one_thread):
    n = 400  # a 400 x 400 lower triangle: 79,800 positions per sample
    assert n * (n - 1) // 2 > MAX_POSITIONS
    module = StaticModule(Pairs(n), (randn(1, n, 2),), StaticOptions())
    assert _calls(module)["index"] != "torch.take"


class ViewsOfAWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight[1:].t().reshape(6, 3)


def test_views_of_constants_are_still_made_once(one_thread):
    module = StaticModule(ViewsOfAWeight(), (randn(2, 6),), StaticOptions())
    assert all(plan.static for plan in module.prepared.plans if plan.kind in ("aten::slice", "aten::t"))
