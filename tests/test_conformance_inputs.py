"""Inputs as torch.export takes them: positional and keyword arguments, any pytrees of tensors and
Python scalars. The runtime is called as the model is; a call of another structure gets a program
of its own, and one the model does not take is refused naming the first difference; every runtime
plugin takes keyword arguments (or flattens them) and the transformers zoo models are called with
``attention_mask``."""

from __future__ import annotations

import pytest
import torch

from srbench.inputs import Inputs
from srbench.measure import prepare_case
from srbench.options import RuntimeOptions
from srbench.runtimes import UnsupportedRuntime, get_runtime
from srbench.static import InputSignatureError, StaticModule
from srbench.suites import CaseSpec


class Pytree(torch.nn.Module):
    """Nested containers, keyword arguments, and every kind of Python scalar export specialises."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, pair, *, scale: float = 1.0, mask=None, flag: bool = True, repeat: int = 1, mode: str = "sum"):
        self.calls.add_(1)
        (a, count), b = pair["a"], pair["b"]
        h = self.linear(x + a * b) * scale
        if mask is not None:
            h = h * mask
        for _ in range(repeat):
            h = torch.tanh(h)
        reduced = h.sum(1) if mode == "sum" else h.amax(1)
        return {"h": h if flag else -h, "reduced": reduced, "count": count + 1}, [b * 2]


def call(batch: int, seed: int = 0, **overrides) -> Inputs:
    generator = torch.Generator().manual_seed(seed)
    x, a, b = torch.randn(batch, 3, generator=generator), torch.randn(3, generator=generator), torch.randn(3)
    mask = (torch.randn(batch, 3, generator=generator) > 0).float()
    kwargs = {"scale": 0.5, "mask": mask, "flag": False, "repeat": 2, "mode": "max", **overrides}
    return Inputs((x, {"a": (a, 7), "b": b}), kwargs)


def model() -> Pytree:
    torch.manual_seed(0)
    return Pytree().eval()


def test_pytree_inputs_with_keywords_and_scalars_give_eager_results(conformance, static_options):
    conformance(model(), call(2), call(5, seed=1), static_options)


def test_keyword_order_does_not_matter_and_scalar_values_get_their_own_program(one_thread):
    eager = model()
    module = StaticModule(eager, call(2))
    runtime = module.runtime()
    inputs = call(2)
    reordered = dict(reversed(list(inputs.kwargs.items())))
    with torch.no_grad():
        torch.testing.assert_close(runtime(*inputs.args, **reordered)[0]["h"], inputs.call(eager)[0]["h"])
    assert module.shapes_prepared == 1
    for overrides in ({"repeat": 3}, {"mode": "sum"}, {"flag": True}, {"scale": 2.0}):
        other = call(2, **overrides)
        with torch.no_grad():
            torch.testing.assert_close(other.call(runtime), other.call(eager))
    assert module.shapes_prepared == 5  # each scalar value is baked into its own program


def _bad(change):
    inputs = call(2)
    args, kwargs = change(list(inputs.args), dict(inputs.kwargs))
    return Inputs(tuple(args), kwargs)


# calls the model does not take (each prepared, the preparing failed), and one on another device
BAD_CALLS = {
    "missing-positional": (lambda a, k: (a[:1], k), r"expected 2 positional arguments, got 1, and no program"),
    "extra-keyword": (lambda a, k: (a, {**k, "extra": 1}), r"keyword arguments differ: unexpected extra, and no"),
    "dict-keys": (
        lambda a, k: ([a[0], {"a": a[1]["a"], "c": a[1]["b"]}], k),
        r"pair must be a dict with keys \['a', 'b'\], got keys \['a', 'c'\], and no program .*KeyError: 'b'",
    ),
    "tensor-for-scalar": (
        lambda a, k: (a, {**k, "repeat": torch.tensor(2)}),
        r"repeat must be an int, got a tensor, and no program .*needs a tensor's value as a plain Python int",
    ),
    "dtype": (
        lambda a, k: ([a[0].double(), a[1]], k),
        r"x must have dtype torch.float32, got torch.float64, and no program .*aten::linear",
    ),
    "device": (lambda a, k: ([a[0].to("meta"), a[1]], k), r"x must be on cpu, got meta"),
}

# calls of another structure or leaf kind the model takes: a program of their own
OTHER_CALLS = {
    "list-for-tuple": lambda a, k: ([a[0], {"a": list(a[1]["a"]), "b": a[1]["b"]}], k),
    "none-for-tensor": lambda a, k: (a, {**k, "mask": None}),
    "scalar-type": lambda a, k: (a, {**k, "scale": 1}),
    "left-out": lambda a, k: (a, {key: value for key, value in k.items() if key not in ("mask", "mode")}),
}


@pytest.mark.parametrize("name", sorted(BAD_CALLS))
def test_the_signature_check_names_the_first_difference_before_any_op_runs(name, one_thread):
    change, message = BAD_CALLS[name]
    eager = model()
    runtime = StaticModule(eager, call(2), name="pytree").runtime()
    call(2).call(runtime)
    calls = int(eager.calls)
    with pytest.raises(InputSignatureError, match=rf"model 'pytree': {message}.*; expected signature \(x: float32"):
        _bad(change).call(runtime)
    assert int(eager.calls) == calls
    assert runtime.module.shapes_prepared == 1


@pytest.mark.parametrize("name", sorted(OTHER_CALLS))
def test_a_call_of_another_structure_the_model_takes_gets_a_program_of_its_own(name, one_thread):
    eager = model()
    module = StaticModule(eager, call(2), name="pytree")
    runtime = module.runtime()
    other = _bad(OTHER_CALLS[name])
    for inputs in (other, call(2), other):
        with torch.no_grad():
            torch.testing.assert_close(inputs.call(runtime), inputs.call(eager))
    assert module.shapes_prepared == 2


class Masked(torch.nn.Module):
    """Keyword arguments the way transformers models take them; ``mask`` is typed for TorchScript."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.linear(input_ids) * attention_mask.unsqueeze(-1)


