"""Measurement of one case, outside pytest's plugin: the equivalence protocol catches each way a
runtime can be wrong, memory observation counts real allocations, and the per-op profile names
ops (the session summary's tests are in test_suite_summary.py)."""

from __future__ import annotations

import json

import pytest
import torch

from srbench.inputs import Inputs
from srbench.measure import (
    EquivalenceError,
    check_equivalence,
    eager_answer,
    measure_memory,
    op_profile,
    prepare_case,
)
from srbench.measure.aliasing import aliasing
from srbench.measure.equivalence import difference
from srbench.measure.memory import observe_allocations
from srbench.options import RuntimeOptions
from srbench.suites import CaseSpec

MODEL = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
FIRST, SECOND = Inputs.of(torch.randn(2, 8)), Inputs.of(torch.randn(5, 8))


def eager(*inputs):
    with torch.no_grad():
        return MODEL(*inputs)


def protocol(runtime, **kwargs):
    expected = eager_answer(MODEL, FIRST), eager_answer(MODEL, SECOND)
    return check_equivalence(runtime, FIRST, SECOND, *expected, rtol=1e-5, atol=1e-6, **kwargs)


def test_an_equivalent_runtime_passes_with_its_largest_differences():
    report = protocol(lambda x: eager(x) + 2e-7)
    assert report.runs == 3 and report.outputs == 1
    assert report.max_abs == pytest.approx(2e-7, rel=0.5) and report.max_rel > 0


def test_a_wrong_answer_on_the_second_shape_names_the_run_output_and_differences():
    with pytest.raises(EquivalenceError) as caught:
        protocol(lambda x: eager(x) + (0.5 if x.shape[0] == 5 else 0.0))
    message = str(caught.value)
    assert message.startswith(
        "run 2 (second shape): output output differs from eager: largest absolute difference 0.5,"
    )
    assert "largest relative difference" in message and "(rtol=1e-05, atol=1e-06)" in message


def test_a_complex_difference_is_measured_on_both_parts():
    expected = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex64)
    off_in_imaginary = difference("output", expected + 0.5j, expected)
    assert off_in_imaginary.max_abs == pytest.approx(0.5)
    assert off_in_imaginary.max_rel == pytest.approx(0.5 / abs(1 + 1j))


def test_a_runtime_broken_after_another_shape_fails_on_the_third_run():
    calls = []

    def runtime(x):
        calls.append(x.shape[0])
        return eager(x) * (2 if len(calls) == 3 else 1)

    with pytest.raises(EquivalenceError, match=r"^run 3 \(first shape again\)"):
        protocol(runtime)


def test_a_runtime_that_modifies_its_input_fails():
    def runtime(x):
        out = eager(x)
        x.add_(1)
        return out

    with pytest.raises(EquivalenceError, match=r"run 1 \(first shape\): input args\[0\] was modified"):
        protocol(runtime)


class AddsOneInPlace(torch.nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


def test_inputs_must_end_as_eager_leaves_them():
    """A model that writes its input: a runtime must write it too, eager's values under the tolerance."""
    model = AddsOneInPlace()
    expected = eager_answer(model, FIRST), eager_answer(model, SECOND)

    def forgets_the_write(x):
        return (x + 1) * 2

    def writes_too_much(x):
        x.add_(2)
        return x * 2 - 2

    assert check_equivalence(model, FIRST, SECOND, *expected, rtol=0, atol=0).runs == 3
    for runtime in (forgets_the_write, writes_too_much):
        with pytest.raises(
            EquivalenceError, match=r"run 1 \(first shape\): input args\[0\] differs from what eager leaves in it"
        ):
            check_equivalence(runtime, FIRST, SECOND, *expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(FIRST.args[0] + 1, expected[0].inputs_after.args[0])  # the originals are untouched


def test_outputs_overwritten_by_the_next_run_fail_unless_the_runtime_manages_outputs():
    buffers: dict[int, torch.Tensor] = {}

    def reuses_one_buffer(x):
        out = buffers.setdefault(0, torch.empty(16, 4))[: x.shape[0]]
        out.copy_(eager(x))
        return out

    with pytest.raises(EquivalenceError, match="an output of run 1, still held by the caller, output was modified"):
        protocol(reuses_one_buffer)
    buffers.clear()
    assert protocol(reuses_one_buffer, outputs_may_be_reused=True).runs == 3


def test_a_different_number_of_outputs_fails():
    with pytest.raises(EquivalenceError, match=r"returned 2 output values \(\[0\], \[1\]\), eager 1"):
        protocol(lambda x: (eager(x), eager(x)))


def test_observed_allocations_count_fresh_tensors_and_not_preallocated_ones():
    x = torch.randn(64, 256)
    fresh = observe_allocations(lambda: torch.mul(x, x))
    assert fresh.allocations == 1 and fresh.allocated_bytes == fresh.peak_bytes == 64 * 256 * 4
    out = torch.empty(64, 256)
    assert observe_allocations(lambda: torch.mul(x, x, out=out)).allocations == 0


def test_memory_report_of_a_runtime_without_a_plan():
    report = measure_memory(eager, FIRST)
    assert report.planned_bytes is None and report.planned_to_lower_bound is None
    assert report.allocations >= 3 and report.peak_bytes >= 2 * 4 * 4
    assert json.loads(json.dumps(report.to_json()))["allocations"] == report.allocations


def test_op_profile_falls_back_to_the_profiler_by_aten_op():
    profile = op_profile(eager, FIRST, iterations=2)
    assert "aten::addmm" in profile and all(ms > 0 for ms in profile.values())
    assert list(profile.values()) == sorted(profile.values(), reverse=True)


def test_prepare_case_builds_the_zoo_model_and_the_runtime_with_the_case_tolerance():
    spec = CaseSpec("s", "mlp", "static_runtime", RuntimeOptions(), 3, None, 0.5, 1)
    prepared = prepare_case(spec)
    assert prepared.first_inputs.args[0].shape[0] == 3
    assert (prepared.rtol, prepared.atol) == (prepared.model_case.rtol, 0.5)
    assert prepared.check_equivalence().max_abs <= 1e-5


def test_aliasing_names_each_output_by_its_path_and_what_it_shares_memory_with():
    x = torch.randn(4, 4)
    assert aliasing(x[1:], Inputs((x,), {})) == [("output", ["input args[0] (overlapping)"])]
    assert aliasing((x, x.t(), torch.ones(2)), Inputs((x,), {})) == [
        ("output [0]", ["input args[0] (the same view)"]),
        ("output [1]", ["input args[0] (overlapping)", "output [0] (overlapping)"]),
        ("output [2]", []),
    ]
