"""The static runtime against eager on the zoo's built-in models, with the protocol of PyTorch
Static Runtime's tests: the first inputs, inputs of the second shape, the first inputs again,
inputs never modified. Large vision models are represented by one (ResNet-18) to keep this fast;
``benchmarks/runtime_latency.py`` runs every built-in model."""

from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

from srbench.static import StaticModule, StaticOptions
from srbench.zoo import load_zoo

DEFAULT = StaticOptions()
EVERYTHING_OFF = StaticOptions(enable_out_variant=False, cleanup_activations=False, manage_output_tensors=False)
MANAGED_OUTPUTS = StaticOptions(cleanup_activations=False, manage_output_tensors=True)

CASES = [
    ("mlp", DEFAULT),
    ("mlp", EVERYTHING_OFF),
    ("dlrm", DEFAULT),
    ("dlrm", MANAGED_OUTPUTS),
    ("deep_and_wide", DEFAULT),
    ("bert_encoder", DEFAULT),
    ("gpt_decoder", MANAGED_OUTPUTS),
    ("lstm_lm", DEFAULT),
    pytest.param("resnet18", DEFAULT, marks=pytest.mark.slow),
]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def option_id(options: StaticOptions) -> str:
    return {DEFAULT: "default", EVERYTHING_OFF: "all-off", MANAGED_OUTPUTS: "managed-outputs"}[options]


@pytest.mark.parametrize("name, options", CASES, ids=lambda v: option_id(v) if isinstance(v, StaticOptions) else v)
def test_builtin_model_matches_eager(name, options):
    zoo = load_zoo()
    if name not in zoo.cases:
        pytest.skip(f"zoo has no model {name!r} here")
    case = zoo.get(name)
    model = case.model()
    first, second = case.example_inputs(0), case.example_inputs(1)
    runtime = StaticModule(model, first, options, name=name).runtime()
    for inputs in (first, second, first):
        before = [x.clone() for x in inputs.tensors()]
        actual = inputs.call(runtime)
        with torch.inference_mode():
            expected = inputs.call(model)
        actual_leaves, actual_spec = pytree.tree_flatten(actual)
        expected_leaves, expected_spec = pytree.tree_flatten(expected)
        assert actual_spec == expected_spec
        for got, want in zip(actual_leaves, expected_leaves):
            torch.testing.assert_close(got, want, rtol=case.rtol, atol=case.atol)
        assert all(torch.equal(x, kept) for x, kept in zip(inputs.tensors(), before)), "the runtime modified an input"
