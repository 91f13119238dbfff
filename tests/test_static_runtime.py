"""The static runtime's contracts beyond equivalence: held outputs, threads, slab and plan,
allocations in steady state, bad inputs, unrunnable ops, the out-variant registry, the profile."""

from __future__ import annotations

import threading

import pytest
import torch

from srbench.measure.memory import observe_allocations
from srbench.registry import UnknownPluginError
from srbench.static import (
    InputSignatureError,
    OutVariantRegistry,
    RuntimePool,
    StaticModule,
    StaticOptions,
    UnsupportedOpError,
)
from srbench.static.choose import RunAs

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class TinyMLP(torch.nn.Module):
    """Every intermediate has an out variant; only the output is allocated at run time."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, width)
        self.fc2 = torch.nn.Linear(width, width)
        self.fc3 = torch.nn.Linear(width, 4)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class OutputAliasesIntermediate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)  # in eval mode it returns its input as is

    def forward(self, x):
        a = torch.tanh(x) * 3
        return a.view(-1)[1:], self.drop(a + 1), (a * 2).sum(0)


def eager(model, *inputs):
    with torch.inference_mode():
        return model(*inputs)


@pytest.mark.parametrize("cleanup", [True, False])
@pytest.mark.parametrize("model_class", [TinyMLP, OutputAliasesIntermediate])
def test_output_held_from_run_one_is_not_overwritten_by_run_two(model_class, cleanup):
    torch.manual_seed(0)
    model = model_class().eval()
    first, second = torch.randn(3, 8), torch.randn(3, 8)
    runtime = StaticModule(model, (first,), StaticOptions(cleanup_activations=cleanup)).runtime()
    held = runtime(first)
    expected = [t.clone() for t in torch.utils._pytree.tree_leaves(held)]
    runtime(second)
    runtime(torch.randn(5, 8))  # another shape too
    for tensor, kept in zip(torch.utils._pytree.tree_leaves(held), expected):
        assert torch.equal(tensor, kept)


def test_managed_outputs_are_overwritten_by_the_next_run_as_documented():
    torch.manual_seed(0)
    model = TinyMLP().eval()
    first, second = torch.randn(2, 8), torch.randn(2, 8)
    runtime = StaticModule(model, (first,), StaticOptions(manage_output_tensors=True)).runtime()
    out1 = runtime(first)
    torch.testing.assert_close(out1, eager(model, first))
    out2 = runtime(second)
    assert out2.data_ptr() == out1.data_ptr()  # the arena is reused: run 1's output now holds run 2's
    torch.testing.assert_close(out1, eager(model, second))


def test_four_threads_with_different_inputs_at_once():
    torch.manual_seed(0)
    model = TinyMLP(32).eval()
    module = StaticModule(model, (torch.randn(2, 8),), StaticOptions(cleanup_activations=False))
    pool = RuntimePool(module)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []
    # Eager answers are computed up front: torch.export (run when a thread meets a new shape)
    # patches nn.Module process-wide, so eager modules must not run in other threads meanwhile.
    work = []
    for index in range(4):
        generator = torch.Generator().manual_seed(index)
        inputs = [torch.randn(2 if step % 2 else 1 + index, 8, generator=generator) for step in range(30)]
        work.append([(x, eager(model, x)) for x in inputs])

    def worker(index: int) -> None:
        try:
            barrier.wait()
            for x, expected in work[index]:
                torch.testing.assert_close(pool(x), expected)
        except BaseException as error:  # collected and re-raised in the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[0]
    assert pool.runtimes_created == 4


def test_slab_size_equals_plan_total_and_cleanup_releases_it():
    torch.manual_seed(0)
    model = TinyMLP(64).eval()
    x = torch.randn(4, 8)
    kept = StaticModule(model, (x,), StaticOptions(cleanup_activations=False))
    runtime = kept.runtime()
    runtime(x)
    plan = kept.prepared.plan
    assert plan is not None and plan.plan.total_bytes > 0
    assert runtime.slab_bytes == plan.plan.total_bytes
    assert kept.prepared.managed and all(m.storage in plan.plan.offsets for m in kept.prepared.managed)
    cleaned = StaticModule(model, (x,), StaticOptions(cleanup_activations=True)).runtime()
    cleaned(x)
    assert cleaned.slab_bytes == 0


def test_slab_grows_for_larger_shapes_and_is_never_too_small():
    torch.manual_seed(0)
    model = TinyMLP(64).eval()
    small, large = torch.randn(2, 8), torch.randn(50, 8)
    module = StaticModule(model, (small,), StaticOptions(cleanup_activations=False))
    runtime = module.runtime()
    for x in (small, large, small, large):
        torch.testing.assert_close(runtime(x), eager(model, x))
    large_plan = module.prepared_for((large,)).slab_bytes
    assert large_plan > module.prepared.slab_bytes
    assert runtime.slab_bytes == large_plan  # one slab, grown to the largest plan
    assert module.shapes_prepared == 2


@pytest.mark.parametrize("cleanup", [False, True])
def test_no_allocation_for_managed_tensors_in_steady_state(cleanup):
    torch.manual_seed(0)
    model = TinyMLP(256).eval()
    x = torch.randn(8, 8)
    module = StaticModule(model, (x,), StaticOptions(cleanup_activations=cleanup))
    runtime = module.runtime()
    runtime(x)  # first run binds the slab
    observed = observe_allocations(lambda: runtime(x))
    baseline = observe_allocations(lambda: eager(model, x))
    output_bytes = 8 * 4 * 4
    slab = module.prepared.slab_bytes
    # steady state: the output (fallback, handed to the caller) and, with cleanup, the slab itself
    assert observed.allocations == (2 if cleanup else 1)
    assert observed.allocated_bytes == output_bytes + (slab if cleanup else 0)
    assert baseline.allocations >= 5  # eager allocates every intermediate
    assert observed.allocations < baseline.allocations


def test_disabling_out_variants_manages_nothing():
    torch.manual_seed(0)
    model = TinyMLP().eval()
    x = torch.randn(2, 8)
    module = StaticModule(model, (x,), StaticOptions(enable_out_variant=False))
    assert module.prepared.plan is None and not module.prepared.managed
    assert module.prepared.count(RunAs.OUT) == 0
    torch.testing.assert_close(module.runtime()(x), eager(model, x))


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, y):
        self.calls.add_(1)
        return x * y


@pytest.mark.parametrize(
    "inputs, message",
    [
        (
            (torch.randn(3),),
            r"expected 2 positional arguments, got 1, and no program could be prepared.*"
            r"expected signature \(x: float32\[3\] on cpu, y: float32\[3\] on cpu\)",
        ),
        ((torch.randn(3), torch.randn(3), torch.randn(3)), "expected 2 positional arguments, got 3"),
        ((torch.randn(3), torch.randn(3, device="meta")), r"y must be on cpu, got meta"),
    ],
)
def test_bad_inputs_fail_before_any_op_runs(inputs, message):
    model = Counter()
    runtime = StaticModule(model, (torch.randn(3), torch.randn(3)), name="counter").runtime()
    runtime(torch.randn(3), torch.randn(3))
    assert model.calls.item() == 1  # prepare did not run the model's side effects
    with pytest.raises(InputSignatureError, match=message) as info:
        runtime(*inputs)
    assert "counter" in str(info.value)
    assert model.calls.item() == 1


@pytest.mark.parametrize("y", [torch.ones(3, dtype=torch.int64), 2.0], ids=["int64", "float"])
def test_another_dtype_or_leaf_kind_gets_a_program_of_its_own(y):
    """Refused as unlike the example before; a program of its own now, as a new shape's, whose
    runs write the counter once each, as eager's."""
    model = Counter()
    module = StaticModule(model, (torch.randn(3), torch.randn(3)), name="counter")
    runtime = module.runtime()
    x = torch.randn(3)
    torch.testing.assert_close(runtime(x, y), x * y)
    torch.testing.assert_close(runtime(x, y), x * y)
    assert model.calls.item() == 2 and module.shapes_prepared == 2


