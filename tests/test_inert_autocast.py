"""Autocast regions that cannot change their ops run as plain nodes of the program
(srbench.graph.inert_autocast); a region of the program that casts is lowered to its casts
(srbench.graph.lowered_autocast); a region in a control-flow op's sub-block runs as eager runs it.
Each model is checked against eager, dtypes included and bit for bit, under the default options,
two streams and the pytest plugin's runtime."""

from __future__ import annotations

import operator

import pytest
import torch
from torch import nn

from srbench.graph.inert_autocast import NO_AUTOCAST, UNKNOWN, Ambient, Effect, Region, run_inert_regions_plain
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.runtimes import get_runtime
from srbench.static import StaticModule
from srbench.static.choose import RunAs
from srbench.static.errors import AmbientAutocastError

_WRAP = torch.ops.higher_order.wrap_with_autocast


@torch.autocast("cuda", enabled=False)
def _rotate(x: torch.Tensor) -> torch.Tensor:
    """As rotary-embedding-torch's helpers: float math under a disabled cuda autocast."""
    return torch.cat((-x[..., 1::2], x[..., ::2]), dim=-1).float() * x.sin()


class DisabledCudaRegion(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(_rotate(self.linear(x)))


class DisabledInsideEnabled(nn.Module):
    """A disabled cuda region inside an enabled cpu one (which casts), and a disabled cpu region
    inside the enabled cpu one (which undoes its casts: float32 out)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cast = self.linear(x)
            rotated = _rotate(cast)
            with torch.autocast("cpu", enabled=False):
                plain = self.linear(x)
        return cast, rotated, plain


class EnabledInsideDisabled(nn.Module):
    """An enabled cpu region inside a disabled cpu one (no enclosing region enables cpu's)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast("cpu", enabled=False):
            plain = self.linear(x)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                cast = self.linear(plain)
        return plain, cast


class Casts(nn.Module):
    """A bfloat16 cpu autocast entered in forward: it changes the dtypes of its ops."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.linear(x).relu()


class BranchUnderEnabled(nn.Module):
    """A disabled cpu region in the branches of a ``cond`` inside an enabled cpu region: the
    branch, prepared as a block of its own, runs within its parent's autocast, so its region
    undoes the parent's casts (float32 out)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def plain(self, v: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            return self.linear(v)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.cond(x.sum() > 0, lambda v: self.plain(v).sin(), lambda v: self.plain(v).cos(), (x,))


class DisabledCudaAroundBranch(nn.Module):
    """A disabled cuda region around a ``cond`` (export keeps it as ``_enter_autocast`` and
    ``_exit_autocast`` calls) and an index that can be out of range."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", enabled=False):
            y = torch.cond(x.sum() > 0, lambda v: self.linear(v).sin(), lambda v: self.linear(v).cos(), (x,))
            return y.index_select(0, index)


_RUNS = [StaticOptions(), StaticOptions(streams=2), None]
_RUN_IDS = ["defaults", "two_streams", "plugin"]


def _runner(model: nn.Module, args: tuple, options: StaticOptions | None):
    if options is None:
        return get_runtime("srbench")(model, Inputs.of(*args))
    return StaticModule(model, args, options).runtime()


def _same_as_eager(model: nn.Module, args: tuple, options: StaticOptions | None) -> None:
    run = _runner(model, args, options)
    for _ in range(2):  # the first call and a steady one
        got = run(*args)
        with torch.no_grad():
            expected = model(*args)
        got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
        assert [g.dtype for g in got] == [e.dtype for e in expected]
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert not torch._C._is_any_autocast_enabled()


def _after_inert_regions(model: nn.Module, args: tuple) -> torch.fx.GraphModule:
    """``model``'s export with its inert regions run plain, as preparing does before it lowers
    the regions left."""
    graph_module = torch.export.export(model, args).graph_module
    run_inert_regions_plain(graph_module, NO_AUTOCAST)
    return graph_module


def _region_kinds(model: nn.Module, args: tuple) -> list[str]:
    """The region calls left among the top-level program's nodes."""
    plans = StaticModule(model, args).prepared.plans
    return [plan.kind for plan in plans if "autocast" in plan.kind]


def _x() -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(0))


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


@pytest.mark.parametrize("options", _RUNS, ids=_RUN_IDS)
def test_a_disabled_cuda_region_on_cpu_runs_as_plain_nodes(options):
    model = DisabledCudaRegion().eval()
    assert _region_kinds(model, (_x(),)) == []
    _same_as_eager(model, (_x(),), options)


@pytest.mark.parametrize("options", _RUNS, ids=_RUN_IDS)
def test_regions_within_an_enabled_region_keep_what_they_change(options):
    """The enabled cpu region is kept by the inert pass; within it, the disabled cuda region runs
    as plain nodes of its body and the disabled cpu one is kept. Then the enabled region is
    lowered, its nested disabled one included."""
    model = DisabledInsideEnabled().eval()
    captured = _after_inert_regions(model, (_x(),))
    (outer,) = [node for node in captured.graph.nodes if node.target is _WRAP]
    body = getattr(captured, outer.args[4].target)
    assert [node.args[:3] for node in body.graph.nodes if node.target is _WRAP] == [("cpu", torch.bfloat16, False)]
    assert _region_kinds(model, (_x(),)) == []
    _same_as_eager(model, (_x(),), options)
    assert [t.dtype for t in model(_x())] == [torch.bfloat16, torch.float32, torch.float32]


@pytest.mark.parametrize("options", _RUNS, ids=_RUN_IDS)
def test_an_enabled_region_inside_a_disabled_one_is_kept_alone(options):
    model = EnabledInsideDisabled().eval()
    captured = _after_inert_regions(model, (_x(),))
    assert [node.args[:3] for node in captured.graph.nodes if node.target is _WRAP] == [("cpu", torch.bfloat16, True)]
    assert _region_kinds(model, (_x(),)) == []
    _same_as_eager(model, (_x(),), options)


@pytest.mark.parametrize("options", _RUNS, ids=_RUN_IDS)
def test_a_region_that_casts_is_lowered_to_its_casts(options):
    """The region's call is gone from the program: the weight's, bias's and input's casts to
    bfloat16 are nodes of it, and the linear layer's op runs on their results."""
    model = Casts().eval()
    assert _region_kinds(model, (_x(),)) == []
    graph = StaticModule(model, (_x(),)).prepared.captured.graph
    casts = [node for node in graph.nodes if node.target is torch.ops.aten._to_copy.default]
    assert [n.kwargs.get("dtype") for n in casts] == [torch.bfloat16] * 3
    _same_as_eager(model, (_x(),), options)
    assert model(_x()).dtype == torch.bfloat16


def test_a_lowered_regions_casts_of_weights_are_folded_at_prepare():
    """What autocast makes of the weight and bias is the same at every call, so it is computed
    once when the program is prepared (as any op of constants only); the input's cast runs at
    every call, and a second call on other values is still eager's, bit for bit."""
    model = Casts().eval()
    plans = StaticModule(model, (_x(),)).prepared.plans
    casts = {plan.node.args[0].name: plan.how for plan in plans if plan.node.target is torch.ops.aten._to_copy.default}
    assert sorted(how.name for how in casts.values()) == ["CONSTANT", "CONSTANT", "OUT"]
    assert casts["x"] is not RunAs.CONSTANT
    _same_as_eager(model, (_x(),), StaticOptions())
    _same_as_eager(model, (_x() * 3 - 1,), StaticOptions())


@pytest.mark.parametrize("options", _RUNS, ids=_RUN_IDS)
def test_a_region_in_a_sub_block_is_kept_where_its_parent_may_cast(options):
    """The branches' disabled cpu region would be inert in a program of its own; within the
    parent's enabled region it is what gives float32."""
    model = BranchUnderEnabled().eval()
    for x in (_x(), -_x().abs()):
        _same_as_eager(model, (x,), options)
    assert model(_x()).dtype == torch.float32


@pytest.mark.parametrize("options", _RUNS, ids=_RUN_IDS)
def test_a_disabled_cuda_region_of_calls_on_cpu_is_dropped(options):
    model = DisabledCudaAroundBranch().eval()
    args = (_x(), torch.tensor([0, 3]))
    assert _region_kinds(model, args) == []
    _same_as_eager(model, args, options)
    with pytest.raises(IndexError):
        _runner(model, args, options)(_x(), torch.tensor([0, 9]))
    assert not torch._C._is_any_autocast_enabled()


@pytest.mark.parametrize(
    ("region", "ambient", "touches", "effect"),
    [
        (Region("cuda", False), NO_AUTOCAST, True, Effect.DISABLES_WHAT_IS_OFF),
        (Region("cuda", False), Ambient(frozenset({"cuda"})), True, Effect.MAY_CAST),
        (Region("cuda", False), Ambient(frozenset({"cuda"})), False, Effect.NO_TENSOR_ON_ITS_DEVICE),
        (Region("cpu", False), UNKNOWN, True, Effect.MAY_CAST),
        (Region("cpu", True), NO_AUTOCAST, True, Effect.MAY_CAST),
        (Region("cuda", True), NO_AUTOCAST, False, Effect.NO_TENSOR_ON_ITS_DEVICE),
        (Region("privateuseone", True), NO_AUTOCAST, False, Effect.MAY_CAST),
    ],
)
def test_what_makes_a_region_inert(region, ambient, touches, effect):
    assert region.effect(ambient, lambda device: touches) is effect


def test_entering_regions_tracks_the_devices_enabled():
    state = NO_AUTOCAST.entered(Region("cpu", True)).entered(Region("cuda", True)).entered(Region("cpu", False))
    assert state == Ambient(frozenset({"cuda"}))
    assert UNKNOWN.entered(Region("cpu", False)) == UNKNOWN


def test_a_call_on_a_runtime_thread_under_the_callers_autocast_is_refused():
    """``run_async`` ran the call on a thread of its own, where the caller's autocast is not
    active: it was neither refused nor followed (float32 where eager gives bfloat16)."""
    model = DisabledCudaRegion().eval()
    runtime = StaticModule(model, (_x(),)).runtime()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(_x()).dtype == torch.bfloat16
        with pytest.raises(AmbientAutocastError):
            runtime.run_async(_x())
    torch.testing.assert_close(runtime.run_async(_x()).result(), model(_x()), rtol=0, atol=0)


class CudaRegions(nn.Module):
    """A float16 cuda region (it casts) and a disabled cuda one (off where it runs), on CUDA."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast("cuda", dtype=torch.float16):
            cast = self.linear(x)
        return cast, _rotate(self.linear(x))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_a_casting_region_is_lowered_and_a_disabled_one_runs_plain():
    model = CudaRegions().eval().cuda()
    x = _x().cuda()
    assert _region_kinds(model, (x,)) == []
    run = StaticModule(model, (x,)).runtime()
    with torch.no_grad():
        expected = model(x)
    for _ in range(2):
        got = run(x)
        assert [g.dtype for g in got] == [e.dtype for e in expected] == [torch.float16, torch.float32]
        torch.testing.assert_close(got, expected)  # CUDA's kernels: default tolerances


class EnabledAroundBranchAndParallelWork(nn.Module):
    """A bfloat16 cpu region around a ``cond`` (kept as ``_enter_autocast``/``_exit_autocast``
    calls) and four independent chains a scheduler can spread over streams."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.cond(x.sum() > 0, lambda v: v.sin(), lambda v: v.cos(), (x,))
            return self.a(y).relu(), self.b(y).relu(), self.a(x).tanh(), self.b(x).tanh()


@pytest.mark.parametrize("streams", [2, 4])
def test_a_region_entered_by_a_call_keeps_its_ops_on_the_thread_that_entered_it(streams):
    """Forced onto several streams, ops of the region ran on other threads, where it does not
    hold (float32 out where eager gives bfloat16), and its exit on a thread other than its
    enter's left the caller's thread under autocast."""
    model = EnabledAroundBranchAndParallelWork().eval()
    options = StaticOptions(streams=streams, scheduler="parallel_steps", measure_choices=False)
    _same_as_eager(model, (_x(),), options)
    assert StaticModule(model, (_x(),), options).prepared.streams_used == 1


class _Matmul(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.ops.aten.mm.default(x, x),)


class _MatmulByTorchFunction(nn.Module):
    """The same product called as a plain function (as a graph holding something other than
    ATen ops would): not lowered, the region kept."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.mm(x, x),)


@pytest.mark.parametrize(("body", "lowered"), [(_Matmul, 1), (_MatmulByTorchFunction, 0)])
def test_only_regions_of_aten_ops_are_lowered(body, lowered):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from srbench.graph.lowered_autocast import lower_casting_regions

    root = nn.Module()
    root.body = torch.fx.symbolic_trace(body())
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = FakeTensorMode().from_tensor(_x()[:, :4])
    region = graph.call_function(_WRAP, ("cpu", torch.bfloat16, True, False, graph.get_attr("body"), x))
    graph.output((graph.call_function(operator.getitem, (region, 0)),))
    graph_module = torch.fx.GraphModule(root, graph)
    assert lower_casting_regions(graph_module) == lowered
    casts = [n.kwargs.get("dtype") for n in graph_module.graph.nodes if n.target is torch.ops.aten._to_copy.default]
    assert casts == [torch.bfloat16] * 2 * lowered  # each operand cast: autocast caches only weights
    if lowered:
        (result,) = graph_module(_x()[:, :4])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = torch.mm(_x()[:, :4], _x()[:, :4])
        assert result.dtype == torch.bfloat16
        torch.testing.assert_close(result, expected, rtol=0, atol=0)
