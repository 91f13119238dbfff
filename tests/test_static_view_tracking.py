"""Nodes run below ``ADInplaceOrView`` (issue 10, :mod:`srbench.static.view_tracking`): only
functional ops, where prepare-time timing finds it quicker and where they make an output (whose
version counter the caller reads, as eager's), never where they rewrite a managed output, and
with nothing a caller sees changed: outputs' values, ``_base``, ``_version`` and
``requires_grad``, their aliasing of inputs, parameters and each other, inputs' and buffers'
version counters, and the caller's dispatch state after a run and after one that raised. Each
also on two streams, run by a worker thread beside the caller's (the dispatch state is per
thread, so each thread switches its own) and issued from one thread as a CUDA program is."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch import nn

import srbench.static.resolve as resolve
import srbench.static.view_tracking as view_tracking
from srbench.static import StaticModule, StaticOptions
from srbench.static.view_tracking import (
    MEASURED_BELOW,
    ViewTracking,
    excluded,
    functional,
    measured_tracking,
)

SWITCH_ON = "_tls_set_excluded(_ad_inplace_or_view, True)"
# What a timing can decide for a call whose results are the same either way (NEEDED, for one
# whose results differ, is tested with such a call: test_a_call_whose_results_differ_below_the_key_keeps_it).
TIMED = [ViewTracking.KEPT, ViewTracking.SKIPPED, ViewTracking.EITHER]
# The resolver's check of a call's results, which it gives the decision.
SAME = resolve._same_copy


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Mixed(nn.Module):
    """Functional ops (an embedding bag, whose kernel makes inner views; a linear; a sigmoid), an
    in-place write of a buffer and of an input, and outputs that view the input, a parameter and
    an intermediate."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.table = nn.EmbeddingBag(10, 4, mode="sum")
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> tuple[torch.Tensor, ...]:
        bag = self.table(ids, offsets)
        hidden = self.linear(x).sigmoid()
        self.count.add_(1)
        x.mul_(2)
        return hidden + bag, x.t(), hidden[0], self.linear.weight.t(), bag, hidden