# An op with a fake (meta) implementation only: torch.export can trace it, nothing can run it.
torch.library.define("srbench_test::no_kernel", "(Tensor x) -> Tensor")
torch.library.register_fake("srbench_test::no_kernel")(lambda x: torch.empty_like(x))


class UsesNoKernel(torch.nn.Module):
    def forward(self, x):
        return torch.ops.srbench_test.no_kernel(x) + 1


def test_op_that_cannot_run_is_reported_at_prepare_time_with_its_name():
    with pytest.raises(UnsupportedOpError, match="srbench_test::no_kernel") as info:
        StaticModule(UsesNoKernel(), (torch.randn(4),), out_variants=OutVariantRegistry())
    assert info.value.op == "srbench_test::no_kernel"


def test_registered_out_variant_runs_an_op_without_kernel():
    registry = OutVariantRegistry()

    @registry.register("srbench_test::no_kernel")
    def doubled(x, *, out):
        return torch.mul(x, 2, out=out)

    x = torch.randn(4)
    module = StaticModule(UsesNoKernel(), (x,), out_variants=registry)
    torch.testing.assert_close(module.runtime()(x), x * 2 + 1)
    assert any(plan.call is not None and plan.call.fn is doubled for plan in module.prepared.plans)


def test_registered_out_variant_is_preferred_when_it_agrees():
    registry = OutVariantRegistry()
    calls = []

    def tanh_out(x, *, out):
        calls.append(1)
        return torch.tanh(x, out=out)

    registry.register(torch.ops.aten.tanh.default, tanh_out)

    class Tanh(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x) * 2

    x = torch.randn(5)
    runtime = StaticModule(Tanh(), (x,), out_variants=registry).runtime()
    before = len(calls)
    torch.testing.assert_close(runtime(x), torch.tanh(x) * 2)
    assert len(calls) == before + 1


