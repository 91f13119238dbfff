"""The ONNX Runtime plugin: registered, eager's answers on two shapes and on structured outputs,
one session per input signature, and a reason for every model or machine it cannot take."""

from __future__ import annotations

import sys

import pytest
import torch

from srbench.inputs import Inputs
from srbench.runtimes import RuntimeOptions, RuntimeUnavailable, UnsupportedRuntime, get_runtime, runtime_names

pytest.importorskip("onnxruntime", reason="the onnx extra (onnxruntime) is not installed")
pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript (the onnx extra)")


class TwoOutputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, unused: torch.Tensor) -> dict[str, torch.Tensor]:
        y = self.linear(x)
        return {"logits": y, "probabilities": y.softmax(-1)}


class Bessel(torch.nn.Module):
    """``torch.onnx`` has no translation for ``prims.bessel_j0``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)


def test_onnxruntime_is_a_registered_runtime():
    assert "onnxruntime" in runtime_names()


def test_matches_eager_on_two_shapes_with_a_session_per_shape():
    torch.manual_seed(0)
    model = TwoOutputs().eval()
    first = Inputs.of(torch.randn(2, 8), torch.randn(3))
    second = Inputs.of(torch.randn(5, 8), torch.randn(3))
    runtime = get_runtime("onnxruntime")(model, first, RuntimeOptions())
    for inputs in (first, second, first):
        got = inputs.call(runtime)
        with torch.no_grad():
            want = inputs.call(model)
        assert set(got) == set(want)
        for key in want:
            torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6)
    assert len(runtime._sessions) == 2


def test_a_model_it_cannot_export_is_unsupported_with_the_reason():
    with pytest.raises(UnsupportedRuntime, match=r"cannot export the model: .*bessel_j0"):
        get_runtime("onnxruntime")(Bessel(), Inputs.of(torch.randn(4)), RuntimeOptions())


def test_without_onnxruntime_the_reason_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(RuntimeUnavailable, match=r"onnxruntime is not installed \(pip install 'srbench\[onnx\]'\)"):
        get_runtime("onnxruntime")(TwoOutputs(), Inputs.of(torch.randn(2, 8), torch.randn(3)), RuntimeOptions())


def test_only_the_cpu_provider():
    with pytest.raises(UnsupportedRuntime, match="CPU provider only"):
        get_runtime("onnxruntime")(
            TwoOutputs(), Inputs.of(torch.randn(2, 8), torch.randn(3)), RuntimeOptions(device="cuda")
        )


def test_a_suite_skips_its_cases_with_the_reason_where_onnxruntime_is_missing(tmp_path, monkeypatch):
    from srbench.pytest_plugin.run import run_case
    from srbench.suites import load_suite

    suite = tmp_path / "ort.yaml"
    suite.write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [onnxruntime]\n")
    (spec,) = load_suite(suite).cases
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(pytest.skip.Exception, match="RuntimeUnavailable: onnxruntime is not installed"):
        run_case(spec, None, [])


class ReturnsItsInput(torch.nn.Module):
    """Returns an input as is (the exporter renames that ONNX input ``x_orig``) and ``None``s
    (which the ONNX graph does not return)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple:
        return x, None, {"sum": x + y, "none": None}


class WritesItsInput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + 1


def test_an_input_returned_as_is_and_none_outputs_give_eagers_answer():
    x, y = torch.randn(3), torch.randn(3)
    runtime = get_runtime("onnxruntime")(ReturnsItsInput(), Inputs.of(x, y), RuntimeOptions())
    got = runtime(x, y)
    assert got[1] is None and got[2]["none"] is None
    torch.testing.assert_close(got[0], x)
    torch.testing.assert_close(got[2]["sum"], x + y)


def test_a_model_that_writes_its_input_is_unsupported_with_the_reason():
    # the exported ONNX graph returns the model's outputs only: the write would be lost
    with pytest.raises(UnsupportedRuntime, match=r"writes x in place, and the ONNX graph .* drops such writes"):
        get_runtime("onnxruntime")(WritesItsInput(), Inputs.of(torch.randn(3)), RuntimeOptions())


class ComplexInOut(torch.nn.Module):
    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.fft.fft(x.to(torch.complex64)).conj(), z * 2, (z * z).abs()


def test_complex_inputs_and_outputs_are_complex_as_in_eager():
    # ONNX has no complex tensors: the exported graph takes and returns their real views
    from srbench.measure.equivalence import compare

    x, z = torch.randn(2, 4), torch.randn(3, dtype=torch.complex64)
    runtime = get_runtime("onnxruntime")(ComplexInOut(), Inputs.of(x, z), RuntimeOptions())
    compare(runtime(x, z), ComplexInOut()(x, z), rtol=1e-5, atol=1e-5, run="complex")


class ReturnsAnInt(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple:
        return x + 1, 3


def test_an_export_failure_says_where_it_happened():
    # the innermost error alone is "AttributeError: 'int' object has no attribute 'name'"
    where = r"no attribute 'name' \(Error when translating node return \(add, 3\)\)$"
    with pytest.raises(UnsupportedRuntime, match=where):
        get_runtime("onnxruntime")(ReturnsAnInt(), Inputs.of(torch.randn(2)), RuntimeOptions())
