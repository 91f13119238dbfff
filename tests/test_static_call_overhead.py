"""How each call reaches its kernel (issue 10, models of many tiny ops): bindings given the
schema's defaults where the binding's own differ, the scalar ops of data-dependent graphs as
``Tensor`` methods and a Python test, ``torch.sparse_coo_tensor`` and ``torch._C._sparse``'s
bindings, method bindings for fallbacks, conversions that return their input passed on, and a
run below the autograd dispatch keys. Each is
checked against eager, and the raw overloads it replaces must be gone from the program."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from srbench.static import StaticModule, StaticOptions
from srbench.static.calls import with_schema_defaults
from srbench.static.scalar_ops import assert_scalar

OPTIONS = [StaticOptions(), StaticOptions(enable_out_variant=False)]
OPTION_IDS = ["default", "no-out"]


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Losses(nn.Module):
    """Losses whose Python bindings default ``reduction`` to 0 (none) where the schema says 1."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        sign = (y[:, 0] > 0).float() * 2 - 1
        return (
            F.margin_ranking_loss(x[:, 0], x[:, 1], sign),
            F.binary_cross_entropy_with_logits(x, y.sigmoid(), pos_weight=torch.ones(x.shape[1]) * 2),
            F.cosine_embedding_loss(x, y, sign),
            F.triplet_margin_loss(x, y, x.flip(0)),
        )


