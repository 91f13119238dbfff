"""The checker is checked: each test plants one bug in srbench (or in a runtime under test) and
asserts that srbench's plan validator or its equivalence protocol flags it, with a message that
says what went wrong. Each planted bug is also shown to matter: without the bug, the same check
passes on the same model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import srbench.memory.lifetimes as lifetimes
import srbench.static.codegen as codegen
import srbench.static.resolve as resolve
from srbench.inputs import Inputs
from srbench.measure import EquivalenceError, check_equivalence, eager_answer
from srbench.memory import PlanError
from srbench.memory.records import MemoryPlan, TensorUsageRecord
from srbench.planners import PLANNERS, plan_memory
from srbench.runtimes import EagerMode, RuntimeOptions, eager_mode_of, get_runtime
from srbench.static import OutVariantRegistry, StaticModule, StaticOptions
from srbench.static.calls import Call


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 32)
        self.second = torch.nn.Linear(32, 32)
        self.third = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = torch.relu(self.first(x))
        g = torch.tanh(self.second(h))
        return self.third(g + h), g.sum(1)


FIRST, SECOND = (
    (torch.randn(3, 8, generator=torch.Generator().manual_seed(1)),),
    (torch.randn(5, 8, generator=torch.Generator().manual_seed(2)),),
)


@pytest.fixture
def model(one_thread) -> torch.nn.Module:
    torch.manual_seed(0)
    return MLP().eval()


def protocol(runtime, model, *, rtol=1e-5, atol=1e-6, mode=EagerMode.NO_GRAD, **kwargs):
    expected = eager_answer(model, FIRST, mode), eager_answer(model, SECOND, mode)
    return check_equivalence(runtime, FIRST, SECOND, *expected, rtol=rtol, atol=atol, **kwargs)


# -- a planner that overlaps two live tensors ---------------------------------------------------


def overlapping(records, *, alignment=64):
    """greedy_by_size's plan, then one tensor moved onto another that is read after it is written."""
    plan = plan_memory(records, "greedy_by_size", alignment=alignment).plan
    offsets = dict(plan.offsets)
    victim, clobber = next(
        (a, b)
        for a in records
        for b in records
        if a.id != b.id and a.first < b.first < a.last and b.size <= a.size and offsets[a.id] != offsets[b.id]
    )
    offsets[clobber.id] = offsets[victim.id]
    return MemoryPlan("overlapping", offsets, plan.total_bytes)


@pytest.fixture
def overlapping_planner(monkeypatch):
    known = PLANNERS.entry_points()
    planted = type("EntryPoint", (), {"load": staticmethod(lambda: overlapping)})()
    monkeypatch.setattr(PLANNERS, "entry_points", lambda: {**known, "overlapping": planted})


def test_the_validator_flags_a_planner_that_overlaps_two_live_tensors(overlapping_planner):
    records = [TensorUsageRecord("a", 0, 4, 256), TensorUsageRecord("b", 2, 6, 128), TensorUsageRecord("c", 5, 7, 64)]
    assert plan_memory(records, "greedy_by_size").plan.total_bytes == 384  # sound without the bug
    with pytest.raises(PlanError, match=r"tensors 'a' \[0, 256\) and 'b' \[0, 128\) are alive at the same step"):
        plan_memory(records, "overlapping")


def test_the_static_runtime_refuses_the_overlapping_plan_at_prepare_time(overlapping_planner, model):
    with pytest.raises(PlanError, match=r"plan 'overlapping': tensors '\w+' .* and '\w+' .* share bytes") as caught:
        StaticModule(model, FIRST, StaticOptions(planner="overlapping"))
    assert len(caught.value.tensors) == 2


def test_the_equivalence_check_catches_the_overlap_the_validator_was_kept_from_seeing(
    overlapping_planner, monkeypatch, model
):
    """Two safety nets: with the validator switched off, the clobbered tensor gives a wrong answer."""
    monkeypatch.setattr("srbench.planners.validate_plan", lambda *args, **kwargs: None)
    runtime = StaticModule(model, FIRST, StaticOptions(planner="overlapping")).runtime()
    with pytest.raises(EquivalenceError, match=r"^run 1 \(first shape\): output \[\d\] differs from eager"):
        protocol(runtime, model)


# -- a runtime that returns a slab view the next run overwrites ---------------------------------


@pytest.fixture
def outputs_planned_as_intermediates(monkeypatch):
    """The lifetime analysis forgets that graph outputs outlive the run: they go into the slab."""
    result = lifetimes._Analysis.result

    def forgetful(self):
        analysis = result(self)
        return dataclasses.replace(analysis, records=analysis.all_records, output_records=())

    monkeypatch.setattr(lifetimes._Analysis, "result", forgetful)


