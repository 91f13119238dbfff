"""Runtime plugins: found by name, prepared once, give eager's answers on two shapes, and say why
when they cannot take a model."""

from __future__ import annotations

import pytest
import torch

from srbench.inputs import Inputs
from srbench.registry import UnknownPluginError
from srbench.runtimes import RuntimeOptions, UnsupportedRuntime, get_runtime, intra_op_threads, runtime_names
from srbench.runtimes.torchscript import frozen_torchscript


def small_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


class DataDependentBranch(torch.nn.Module):
    """Scripting fails (``**kwargs`` is not TorchScript); tracing works."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x, **options):
        return self.linear(x).relu()


class NeitherScriptNorTrace(torch.nn.Module):
    """Scripting rejects ``*args``; tracing fails (its call raises while traced, as a model that
    converts to NumPy does)."""

    def forward(self, x, *args):
        if torch.jit.is_tracing():
            raise RuntimeError("this model cannot be traced")
        return x


def test_every_declared_runtime_is_registered_and_unknown_names_get_suggestions():
    assert {"eager", "torchscript", "static_runtime", "srbench", "compile"} <= set(runtime_names())
    with pytest.raises(UnknownPluginError, match="did you mean 'eager'"):
        get_runtime("eagre")


@pytest.mark.parametrize("name", ["eager", "torchscript", "static_runtime"])
def test_runtime_matches_eager_on_two_shapes(name):
    model = small_mlp()
    first, second = torch.randn(2, 8), torch.randn(5, 8)
    runtime = get_runtime(name)(model, Inputs.of(first), RuntimeOptions())
    with torch.no_grad():
        for x in (first, second, first):
            torch.testing.assert_close(runtime(x), model(x))


def test_torchscript_traces_what_it_cannot_script():
    model = DataDependentBranch().eval()
    x = torch.randn(3, 8)
    frozen, how, flat = frozen_torchscript(model, Inputs.of(x))
    assert how == "trace" and flat is not None
    torch.testing.assert_close(flat.output(frozen(x)), model(x).detach())


@pytest.mark.parametrize("name", ["torchscript", "static_runtime"])
def test_a_model_that_can_neither_be_scripted_nor_traced_is_unsupported_with_both_reasons(name):
    with pytest.raises(UnsupportedRuntime, match=r"neither script \(.+\) nor trace \(.+\) NeitherScriptNorTrace"):
        get_runtime(name)(NeitherScriptNorTrace(), Inputs.of(torch.randn(2)), RuntimeOptions())


def test_static_runtime_is_cpu_only():
    assert get_runtime("static_runtime").devices == ("cpu",)
    with pytest.raises(UnsupportedRuntime, match="CPU only"):
        get_runtime("static_runtime")(small_mlp(), Inputs.of(torch.randn(2, 8)), RuntimeOptions(device="cuda"))


def test_static_runtime_profiles_time_per_node_kind():
    runtime = get_runtime("static_runtime")(small_mlp(), Inputs.of(torch.randn(2, 8)), RuntimeOptions())
    profile = runtime.op_profile(Inputs.of(torch.randn(2, 8)), 3)
    assert set(profile) == {"aten::linear", "aten::relu"}
    assert all(milliseconds > 0 for milliseconds in profile.values())


def test_only_srbench_reads_the_static_options():
    assert set(get_runtime("srbench").honours) == {
        "planner",
        "enable_out_variant",
        "serve_fallbacks",
        "cleanup_activations",
        "manage_output_tensors",
        "decompose",
        "rewrite",
        "rewrite_rtol",
        "rewrite_atol",
        "streams",
        "scheduler",
        "measure_choices",
        "max_signatures",
    }
    for name in ("eager", "torchscript", "static_runtime", "compile", "onnxruntime"):
        assert get_runtime(name).honours == ()


def test_intra_op_threads_sets_and_restores_the_thread_count():
    before = torch.get_num_threads()
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_a_failing_compilation_is_reported_as_unsupported(monkeypatch):
    def broken_compile(model, **kwargs):
        def compiled(*inputs):
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore detail")

        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    with pytest.raises(
        UnsupportedRuntime, match=r"torch\.compile failed: RuntimeError: InvalidCxxCompiler: No working C"
    ):
        get_runtime("compile")(small_mlp(), Inputs.of(torch.randn(2, 8)), RuntimeOptions())


@pytest.mark.slow  # Inductor generates and compiles C++: 5-20 s on 2 cores
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated")  # torch's own, when recompiling
def test_compiled_runtime_matches_eager_on_two_shapes():
    model = small_mlp()
    first, second = torch.randn(2, 8), torch.randn(5, 8)
    runtime = get_runtime("compile")(model, Inputs.of(first), RuntimeOptions())
    with torch.no_grad():
        for x in (first, second, first):
            torch.testing.assert_close(runtime(x), model(x))
