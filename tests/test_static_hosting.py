"""Intermediates planned into the bytes of a run's fresh outputs (srbench.memory.hosting): the plans
are valid across the slab and the hosts, they shrink the slab where the outputs are as large as
the intermediates (the MLP), and the outputs stay the caller's: fresh at every call, eager's
geometry, aliased as eager's."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

from srbench.measure.memory import observe_allocations
from srbench.memory.hosting import Host, Hosting, HostPlan, estimated_peak, plan_hosting, validate_hosting
from srbench.memory.records import PlanError, TensorUsageRecord, lower_bound
from srbench.planners import plan_memory, planner_names
from srbench.static import RuntimePool, StaticModule, StaticOptions
from srbench.zoo import load_zoo

UNIT = 2048


def _chain() -> tuple[list[TensorUsageRecord], TensorUsageRecord]:
    """An MLP's records: two intermediates of one unit, each read by the next op, then the output."""
    return [TensorUsageRecord("a", 1, 3, UNIT), TensorUsageRecord("b", 3, 5, UNIT)], TensorUsageRecord(
        "out", 5, 6, UNIT
    )


def _whole(records: list[TensorUsageRecord], steps: int = 8) -> list[int]:
    """A slab held whole through the run (no cleanup): its plan's total at every step."""
    return [plan_memory(records).plan.total_bytes if records else 0] * steps


def test_the_chain_hosts_the_intermediate_that_dies_before_the_output_is_written():
    slab, out = _chain()
    hosting = plan_hosting(slab, {"a", "b"}, [Host("out", 5, UNIT)], unplanned=[], outputs=[out], held=_whole)
    # b is read by the op that writes the output: only a can be hosted
    assert hosting.placement == {"a": ("out", 0)} and hosting.allocations == {"out": 1}
    rest = [record for record in slab if record.id not in hosting.placement]
    plan = plan_memory(rest)
    validate_hosting(rest, plan.plan, [out], hosting)
    assert plan.plan.total_bytes == UNIT  # was two units
    # slab + output: two units (eager's peak), where the slab of two units and the output made three
    assert estimated_peak(_whole(rest), [], [out], hosting.allocations) == 2 * UNIT
    assert estimated_peak(_whole(slab), [], [out]) == 3 * UNIT


def test_nothing_is_hosted_where_the_output_made_early_would_raise_the_peak():
    # the slab peaks late (c and d at the output's write): hosting a would only add the output early
    slab = [
        TensorUsageRecord("a", 1, 2, UNIT),
        TensorUsageRecord("c", 3, 5, UNIT),
        TensorUsageRecord("d", 4, 5, UNIT),
    ]
    out = TensorUsageRecord("out", 5, 6, UNIT)
    fallback = [TensorUsageRecord("f", 1, 2, 4 * UNIT)]  # a fallback op's result, outside the slab
    hosting = plan_hosting(
        slab, {"a", "c", "d"}, [Host("out", 5, UNIT)], unplanned=fallback, outputs=[out], held=_whole
    )
    assert hosting.plans == ()


def test_the_hosted_records_fit_the_output_s_bytes_at_every_step():
    slab = [TensorUsageRecord(name, 1, 2, UNIT) for name in "abc"]  # three units alive at once
    out = TensorUsageRecord("out", 4, 5, 2 * UNIT)
    hosting = plan_hosting(slab, {"a", "b", "c"}, [Host("out", 4, 2 * UNIT)], unplanned=[], outputs=[out], held=_whole)
    assert len(hosting.placement) == 2
    assert hosting.plans[0].result.plan.total_bytes <= 2 * UNIT


def _hosting(records: list[TensorUsageRecord], offsets: dict[str, int], host: Host) -> Hosting:
    plan = plan_memory(records)
    plan = type(plan)(
        plan=type(plan.plan)("test", offsets, max(offsets[r.id] + r.size for r in records)),
        lower_bound=lower_bound(records),
        seconds=0.0,
        num_tensors=len(records),
    )
    return Hosting((HostPlan(host, tuple(records), plan),))


def test_the_validator_refuses_a_hosted_tensor_alive_when_its_output_is_written():
    out = TensorUsageRecord("out", 5, 6, UNIT)
    late = TensorUsageRecord("b", 3, 5, UNIT)  # read by the op writing the output
    with pytest.raises(PlanError, match="share bytes"):
        validate_hosting([], None, [out], _hosting([late], {"b": 0}, Host("out", 5, UNIT)))


