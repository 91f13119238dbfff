"""Every case the zoo can build here: builds, runs eagerly on both shapes, is deterministic, and
captures with torch.export into a graph that computes what eager does (within the case's tolerance)."""

from __future__ import annotations

from functools import cache

import pytest
import torch
from torch.utils._pytree import tree_leaves

from srbench.graph import capture
from srbench.inputs import Inputs
from srbench.zoo import FAMILIES, ModelCase, load_zoo

CASES = sorted(load_zoo().cases.values(), key=lambda case: case.name)


def run_eager(model: torch.nn.Module, inputs: Inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        return tree_leaves(inputs.call(model))


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@cache
def built(case: ModelCase) -> torch.nn.Module:
    """One instance per case for the whole module (building the CNNs calibrates them: not free)."""
    return case.model()


@pytest.fixture(params=CASES, ids=lambda case: case.name)
def case(request):
    return request.param


def test_case_metadata_is_complete(case):
    assert case.family in FAMILIES
    assert case.description
    assert case.batch_size >= 1 and case.rtol > 0 and case.atol > 0
    assert isinstance(case.dtype, torch.dtype)


def test_case_runs_eagerly_on_both_shapes_and_is_deterministic(case):
    first, second = built(case), case.model()
    assert not first.training and not second.training
    for name, tensor in first.state_dict().items():
        assert torch.equal(tensor, second.state_dict()[name]), f"{case.name}: {name} differs between two builds"
    shapes = [case.example_inputs(0), case.example_inputs(1)]
    assert [x.shape for x in shapes[0].tensors()] != [x.shape for x in shapes[1].tensors()], (
        "shape 1 must differ from shape 0"
    )
    assert case.example_inputs(0, batch=3).tensors()[0].shape[0] == 3
    for shape, inputs in enumerate(shapes):
        again = case.example_inputs(shape).tensors()
        assert all(torch.equal(a, b) for a, b in zip(inputs.tensors(), again)), "inputs are not seeded"
        outputs = run_eager(first, inputs)
        assert outputs and all(torch.isfinite(out).all() for out in outputs)
        assert all(out.dtype == case.dtype for out in outputs if out.is_floating_point())
    again = run_eager(second, shapes[0])
    assert all(torch.equal(a, b) for a, b in zip(run_eager(first, shapes[0]), again)), f"{case.name}: outputs differ"


def test_case_captures_with_torch_export(case):
    model, inputs = built(case), case.example_inputs(0)
    captured = capture(model, inputs, name=case.name)
    assert any(node.op == "call_function" for node in captured.graph.nodes)
    expected = run_eager(model, inputs)
    with torch.no_grad():
        got = tree_leaves(inputs.call(captured.exported.module()))
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=case.rtol, atol=case.atol)


def test_parameter_count_matches_a_real_build(case):
    """Counting on the meta device gives what the real model has."""
    assert case.parameter_count() == sum(p.numel() for p in built(case).parameters())
    if case.published_parameters is not None:
        assert case.parameter_count() == case.published_parameters