def test_an_output_in_the_slab_overwritten_by_the_next_run_is_flagged(outputs_planned_as_intermediates, model):
    runtime = StaticModule(model, FIRST, StaticOptions(cleanup_activations=False)).runtime()
    with pytest.raises(
        EquivalenceError, match=r"^run 2 \(second shape\): an output of run 1, still held by the caller, \[\d\] was"
    ):
        protocol(runtime, model)


def test_an_output_in_a_released_slab_is_flagged_without_reading_it(outputs_planned_as_intermediates, model):
    """With cleanup the slab's storage is resized to 0 after the run: reading the output would
    crash the process, so the protocol checks its memory first."""
    runtime = StaticModule(model, FIRST, StaticOptions(cleanup_activations=True)).runtime()
    with pytest.raises(
        EquivalenceError,
        match=r"^run 1 \(first shape\): output \[\d\] cannot be read: it views \d+ bytes of a storage that now "
        r"holds 0: the runtime released memory it returned",
    ):
        protocol(runtime, model)


@pytest.mark.parametrize("cleanup", [True, False], ids=["cleanup", "keep"])
def test_without_the_planted_bug_outputs_survive_the_next_run(cleanup, model):
    runtime = StaticModule(model, FIRST, StaticOptions(cleanup_activations=cleanup)).runtime()
    assert protocol(runtime, model).runs == 3


# -- an out variant off by one ulp --------------------------------------------------------------