class Wrapped(torch.nn.Module):
    """``forward(*args, **kwargs)``, as a wrapper around a transformers model is: TorchScript can
    neither script it nor trace its keywords, so it is traced on the call's flattened tensors."""

    def __init__(self):
        super().__init__()
        self.inner = Masked()

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


RUNTIMES = ["eager", "srbench", "torchscript", "static_runtime", "onnxruntime"]


@pytest.mark.parametrize("model_class", [Masked, Wrapped])
@pytest.mark.parametrize("runtime_name", RUNTIMES)
def test_every_runtime_takes_keyword_arguments(runtime_name, model_class, one_thread):
    torch.manual_seed(0)
    eager = model_class().eval()

    def keywords(batch: int) -> Inputs:
        return Inputs.of(input_ids=torch.randn(batch, 5, 4), attention_mask=(torch.randn(batch, 5) > 0).float())

    try:
        runtime = get_runtime(runtime_name)(eager, keywords(2), RuntimeOptions())
    except UnsupportedRuntime as error:  # an optional package missing here: said so, with the reason
        pytest.skip(str(error))
    for inputs in (keywords(2), keywords(3), keywords(2)):
        with torch.no_grad():
            torch.testing.assert_close(inputs.call(runtime), inputs.call(eager), rtol=1e-5, atol=1e-5)
    if runtime_name in ("torchscript", "static_runtime"):
        assert (runtime.flat is None) is (model_class is Masked)  # scripted, or traced flat


def test_a_traced_runtime_refuses_a_call_of_another_structure_with_the_difference(one_thread):
    from srbench.runtimes.torchscript import CallMismatch

    torch.manual_seed(0)
    runtime = get_runtime("torchscript")(
        Wrapped().eval(), Inputs.of(torch.randn(2, 5, 4), attention_mask=torch.ones(2, 5)), RuntimeOptions()
    )
    with pytest.raises(CallMismatch, match="the traced module takes calls shaped"):
        runtime(torch.randn(2, 5, 4), torch.ones(2, 5))


@pytest.mark.slow  # each transformers model is built and captured: a few seconds per runtime
@pytest.mark.parametrize("runtime_name", ["srbench", "static_runtime"])
def test_transformers_zoo_models_run_with_their_attention_mask_through_the_suite_path(runtime_name, one_thread):
    pytest.importorskip("transformers", reason="the transformers extra is not installed")
    spec = CaseSpec("conformance", "hf_distilbert", runtime_name, RuntimeOptions(), None, None, None, 1)
    prepared = prepare_case(spec)
    assert set(prepared.first_inputs.kwargs) == {"input_ids", "attention_mask"}
    assert prepared.check_equivalence().runs == 3
