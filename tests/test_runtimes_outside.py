"""The peer runtime plugins on what models from outside the zoo do (``benchmarks/outside_peers.py``
found each of these): preparing leaves the caller's inputs alone, a traced module refuses a call
it does not fit with the reason, and suites report a refusal at a later call as an expected failure."""

from __future__ import annotations

import pytest
import torch

from srbench.inputs import Inputs
from srbench.runtimes import RuntimeOptions, UnsupportedRuntime, get_runtime


class WritesItsInput(torch.nn.Module):
    """Scripting rejects ``*rest``, so TorchScript traces it; it writes its input in place."""

    def forward(self, x, *rest):
        x.add_(1)
        return x * 2


class StepsOverRows(torch.nn.Module):
    """Traced (``*rest``): the loop is unrolled to the traced call's number of rows."""

    def forward(self, x, *rest):
        total = torch.zeros(x.shape[1])
        for row in x.unbind(0):
            total = total + row
        return total


class StructuredOutput(torch.nn.Module):
    """Traced (``*rest``); returns a ``torch.return_types.max``, a ``None`` and an int, which a
    traced module alone returns as a tuple or cannot return at all."""

    def forward(self, x, *rest):
        return torch.max(x, 1), {"none": None, "rows": 2, "sum": x.sum()}


@pytest.mark.parametrize("name", ["torchscript", "static_runtime"])
def test_a_traced_module_returns_the_models_output_structure(name):
    from srbench.measure.equivalence import compare

    x = torch.randn(2, 5)
    runtime = get_runtime(name)(StructuredOutput(), Inputs.of(x), RuntimeOptions())
    assert runtime.flat is not None  # traced
    compare(runtime(x), StructuredOutput()(x), rtol=1e-6, atol=1e-6, run="traced")


@pytest.mark.parametrize("name", ["torchscript", "static_runtime"])
def test_tracing_leaves_the_example_inputs_as_they_were(name):
    x = torch.zeros(3)
    runtime = get_runtime(name)(WritesItsInput(), Inputs.of(x), RuntimeOptions())
    assert torch.equal(x, torch.zeros(3))  # the model wrote a copy while it was traced
    fresh = torch.zeros(3)
    torch.testing.assert_close(runtime(fresh), torch.full((3,), 2.0))
    assert torch.equal(fresh, torch.ones(3))  # the call itself writes, as eager's does


def test_compiling_leaves_the_example_inputs_as_they_were(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda model, **options: model)  # the first call, without Inductor
    x = torch.zeros(3)
    get_runtime("compile")(WritesItsInput(), Inputs.of(x), RuntimeOptions())
    assert torch.equal(x, torch.zeros(3))


@pytest.mark.parametrize("name", ["torchscript", "static_runtime"])
def test_a_trace_that_does_not_fit_another_shape_is_refused_with_the_reason(name):
    runtime = get_runtime(name)(StepsOverRows(), Inputs.of(torch.randn(4, 3)), RuntimeOptions())
    torch.testing.assert_close(runtime(torch.ones(4, 3)), torch.full((3,), 4.0))
    with pytest.raises(UnsupportedRuntime, match=r"traced it on tensors of shapes \[\(4, 3\)\]; the trace does not"):
        runtime(torch.ones(6, 3))


def test_a_suite_case_refused_at_a_later_call_is_an_expected_failure(tmp_path, monkeypatch):
    from srbench.measure import case
    from srbench.pytest_plugin.run import run_case
    from srbench.suites import load_suite

    class RefusesOtherShapes:
        def __init__(self, model, example, options):
            self.model, self.shape = model, example.args[0].shape

        def __call__(self, x):
            if x.shape != self.shape:
                raise UnsupportedRuntime("cannot export the model at this shape")
            with torch.no_grad():  # an inference runtime: its outputs carry no history
                return self.model(x)

    suite = tmp_path / "later.yaml"
    suite.write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [eager]\n")
    (spec,) = load_suite(suite).cases
    monkeypatch.setattr(case, "get_runtime", lambda name: RefusesOtherShapes)
    with pytest.raises(pytest.xfail.Exception, match="UnsupportedRuntime at a later call: cannot export the model"):
        run_case(spec, None, [])


class SameTensor(torch.nn.Module):
    """Scripted with ``x is y`` on tensors in the graph: an op Static Runtime refuses (as in
    ``nn.TransformerDecoderLayer``)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * 2 if x is y else x - y


def test_static_runtime_names_the_ops_it_refuses():
    with pytest.raises(UnsupportedRuntime, match=r"frozen scripted module: it has ops .* not run: aten::__is__$"):
        get_runtime("static_runtime")(SameTensor(), Inputs.of(torch.randn(3), torch.randn(3)), RuntimeOptions())


class ReturnsItsShape(torch.nn.Module):
    """Traced (``*rest``); returns its input's ``torch.Size``, which the trace fixes."""

    def forward(self, x, *rest):
        return x + 1, x.shape


@pytest.mark.parametrize("name", ["torchscript", "static_runtime"])
def test_a_traced_size_output_stays_a_size_and_other_shapes_are_refused(name):
    runtime = get_runtime(name)(ReturnsItsShape(), Inputs.of(torch.zeros(2, 3)), RuntimeOptions())
    _, size = runtime(torch.zeros(2, 3))
    assert type(size) is torch.Size and size == (2, 3)  # pytree alone rebuilds a tuple
    assert all(type(n) is int for n in size)  # not the 0-dim tensors the tracer made them
    with pytest.raises(UnsupportedRuntime, match=r"returns Python numbers \(torch.Size\(\[2, 3\]\)\) that the trace"):
        runtime(torch.zeros(4, 3))


def test_a_call_of_another_structure_is_refused_with_the_structures_on_one_line():
    runtime = get_runtime("torchscript")(ReturnsItsShape(), Inputs.of(torch.zeros(2, 3)), RuntimeOptions())
    with pytest.raises(UnsupportedRuntime, match=r"^the traced module takes calls shaped \(\(\*,\), \{\}\), not "
                       r"\(\(\*,\), \{'scale': \*\}\)$"):  # fmt: skip
        runtime(torch.zeros(2, 3), scale=1.0)