def test_the_validator_refuses_overlapping_hosted_tensors_a_host_too_small_and_a_tensor_placed_twice():
    out = TensorUsageRecord("out", 5, 6, UNIT)
    a, b = TensorUsageRecord("a", 1, 2, UNIT // 2), TensorUsageRecord("b", 2, 3, UNIT // 2)
    with pytest.raises(PlanError, match="share bytes"):
        validate_hosting([], None, [out], _hosting([a, b], {"a": 0, "b": 64}, Host("out", 5, UNIT)))
    with pytest.raises(PlanError, match="more than its"):
        validate_hosting([], None, [out], _hosting([a, b], {"a": 0, "b": UNIT}, Host("out", 5, UNIT)))
    slab_plan = plan_memory([a]).plan
    with pytest.raises(PlanError, match="placed twice"):
        validate_hosting([a], slab_plan, [out], _hosting([a], {"a": 0}, Host("out", 5, UNIT)))
    with pytest.raises(PlanError, match="not a graph output"):
        validate_hosting([], None, [], _hosting([a], {"a": 0}, Host("out", 5, UNIT)))


@pytest.mark.parametrize("batch", [1, 16])
def test_the_mlp_s_slab_holds_one_activation_and_the_output_hosts_the_other(batch, one_thread):
    case = load_zoo().get("mlp")
    model = case.model()
    inputs = case.example_inputs(0, batch=batch)
    prepared = StaticModule(model, inputs, StaticOptions(measure_choices=False)).prepared
    activation = batch * 512 * 4
    assert prepared.slab_bytes == activation  # two activations before: the first layer's is hosted
    assert prepared.hosted_bytes == activation and prepared.managed_share == 1.0
    host = prepared.hosting.plans[0]
    records = {record.id: record for record in prepared.analysis.output_records}
    validate_hosting(
        [r for r in prepared.analysis.records if r.id in {m.storage for m in prepared.managed}],
        prepared.plan.plan,
        prepared.analysis.output_records,
        prepared.hosting,
    )
    assert host.host.capacity == activation and host.host.id in records


class ManyOutputs(nn.Module):
    """An output that hosts (``y``), a view of it, an input returned as is, and a small output
    that cannot host what dies before it (larger than its bytes)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        s = torch.tanh(x).sum(1, keepdim=True)
        y = x * s
        z = torch.exp(y).sum(0)
        return y, y.t(), x, z


class Mixed(nn.Module):
    """Hosted intermediates of another dtype (``argmax``: int64 in a float32 output) and of
    other shapes than the output's, one of them detached in place (a view would refuse it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        i = torch.argmax(x.view(64, 8, 8), dim=2)
        g = torch.gather(x, 1, i)
        half = torch.tanh(x[:, :32]).detach_()
        f = half.sum(1, keepdim=True) + g.sum(1, keepdim=True)
        return x * f


class ElementwiseChain(nn.Module):
    """Every tensor the output's size, made by elementwise ops: their results are the same bit for
    bit in any buffer (a GEMM's may not be: on the GPU machine's CPU and torch 2.11, ``addmm``
    gave other last bits than ``linear`` on some buffers, and the exact check of candidates then
    took another call there)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.sigmoid(x * 2)
        b = torch.relu(a.t().t() - 0.5)
        return b * 3


class Chain(nn.Module):
    """The MLP's shape: every tensor the output's size; a view of a hosted tensor on the way."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second, self.last = nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.relu(self.first(x))
        b = torch.relu(self.second(a.t().t()))
        return self.last(b)


MODELS = {"many_outputs": ManyOutputs, "mixed": Mixed, "chain": Chain}


@pytest.mark.parametrize("planner", planner_names())
def test_every_planner_places_the_hosted_records(planner, one_thread):
    torch.manual_seed(0)
    model, x = Chain(), torch.randn(64, 64)
    module = StaticModule(model, (x,), StaticOptions(planner=planner, measure_choices=False))
    hosting = module.prepared.hosting
    assert hosting is not None and all(plan.result.plan.planner == planner for plan in hosting.plans)
    torch.testing.assert_close(module.runtime()(x), model(x))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_hosting_gives_eager_s_results_under_every_option(name, static_options, conformance):
    torch.manual_seed(0)
    model = MODELS[name]()
    module = conformance(model, (torch.randn(64, 64),), (torch.randn(64, 64),), static_options)
    hosts = not static_options.manage_output_tensors and static_options.enable_out_variant
    assert (module.prepared.hosting is not None) == hosts


@pytest.mark.parametrize("name", sorted(MODELS))
def test_outputs_are_fresh_eager_s_storage_and_survive_the_next_call(name, one_thread):
    torch.manual_seed(0)
    model = MODELS[name]()
    x = torch.randn(64, 64)
    runtime = StaticModule(model, (x,), StaticOptions(measure_choices=False)).runtime()
    assert runtime.module.prepared.hosting is not None
    first, second = runtime(x), runtime(x + 1)
    expected = model(x)
    flat = [first] if isinstance(first, torch.Tensor) else list(first)
    others = [second] if isinstance(second, torch.Tensor) else list(second)
    eager = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    for got, again, want in zip(flat, others, eager):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)  # not overwritten by the second call
        if got is x:
            continue
        assert got.untyped_storage().data_ptr() != again.untyped_storage().data_ptr()
        assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), want.dtype)
        assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()