class Chain(nn.Module):
    """Out variants whose first result is planned into the output's bytes (hosting)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def mixed_inputs() -> tuple[torch.Tensor, ...]:
    return randn(3, 4), torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([0, 2, 4])


class Streams(enum.Enum):
    """How a test's program runs: on one stream, on two (a fixed schedule, kept whatever it
    measures) with a worker thread running stream 1, or on two issued from the caller's thread as
    a CUDA program is (stand-in streams on the CPU: the ``cuda_issued`` fixture)."""

    ONE = "one"
    THREADS = "threads"
    CUDA_ISSUED = "cuda-issued"


@pytest.fixture(params=list(Streams), ids=[s.value for s in Streams])
def streams(request: pytest.FixtureRequest) -> Streams:
    if request.param is Streams.CUDA_ISSUED:
        request.getfixturevalue("cuda_issued")
    return request.param


def prepared(model: nn.Module, inputs: tuple[Any, ...], streams: Streams, **options: Any) -> StaticModule:
    """``model`` prepared to run as ``streams`` says."""
    several = {"streams": 2, "scheduler": "parallel_steps"} if streams is not Streams.ONE else {}
    module = StaticModule(model, inputs, StaticOptions(**several, **options))
    assert (module.prepared.program.streams is not None) == bool(several)
    return module


def on_streams(module: StaticModule, *nodes: str) -> list[int]:
    """The stream each of ``nodes`` runs on (0: the caller's; one stream: all 0)."""
    if module.prepared.program.streams is None:
        return [0] * len(nodes)
    stream_of = module.prepared.schedule.stream_of()
    return [stream_of[node] for node in nodes]


@pytest.fixture
def decided(monkeypatch: pytest.MonkeyPatch) -> Callable[[ViewTracking], None]:
    """``decided(tracking)``: every functional node is given ``tracking`` instead of a timing."""

    def force(tracking: ViewTracking) -> None:
        monkeypatch.setattr(
            resolve,
            "measured_tracking",
            lambda op, run, seconds, best_time, same: tracking if functional(op) else ViewTracking.KEPT,
        )

    return force


def observed(outputs: Any, named: dict[str, torch.Tensor]) -> list[tuple[Any, ...]]:
    """What a caller sees of each output besides its values: shape, ``requires_grad``, version
    counter, and which named tensor (or other output's storage) is its ``_base``."""
    rows = []
    tensors = [t for t in torch.utils._pytree.tree_leaves(outputs) if isinstance(t, torch.Tensor)]
    for tensor in tensors:
        base = tensor._base
        if base is None:
            owner = None
        else:
            owner = next((name for name, value in named.items() if value is base), "another tensor")
        storage = tensor.untyped_storage()._cdata
        shares = [i for i, other in enumerate(tensors) if other.untyped_storage()._cdata == storage]
        rows.append((tuple(tensor.shape), tensor.requires_grad, tensor._version, owner, tuple(shares)))
    return rows


def versions(tensors: Iterator[torch.Tensor]) -> list[int]:
    return [tensor._version for tensor in tensors]


def below_key(module: StaticModule) -> set[str]:
    """The nodes of the module's program that run below ``ADInplaceOrView``."""
    return {plan.node.name for plan in module.prepared.plans if plan.tracking is ViewTracking.SKIPPED}


@pytest.mark.parametrize("tracking", TIMED, ids=[t.value for t in TIMED])
def test_a_run_below_view_tracking_changes_nothing_the_caller_sees(decided, tracking, streams):
    """The program with every functional node below ``ADInplaceOrView`` and the program with none
    there both give what eager gives under ``no_grad``, run after run (on two streams, the
    embedding bag on stream 0, the linear and its sigmoid on stream 1)."""
    decided(tracking)
    torch.manual_seed(0)
    model = Mixed().eval()
    x, ids, offsets = mixed_inputs()
    module = prepared(model, (x.clone(), ids, offsets), streams)
    assert on_streams(module, "embedding_bag", "sigmoid") == [0, int(streams is not Streams.ONE)]
    # the nodes making outputs run below it either way (their version counters, as eager's)
    makers = {"embedding_bag", "sigmoid", "add"}
    assert below_key(module) == (makers | {"linear"} if tracking is ViewTracking.SKIPPED else makers)
    runtime = module.runtime()
    for _ in range(3):
        mine, theirs = x.clone(), x.clone()
        before = versions(iter((mine, theirs, model.count)))
        got = runtime(mine, ids, offsets)
        middle = versions(iter((mine, theirs, model.count)))
        with torch.no_grad():
            expected = model(theirs, ids, offsets)
        after = versions(iter((mine, theirs, model.count)))
        for answer, result in zip(expected, got):
            torch.testing.assert_close(result, answer, rtol=0, atol=0)
        named_got = {"input": mine, "weight": model.linear.weight}
        named_expected = {"input": theirs, "weight": model.linear.weight}
        assert observed(got, named_got) == observed(expected, named_expected)
        assert middle[0] - before[0] == after[1] - middle[1] == 1  # the input written once, each way
        assert middle[2] - before[2] == after[2] - middle[2] == 1  # the buffer likewise
        assert not excluded()


class ChainOutputs(Chain):
    """The chain's result (written by the last layer's ``addmm``, whose kernel fills its fresh
    result through an inner write), a function of it, and one written in place after."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        y = self.layers(x)
        return y, torch.relu(y), (y * 2).add_(1)


class TwoChains(nn.Module):
    """:class:`ChainOutputs` and a second chain beside it, whose result is an output too: on two
    streams each chain's last layer runs on a stream of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = ChainOutputs(), Chain()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*self.left(x), self.right(x))


# the last layer of each chain (each making an output): on two streams, on streams 0 and 1
LAST_LAYERS = ("linear_2", "linear_5")


@pytest.mark.parametrize("tracking", TIMED, ids=[t.value for t in TIMED])
def test_outputs_keep_eagers_version_counters(decided, tracking, streams):
    """Outputs that out variants write (a run buffer hosting intermediates), or that a kernel
    fills through an inner write, come back at eager's version, run after run, whatever the
    timing decided for the other nodes: eager's are fresh results (version 0, 1 for the one
    written in place). With the key kept, ``addmm``'s result came back at version 1; so it did on
    two streams, where nothing switched the key (the chain of the caller's thread, and both
    chains of a CUDA program; a worker thread ran its chain through the autograd kernels, below
    no key at all)."""
    decided(tracking)
    torch.manual_seed(0)
    model = TwoChains().eval()
    x = randn(2, 8)
    module = prepared(model, (x,), streams)
    assert on_streams(module, *LAST_LAYERS) == [0, int(streams is not Streams.ONE)]
    runtime = module.runtime()
    for _ in range(3):
        got = runtime(x)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert observed(got, {"input": x}) == observed(expected, {"input": x})
        assert versions(iter(got)) == [0, 0, 1, 0]


@pytest.mark.parametrize("tracking", TIMED, ids=[t.value for t in TIMED])
def test_a_managed_output_rewritten_by_the_next_run_says_so(decided, tracking, streams):
    """``manage_output_tensors``: the next run rewrites the caller's output in place, so its
    version counter moves, and a backward that saved its old value raises, as after any in-place
    write. With the out variant below ``ADInplaceOrView`` (where a timing put it) the counter
    stayed, and the backward gave a wrong gradient without a word. Each chain's output, made on
    stream 0 and (on two streams) on stream 1."""
    decided(tracking)
    torch.manual_seed(0)
    model = TwoChains().eval()
    x = randn(2, 8)
    module = prepared(model, (x,), streams, manage_output_tensors=True)
    assert on_streams(module, *LAST_LAYERS) == [0, int(streams is not Streams.ONE)]
    runtime = module.runtime()
    first = runtime(x)
    for held in (first[0], first[3]):
        weight = torch.ones(2, 8, requires_grad=True)
        saved = (weight * held).sum()  # saves ``held`` for the weight's gradient
        version = held._version
        runtime(x + 1)
        assert held._version > version
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            saved.backward()


def test_nodes_gaining_nothing_join_the_run_below_the_key(decided):
    """Functional nodes whose timing found no gain either way (:attr:`ViewTracking.EITHER`) run in
    the state the node before them left: the chain's middle layer, between its first layer and
    ReLU (hosted in the output's bytes) and its last layer (the output's), all three below the
    key for the output's version counter, runs below it with them: one switch where the middle
    layer kept the key and made two (about 0.15 µs a call on the MLP)."""
    decided(ViewTracking.EITHER)
    model = Chain().eval()
    x = randn(2, 8)
    module = StaticModule(model, (x,))
    assert below_key(module) == {"linear", "relu", "linear_2"}
    assert module.prepared.program.function_source().count(SWITCH_ON) == 1
    runtime = module.runtime()
    for _ in range(2):
        got = runtime(x)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert observed(got, {"input": x}) == observed(expected, {"input": x})
        assert not excluded()


class Columns(nn.Module):
    """Views of the input read only by functional ops (Wide & Deep's ids per feature), one view
    also returned, and one also written in place."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        total = x[:, 0].sigmoid() + x[:, 1].sigmoid() + x[:, 2].sigmoid()
        returned = x[:, 3]
        written = x[:, 4].clone()
        column = written[1:]
        column.mul_(2)
        return total + returned.sigmoid(), returned, written, column.sigmoid()


def test_views_only_skipped_nodes_read_need_no_switch_of_their_own(decided):
    """The three columns only sigmoids read run inside one run of skipped nodes; the returned
    column and the view written in place keep the key, so the caller sees eager's ``_base`` and
    version counters."""
    decided(ViewTracking.SKIPPED)
    model = Columns().eval()
    x = randn(4, 5)
    module = StaticModule(model, (x,))
    source = module.prepared.program.function_source()
    # the sigmoids of columns 0-2 and their adds, the clone, the sigmoids of columns 3 and 4 (with
    # a switch around each column's view there would be five)
    assert source.count(SWITCH_ON) == 3, source
    runtime = module.runtime()
    for _ in range(2):
        got = runtime(x)
        with torch.no_grad():
            expected = model(x)
        for answer, result in zip(expected, got):
            torch.testing.assert_close(result, answer, rtol=0, atol=0)
        assert observed(got, {"input": x}) == observed(expected, {"input": x})


_FAIL = [False]
_SEEN: list[bool] = []  # whether ADInplaceOrView was skipped when the op ran


@torch.library.custom_op("srbench_test_views::many_views", mutates_args=())
def many_views(x: torch.Tensor) -> torch.Tensor:
    """A functional op whose kernel makes many views inside itself (as embedding_bag's does)."""
    _SEEN.append(excluded())
    if _FAIL[0]:
        raise ValueError("many_views asked to fail")
    return torch.stack(x.unbind(0)).sum(0)  # unbind's kernel makes one select (a view) per row


@many_views.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[1:])


class ManyViews(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return many_views(x), x[0]


def timed_by_key(kept: float, skipped: float) -> Callable[[Callable[[], Any]], float]:
    """A stand-in for the prepare-time clock (unit tests time nothing real: the machines are
    shared): ``run`` is called once, and its time is ``skipped`` where the op inside it ran below
    ``ADInplaceOrView`` (as :data:`_SEEN` recorded), else ``kept``; ops that record nothing take 1."""

    def best_time(run: Callable[[], Any]) -> float:
        seen = len(_SEEN)
        run()
        if len(_SEEN) == seen:
            return 1.0
        return skipped if _SEEN[-1] else kept

    return best_time


def test_a_node_runs_below_view_tracking_where_its_timing_is_quicker(monkeypatch: pytest.MonkeyPatch):
    """Not forced: the decision is the resolver's, on its own two calls of the node (the switched
    one really below the key), here with a clock that finds the switched call of the op quicker:
    it runs so; the MLP's out variants (equal times) do not: only its last layer, which makes the output."""
    monkeypatch.setattr(view_tracking, "MEASURED_BELOW", float("inf"))  # a loaded machine's op time
    clock = timed_by_key(kept=2.0, skipped=1.0)
    monkeypatch.setattr(
        resolve,
        "measured_tracking",
        lambda op, run, seconds, best_time, same: measured_tracking(op, run, seconds, clock, same),
    )
    model = ManyViews().eval()
    x = randn(32, 4)
    module = StaticModule(model, (x,))
    assert SWITCH_ON in module.prepared.program.function_source()
    _SEEN.clear()
    total, row = module.runtime()(x)
    assert _SEEN == [True]
    torch.testing.assert_close(total, x.sum(0))
    assert row._base is x
    chain = StaticModule(Chain().eval(), (randn(1, 8),))
    assert below_key(chain) == {"linear_2"}  # the output's layer only (eager's version counter)


@contextlib.contextmanager
def failing() -> Iterator[None]:
    """``many_views`` raises within."""
    _FAIL[0] = True
    try:
        yield
    finally:
        _FAIL[0] = False


def dispatch_state() -> tuple[bool, bool]:
    """Whether this thread's dispatch includes and excludes ``ADInplaceOrView`` (inference mode
    takes it out of the included keys, as its guard in the generated code puts it in the excluded)."""
    key = torch._C.DispatchKey.ADInplaceOrView
    return torch._C._dispatch_tls_is_dispatch_key_included(key), torch._C._dispatch_tls_is_dispatch_key_excluded(key)


def test_the_callers_dispatch_state_comes_back_after_a_run_and_after_a_raise(decided):
    """The caller's ``ADInplaceOrView`` state comes back after a run, under its inference mode as
    outside it, and after an op below the key raised."""
    decided(ViewTracking.SKIPPED)
    x = randn(8, 4)
    runtime = StaticModule(ManyViews().eval(), (x,)).runtime()
    outside = dispatch_state()
    assert outside == (True, False)
    with torch.inference_mode():
        inside = dispatch_state()
        runtime(x.clone())
        assert dispatch_state() == inside
    assert dispatch_state() == outside
    with failing(), pytest.raises(ValueError, match="many_views asked to fail"):
        runtime(x)
    assert dispatch_state() == outside
    _SEEN.clear()
    _, row = runtime(x)  # usable again, the view still tracked
    assert _SEEN == [True] and row._base is x


class ManyViewsOnTwoThreads(nn.Module):
    """On two streams: ``many_views`` on the caller's thread, and on a worker's a sigmoid (below
    the key), a returned view of the input (keeping it) and ``many_views`` again (below it)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return many_views(x), many_views(x.sigmoid()).sigmoid(), many_views(x * 2), x[0]


def test_each_stream_thread_switches_its_own_dispatch_state(decided):
    """Each thread of a stream program runs its nodes as chosen: ``many_views`` below the key on
    the caller's thread and on the worker's (a worker thread starts with the default dispatch
    state, which the caller's switch does not change: there it ran through the autograd kernel),
    the view between them with it (its ``_base``); after a run that raised below the key on
    both threads, the next run likewise, and the caller's state is its own again."""
    decided(ViewTracking.SKIPPED)
    x = randn(8, 4)
    module = prepared(ManyViewsOnTwoThreads().eval(), (x,), Streams.THREADS)
    assert on_streams(module, "many_views", "sigmoid", "select", "many_views_2") == [0, 1, 1, 1]
    runtime = module.runtime()
    outside = dispatch_state()
    for _ in range(2):
        _SEEN.clear()
        *_, row = runtime(x)
        assert _SEEN == [True] * 3 and row._base is x
        assert dispatch_state() == outside
        with failing(), pytest.raises(ValueError, match="many_views asked to fail"):
            runtime(x)
        assert dispatch_state() == outside


def op_recording_the_key() -> None:
    _SEEN.append(excluded())


def test_the_decision_times_the_call_both_ways_and_only_functional_ops():
    quicker, within_margin = timed_by_key(kept=1.0, skipped=0.97), timed_by_key(kept=1.0, skipped=0.99)
    add = torch.ops.aten.add.Tensor
    assert measured_tracking(add, op_recording_the_key, 1e-6, quicker, SAME) is ViewTracking.SKIPPED
    assert measured_tracking(add, op_recording_the_key, 1e-6, within_margin, SAME) is ViewTracking.EITHER
    assert measured_tracking(torch.ops.aten.add_.Tensor, op_recording_the_key, 1e-6, quicker, SAME) is ViewTracking.KEPT
    assert measured_tracking(torch.ops.aten.t.default, op_recording_the_key, 1e-6, quicker, SAME) is ViewTracking.KEPT
    assert measured_tracking(add, op_recording_the_key, MEASURED_BELOW, quicker, SAME) is ViewTracking.EITHER
    assert measured_tracking(add, op_recording_the_key, None, quicker, SAME) is ViewTracking.EITHER
    assert not excluded()


class TailQuery(nn.Module):
    """A linear of the rows after the first 20 (LUKE's entity queries: a 3-d strided view), whose
    weight requires grad as a model's parameters do: eager's ``matmul`` folds it into one ``mm``
    for that, and the weight's ``t()`` made below ``ADInplaceOrView`` carries no ``requires_grad``,
    so there it ran ``bmm``, bits apart."""

    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(64, 64)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.query(hidden[:, 20:])


def always_switched(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], Any]], float]:
    """A margin and a time bound under which the switched call always wins the timing, and a
    clock that times every call alike."""
    monkeypatch.setattr(view_tracking, "MARGIN", -1e9)
    monkeypatch.setattr(view_tracking, "MEASURED_BELOW", float("inf"))
    return lambda run: (run(), 1.0)[1]


@pytest.mark.parametrize("weight_requires_grad", [True, False], ids=["parameter", "frozen"])
def test_a_call_whose_results_differ_below_the_key_keeps_it(monkeypatch, weight_requires_grad):
    """Timed quicker below the key, ``linear`` of a strided 3-d input stays through it where its
    weight requires grad (its results differ bit for bit), and goes below it where not; the
    program's results are eager's bit for bit either way, at two shapes."""
    clock = always_switched(monkeypatch)
    torch.manual_seed(0)
    model = TailQuery().eval().requires_grad_(weight_requires_grad)
    hidden = randn(2, 22, 64)
    weight, bias = model.query.weight, model.query.bias
    decision = measured_tracking(
        torch.ops.aten.linear.default, lambda: torch._C._nn.linear(hidden[:, 20:], weight, bias), 1e-6, clock, SAME
    )
    assert decision is (ViewTracking.NEEDED if weight_requires_grad else ViewTracking.SKIPPED)
    runtime = StaticModule(model, (hidden,)).runtime()
    for shape in ((2, 22, 64), (3, 23, 64)):
        x = randn(*shape, seed=1)
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(runtime(x), expected, rtol=0, atol=0)
    assert below_key(runtime.module) == (set() if weight_requires_grad else {"linear"})