def test_unknown_planner_is_rejected_with_nearest_names():
    with pytest.raises(UnknownPluginError, match="greedy_by_size"):
        StaticModule(TinyMLP(), (torch.randn(1, 8),), StaticOptions(planner="greedy_by_sise"))


@pytest.mark.parametrize("planner", ["naive", "linear_scan", "storage_groups"])
def test_any_planner_gives_the_same_answers(planner):
    torch.manual_seed(0)
    model = OutputAliasesIntermediate().eval()
    x = torch.randn(4, 8)
    module = StaticModule(model, (x,), StaticOptions(planner=planner))
    assert module.prepared.plan.plan.planner == planner
    out = module.runtime()(x)
    for got, want in zip(torch.utils._pytree.tree_leaves(out), torch.utils._pytree.tree_leaves(eager(model, x))):
        torch.testing.assert_close(got, want)


def test_views_of_managed_tensors_are_made_once_not_at_every_run():
    class Reshapes(torch.nn.Module):
        def forward(self, x):
            a = (x * 2).view(2, -1).t()
            return (a + 1).sum()

    module = StaticModule(Reshapes(), (torch.randn(4, 6),))
    prepared = module.prepared
    assert {plan.node.name for plan in prepared.plans if plan.static} == {"view", "t"}
    forward = prepared.program.source.split("def forward_unchecked")[0]
    # the names of the view-tracking switch (view_tracking.py), which prepare-time timing may add
    for name in ("_s_view", "_views_excluded", "_ad_inplace_or_view"):
        forward = forward.replace(name, "")
    assert "view" not in forward and "_Tensor_t" not in forward


def test_profile_reports_every_node_and_serialises():
    torch.manual_seed(0)
    model = TinyMLP().eval()
    x = torch.randn(2, 8)
    module = StaticModule(model, (x,), name="tiny")
    profile = module.runtime().profile((x,), iterations=5, warmup=1)
    assert profile.model == "tiny" and profile.iterations == 5
    assert profile.out_variant_nodes == 4  # fc1, relu, fc2, relu; fc3 is the output
    assert profile.fallback_nodes == 1 and profile.num_nodes == 5
    assert profile.managed_tensors == 4 and profile.slab_bytes == module.prepared.slab_bytes
    assert sum(kind.count for kind in profile.kinds) == len(profile.nodes) == 5
    assert abs(sum(kind.percent for kind in profile.kinds) - 100.0) < 1e-6
    assert profile.total_ms > 0 and profile.setup_ms > 0 and profile.first_iteration_ms > 0
    data = __import__("json").loads(profile.to_json())
    assert data["managed_bytes"] == profile.managed_bytes and len(data["nodes"]) == 5
    table = profile.table()
    assert "aten::linear" in table and "out-variant nodes" in table and "4 of 5" in table


def test_functionalized_graph_writes_mutated_buffers_and_inputs_back():
    class MutatesInput(torch.nn.Module):
        def forward(self, x):
            x.add_(1)
            return x * 2

    model = Counter()
    runtime = StaticModule(model, (torch.randn(3), torch.randn(3)), StaticOptions(decompose=True)).runtime()
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(runtime(x, y), x * y)
    runtime(x, y)
    assert model.calls.item() == 2  # the buffer update reached the model, once per run
    x = torch.zeros(3)
    out = StaticModule(MutatesInput(), (x.clone(),), StaticOptions(decompose=True)).runtime()(x)
    assert torch.equal(x, torch.ones(3)) and torch.equal(out, torch.full((3,), 2.0))