class DataDependent(nn.Module):
    """Sizes read from the data: export adds ``sym_size`` reads and ``_assert_scalar`` checks."""

    def forward(self, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, counts = torch.unique_consecutive(labels, return_counts=True)
        return values * 2, counts


class SparseGraph(nn.Module):
    """A sparse COO adjacency built in forward, multiplied, and made dense."""

    def forward(self, x: torch.Tensor, edges: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, ...]:
        adjacency = torch.sparse_coo_tensor(edges, weight, (x.shape[0], x.shape[0]))
        return torch.sparse.mm(adjacency, x), adjacency.to_dense()


def graph_inputs() -> tuple[torch.Tensor, ...]:
    edges = torch.randint(0, 5, (2, 7), generator=torch.Generator().manual_seed(1))
    return randn(5, 4), edges, torch.rand(7, generator=torch.Generator().manual_seed(2))


def calls_of(module: StaticModule) -> dict[str, str]:
    """Each node's chosen call, by the node's kind."""
    return {plan.node.name: plan.call.label for plan in module.prepared.plans if plan.call is not None}


def raw_overloads(module: StaticModule) -> list[str]:
    return [plan.node.name for plan in module.prepared.plans if plan.call is not None and plan.call.parses_schema]


def check_against_eager(model: nn.Module, inputs: tuple[torch.Tensor, ...], options: StaticOptions) -> StaticModule:
    module = StaticModule(model, inputs, options)
    runtime = module.runtime()
    with torch.no_grad():
        expected = model(*inputs)
    for _ in range(2):
        got = runtime(*inputs)
        for answer, result in zip(expected, got):
            assert result.layout == answer.layout
            torch.testing.assert_close(result.to_dense(), answer.to_dense())
    return module


def test_schema_defaults_are_spelled_positionally_then_by_keyword():
    aten = torch.ops.aten
    assert with_schema_defaults(aten.margin_ranking_loss.default, ("a", "b", "t"), {}) == (("a", "b", "t", 0.0, 1), {})
    assert with_schema_defaults(aten.mean.default, ("x",), {}) == (("x",), {"dtype": None})
    # a positional argument given by keyword: those before it go positionally, those after by keyword
    spelled = with_schema_defaults(aten.nll_loss_nd.default, ("x", "t"), {"reduction": 2})
    assert spelled == (("x", "t", None), {"reduction": 2, "ignore_index": -100})
    assert with_schema_defaults(aten.kl_div.default, ("a", "b", 1), {"log_target": True}) is None


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_losses_run_through_their_bindings_given_the_schema_defaults(options):
    module = check_against_eager(Losses().eval(), (randn(6, 5), randn(6, 5, seed=1)), options)
    calls = calls_of(module)
    for name in ("margin_ranking_loss", "binary_cross_entropy_with_logits", "cosine_embedding_loss"):
        assert calls[name] == f"torch.{name}", calls
    assert not any("loss" in name for name in raw_overloads(module))


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_data_dependent_sizes_are_read_by_tensor_methods_and_checked_in_python(options):
    labels = torch.tensor([0, 0, 1, 1, 1, 3, 4, 4, 4])
    module = check_against_eager(DataDependent().eval(), (labels,), options)
    labels_used = set(calls_of(module).values())
    assert "Tensor.size" in labels_used and "assert_scalar" in labels_used, labels_used
    assert not raw_overloads(module)


def test_assert_scalar_raises_as_aten_does():
    assert_scalar(True, "never")
    assert_scalar(3, "never")
    with pytest.raises(RuntimeError) as aten_error:
        torch._assert_scalar(False, "Runtime assertion failed for expression u0 <= 9")
    with pytest.raises(RuntimeError) as ours:
        assert_scalar(False, "Runtime assertion failed for expression u0 <= 9")
    assert str(ours.value) == str(aten_error.value)


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_sparse_ops_run_through_bindings(options):
    module = check_against_eager(SparseGraph().eval(), graph_inputs(), options)
    calls = calls_of(module)
    assert calls["sparse_coo_tensor"] == "torch.sparse_coo_tensor"
    assert calls["_sparse_mm"] == "torch._C._sparse._sparse_mm"
    assert calls["to_dense"] == "Tensor.to_dense"
    assert not raw_overloads(module)


class Conversions(nn.Module):
    """Conversions eager answers with the input itself, one that converts, and one asking for a
    memory format (whether the input has it follows from strides: still called)."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x.float(), x.to(torch.float32), x.type_as(x), ids.to(x.dtype), ids.type_as(x),
            x.to(torch.float32, memory_format=torch.contiguous_format),
        )  # fmt: skip


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_conversions_that_return_their_input_pass_it_on(options):
    x, ids = randn(2, 3), torch.arange(6).reshape(2, 3)
    model = Conversions().eval()
    module = StaticModule(model, (x, ids), options)
    runtime = module.runtime()
    with torch.no_grad():
        expected = model(x, ids)
    for _ in range(2):
        got = runtime(x, ids)
        for answer, result in zip(expected, got):
            torch.testing.assert_close(result, answer)
            assert (result is x) == (answer is x)
    passed_on = [name for name, label in calls_of(module).items() if label == "returns its input"]
    assert len(passed_on) == 3, calls_of(module)
    assert got[0] is x and got[2] is x and got[3] is not ids


class MemoryFormatAndAlias(nn.Module):
    """``to`` asking for a memory format (the graph's ``to.dtype_layout``, whose ``layout`` the
    ``Tensor.to`` binding does not take), one that copies a transposed view, and ``x[...]``
    (``alias``, which has no binding)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.to(memory_format=torch.contiguous_format), x[...], x.t().to(memory_format=torch.contiguous_format)


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_memory_format_conversions_and_alias_run_through_bindings(conformance, options):
    """Called with a contiguous input, then a transposed one (another program): eager's values,
    aliasing and strides either way, and no raw overload left."""
    module = conformance(MemoryFormatAndAlias().eval(), (randn(3, 4),), (randn(4, 3).t(),), options)
    calls = calls_of(module)
    assert calls["alias"] == "Tensor.__getitem__", calls
    layouts = [p.call.label for p in module.prepared.plans if p.node.target is torch.ops.aten.to.dtype_layout]
    # the example's program (a contiguous input: the second ``to`` copies); once in a CI run its
    # second ``to`` was the transposed call's one-call view, not reproduced since: say which program
    assert layouts == ["Tensor.to"] * 2, (calls, module.prepared.signature)
    assert not raw_overloads(module)


class ConversionsInAMemoryFormat(nn.Module):
    """``to`` given a dtype, a device and a dtype, or another tensor, each with a memory format
    (the graph's ``to.dtype``, ``to.device`` and ``to.other``, which pass it positionally, after
    ``non_blocking`` and ``copy``), one asking for a copy besides."""

    def forward(self, x: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x.to(torch.float64, memory_format=torch.channels_last),
            x.to("cpu", torch.float64, memory_format=torch.contiguous_format),
            x.to(like, memory_format=torch.channels_last),
            x.to(torch.float32, copy=True, memory_format=torch.preserve_format),
        )


@pytest.mark.parametrize("options", OPTIONS, ids=OPTION_IDS)
def test_conversions_with_a_memory_format_run_through_the_binding(conformance, options):
    """Called with a contiguous input, then a channels-last one (another program): eager's values,
    aliasing and strides either way, every conversion through ``Tensor.to`` (the memory format
    by keyword) and no raw overload left."""
    like = torch.zeros((), dtype=torch.float16)
    contiguous, channels_last = randn(2, 3, 4, 5), randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    module = conformance(ConversionsInAMemoryFormat().eval(), (contiguous, like), (channels_last, like), options)
    overloads = (torch.ops.aten.to.dtype, torch.ops.aten.to.device, torch.ops.aten.to.other)
    conversions = [p.call.label for p in module.prepared.plans if p.node.target in overloads]
    assert conversions == ["Tensor.to"] * 4, calls_of(module)
    assert not raw_overloads(module)


def _autograd_excluded() -> bool:
    return torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutogradFunctionality)