class Tanh(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


def one_ulp_up(x, *, out):
    torch.nextafter(torch.tanh(x), torch.tensor(float("inf")), out=out)


@pytest.mark.parametrize("planted", [False, True], ids=["exact", "one-ulp"])
def test_an_out_variant_off_by_one_ulp_is_flagged_by_an_exact_check(planted, model, one_thread):
    """Out variants run eager's own kernels, so srbench is bitwise eager here, and an exact
    check has the resolution to see a single ulp (the prepare-time check, which must accept
    other kernels' rounding, lets it through)."""
    registry = OutVariantRegistry()
    if planted:
        registry.register("aten::tanh", one_ulp_up)
    tanh = Tanh()
    runtime = StaticModule(tanh, FIRST, StaticOptions(), out_variants=registry).runtime()
    if not planted:
        assert protocol(runtime, tanh, rtol=0, atol=0).max_abs == 0
        return
    with pytest.raises(EquivalenceError) as caught:
        protocol(runtime, tanh, rtol=0, atol=0)
    message = str(caught.value)
    assert message.startswith("run 1 (first shape): output output differs from eager: largest absolute difference")
    largest = float(message.split("largest absolute difference ")[1].split(",")[0])
    assert 0 < largest <= 2 * 2 * torch.finfo(torch.float32).eps  # one ulp of tanh, doubled


# -- outputs permuted ---------------------------------------------------------------------------


def test_permuted_outputs_are_flagged(model):
    runtime = StaticModule(model, FIRST).runtime()
    with pytest.raises(EquivalenceError, match=r"^run 1 \(first shape\): output \[0\] differs from eager"):
        protocol(lambda x: tuple(reversed(runtime(x))), model)


class Named(torch.nn.Module):
    def forward(self, x):
        return {"double": x * 2, "half": x / 2, "pair": (x + 1, x - 1)}


def named_protocol(runtime):
    named = Named()
    return protocol(runtime, named)


def test_outputs_swapped_between_keys_are_flagged(one_thread):
    runtime = StaticModule(Named(), FIRST).runtime()

    def swapped(x):
        out = runtime(x)
        return {"double": out["half"], "half": out["double"], "pair": out["pair"]}

    with pytest.raises(EquivalenceError, match=r"output \['double'\] differs from eager"):
        named_protocol(swapped)
    with pytest.raises(EquivalenceError, match=r"output \['pair'\]\[0\] differs from eager"):
        named_protocol(lambda x: {**runtime(x), "pair": tuple(reversed(runtime(x)["pair"]))})


def test_keys_in_another_order_are_the_same_answer_but_other_containers_are_not(one_thread):
    runtime = StaticModule(Named(), FIRST).runtime()
    assert named_protocol(lambda x: dict(reversed(runtime(x).items()))).runs == 3
    with pytest.raises(EquivalenceError, match=r"\['pair'\] is a list in the runtime's answer, a tuple in eager's"):
        named_protocol(lambda x: {**runtime(x), "pair": list(runtime(x)["pair"])})
    with pytest.raises(EquivalenceError, match=r"the output has keys \['double', 'half', 'twice'\]"):
        named_protocol(lambda x: {"twice" if k == "pair" else k: v for k, v in runtime(x).items()})


# -- an input modified in place -----------------------------------------------------------------


def test_an_in_place_rewrite_that_writes_the_input_is_flagged(monkeypatch, model):
    """A rewrite that runs ``relu`` in place: right values, but on the caller's tensor."""
    working = resolve.Resolver._working_fallbacks

    def in_place_relu(self, node, op, reference):
        if str(op) == "aten.relu.default" and node.args[0].op == "placeholder":
            return [Call("Tensor.relu_", torch.Tensor.relu_, node.args)]
        return working(self, node, op, reference)

    monkeypatch.setattr(resolve.Resolver, "_working_fallbacks", in_place_relu)

    class ReluFirst(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 3

    relu_first = ReluFirst()
    runtime = StaticModule(relu_first, (FIRST[0].clone(),), StaticOptions(enable_out_variant=False)).runtime()
    with pytest.raises(EquivalenceError, match=r"^run 1 \(first shape\): input args\[0\] was modified"):
        protocol(runtime, relu_first)
    monkeypatch.undo()
    runtime = StaticModule(relu_first, FIRST, StaticOptions(enable_out_variant=False)).runtime()
    assert protocol(runtime, relu_first).runs == 3


# -- outputs that track gradients unlike eager's -------------------------------------------------


class GradBlock(torch.nn.Module):
    """An ``enable_grad`` block in forward: its result requires grad in eager, even under ``no_grad``."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        with torch.enable_grad():
            return self.linear(x).tanh(), x * 2


def test_a_runtime_that_drops_requires_grad_is_flagged(monkeypatch, one_thread):
    """The program run below the autograd dispatch keys although the model turns grad mode on:
    eager's values, but the block's result carries no history."""
    grad_block = GradBlock().eval()
    monkeypatch.setattr(codegen, "enables_grad", lambda module: False)
    runtime = StaticModule(grad_block, FIRST).runtime()
    with pytest.raises(
        EquivalenceError,
        match=r"^run 1 \(first shape\): output \[0\] tracks gradients unlike eager's: it requires grad in "
        r"eager's answer, not in the runtime's$",
    ):
        protocol(runtime, grad_block)
    monkeypatch.undo()
    assert protocol(StaticModule(grad_block, FIRST).runtime(), grad_block).runs == 3


def test_a_runtime_that_adds_requires_grad_is_flagged(model):
    """The model itself called with grad mode on: eager's values, with history eager's answer
    (under ``no_grad``) has not."""
    with pytest.raises(
        EquivalenceError,
        match=r"output \[0\] tracks gradients unlike eager's: it requires grad in the runtime's answer, not in "
        r"eager's$",
    ):
        protocol(model, model)
    with torch.no_grad():
        assert protocol(model, model).runs == 3


def test_each_runtime_is_compared_with_eager_called_as_it_calls_the_model(one_thread):
    """The eager plugin runs under ``inference_mode``, where the model's ``enable_grad`` block
    records nothing: its reference is eager called so; srbench's is eager under ``no_grad``."""
    grad_block = GradBlock().eval()
    for name, mode in (("eager", EagerMode.INFERENCE_MODE), ("srbench", EagerMode.NO_GRAD)):
        runtime_class = get_runtime(name)
        assert eager_mode_of(runtime_class) is mode
        assert (
            protocol(runtime_class(grad_block, Inputs.coerce(FIRST), RuntimeOptions()), grad_block, mode=mode).runs == 3
        )
    with pytest.raises(EquivalenceError, match="tracks gradients unlike eager's"):
        protocol(get_runtime("eager")(grad_block, Inputs.coerce(FIRST), RuntimeOptions()), grad_block)


# -- tolerances that switch the check off -------------------------------------------------------


@pytest.mark.parametrize(
    ("rtol", "atol"), [(float("inf"), 0.0), (0.0, float("nan")), (-1e-5, 1e-6), (1e-5, float("-inf"))]
)
def test_tolerances_that_switch_the_check_off_are_refused(rtol, atol, model):
    with pytest.raises(ValueError, match=r"(rtol|atol) must be a finite number >= 0, got"):
        protocol(lambda x: model(x), model, rtol=rtol, atol=atol)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "-1"])
@pytest.mark.parametrize("where", ["tolerance: {%s: %s}", "tolerance_rules: [{runtime: eager, %s: %s}]"])
@pytest.mark.parametrize("key", ["rtol", "atol"])
def test_suites_refuse_tolerances_that_switch_the_check_off(tmp_path, key, where, value):
    from srbench.suites import SuiteError, load_suite

    path = tmp_path / "loose.yaml"
    path.write_text("axes: {models: {names: [mlp]}, runtimes: [eager]}\n" + where % (key, value) + "\n")
    expected = "is less than the minimum of 0" if value.startswith("-") else "expected a finite number, got "
    with pytest.raises(SuiteError, match=rf"loose.yaml: tolerance(_rules\[0\])?\.{key}: .*{expected}"):
        load_suite(path)