def test_a_run_holds_no_more_than_the_slab_and_the_outputs(one_thread):
    torch.manual_seed(0)
    x = torch.randn(64, 64)
    module = StaticModule(Mixed(), (x,), StaticOptions(measure_choices=False))
    runtime = module.runtime()
    runtime(x)
    peak = observe_allocations(lambda: runtime(x)).peak_bytes
    assert module.prepared.slab_bytes == 256  # the gathered and the tanh results, 14 KiB, are in the output's bytes
    assert peak <= module.prepared.slab_bytes + 64 * 64 * 4


class TwoChains(nn.Module):
    """Two of the MLP's chains of one input, added: on one stream the second chain's first result
    is hosted in the output (the first chain's would not lower the slab's peak, its second result
    and the second chain's being alive together at the end); on two streams, the chains run at
    once and nothing is hosted."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
        self.right = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.left(x) + self.right(x)


def test_hosting_is_for_one_stream_only(one_thread):
    torch.manual_seed(0)
    model, x = TwoChains(), torch.randn(64, 64)
    one = StaticModule(model, (x,), StaticOptions(measure_choices=False)).prepared
    assert one.hosting is not None and len(one.hosting.placement) == 1
    several = StaticModule(model, (x,), StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False))
    assert several.prepared.program.streams is not None and several.prepared.hosting is None
    torch.testing.assert_close(several.runtime()(x), model(x))


def test_threads_with_runtimes_of_their_own_keep_their_outputs(one_thread):
    """The outputs that host are allocated per call: runtimes of one module in several threads
    (a pool) never hand two calls the same output, and an output held survives later calls."""
    torch.manual_seed(0)
    model = Chain()
    pool = RuntimePool(StaticModule(model, (torch.randn(64, 64),), StaticOptions(measure_choices=False)))
    assert pool.module.prepared.hosting is not None
    inputs = [torch.randn(64, 64) for _ in range(4)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            held = [pool(inputs[index]) for _ in range(30)]
            assert len({output.untyped_storage().data_ptr() for output in held}) == len(held)
            for output in held:
                torch.testing.assert_close(output, expected[index])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and pool.runtimes_created == 4


def test_the_first_writer_of_an_output_of_its_own_geometry_allocates_it(one_thread):
    """Where the op writing a host first gives the host's geometry itself, it allocates the host
    (one call instead of ``empty_strided`` and the out variant); a host whose first hosted tensor
    has another dtype or shape is still made by ``empty_strided``."""
    torch.manual_seed(0)
    x = torch.randn(64, 64)
    chain = StaticModule(ElementwiseChain(), (x,), StaticOptions(measure_choices=False)).prepared.program
    mixed = StaticModule(Mixed(), (x,), StaticOptions(measure_choices=False)).prepared.program.function_source()
    assert "empty_strided" not in chain.function_source() and "h_mul_1 = _torch_mul(" in chain.function_source()
    assert "h_mul = _empty_strided(" in mixed