_SEEN: list[bool] = []  # what the probe op saw at each call: the autograd keys excluded or not
_FAIL = [False]


@torch.library.custom_op("srbench_test_overhead::probe", mutates_args=())
def probe(x: torch.Tensor) -> torch.Tensor:
    _SEEN.append(_autograd_excluded())
    if _FAIL[0]:
        raise ValueError("probe asked to fail")
    return x.clone()


@probe.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Probed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.linear(x)
        return probe(hidden).relu(), self.linear.weight[0]


def test_a_run_is_below_autograd_and_gives_the_caller_its_dispatch_state_back():
    """The program runs with the autograd keys excluded, as inference mode runs, without making
    inference tensors: its results are eager's under ``no_grad`` (no history; a parameter's view
    still a view of it), and the caller's dispatch state and grad mode come back after a run and
    after one that raised."""
    model = Probed().eval()
    x = randn(3, 4)
    runtime = StaticModule(model, (x,)).runtime()
    _SEEN.clear()
    out, row = runtime(x)
    assert _SEEN == [True]
    assert not _autograd_excluded() and torch.is_grad_enabled()
    assert out.grad_fn is None and not out.requires_grad and not torch.is_inference(out)
    with torch.no_grad():
        expected, expected_row = model(x)
    torch.testing.assert_close(out, expected)
    assert row._base is model.linear.weight and row.requires_grad == expected_row.requires_grad
    _FAIL[0] = True
    try:
        with pytest.raises(ValueError, match="probe asked to fail"):
            runtime(x)
    finally:
        _FAIL[0] = False
    assert not _autograd_excluded() and torch.is_grad_enabled()
    runtime(x)  # the runtime is usable again


class ReturnsParameter(nn.Module):
    """A parameter returned, a view of it, and a result computed from it: under ``no_grad``,
    eager's first two require grad (a view of a parameter made there does), the third does not."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(randn(4, 4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.weight, self.weight.t(), x @ self.weight


def test_a_returned_parameter_and_its_view_still_require_grad(conformance, static_options):
    """The harness compares ``requires_grad``: a run below the autograd keys must not lose it."""
    conformance(ReturnsParameter().eval(), (randn(3, 4),), (randn(5, 4, seed=1),), static_options)


class GradBlock(nn.Module):
    """An ``enable_grad`` block in forward: eager's result carries history even under ``no_grad``."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.enable_grad():
            return self.linear(x).sigmoid()


def test_a_model_that_turns_grad_on_runs_with_the_autograd_keys():
    model = GradBlock().eval()
    x = randn(3, 4)
    module = StaticModule(model, (x,))
    assert "_below_autograd" not in module.prepared.program.function_source()
    with torch.no_grad():
        expected = model(x)
        got = module.runtime()(x)
    assert got.requires_grad == expected.requires_grad is True
    assert (got.grad_fn is None) == (expected.grad_fn is None)
    torch.testing.assert_close(got, expected)
