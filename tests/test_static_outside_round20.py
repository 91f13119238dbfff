"""What a twentieth round of models from outside the zoo broke (``benchmarks/outside_round20.py``:
stock pieces, hand-written models and transformers architectures no earlier round built, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it; and the sweep's
order-dependence on torch's global settings (``benchmarks/outside_globals.py``)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from benchmarks import outside_globals
from benchmarks.outside_models import Outcome, OutsideModel, _call, _export_refusal, sweep_one
from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Written(nn.Module):
    """A cumulative sum into an ``out=`` tensor, of a parameter's product, as the round's
    ``out_arguments``."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x @ self.weight, dim=1, out=x.new_empty(0))


def test_the_sweeps_export_probe_exports_as_srbench_captures():
    """The sweep asks export first whether a model can be captured at all, and exported with grad
    on, where an ``out=`` argument of a result that requires grad is refused ("functions with
    out=... arguments don't support automatic differentiation"); srbench captures under
    ``no_grad``, and captured the model, which the sweep reported not capturable and never
    checked. The probe now exports as srbench does."""
    model, x = Written().eval(), torch.randn(2, 3, 8)
    assert _export_refusal(model, _call(x)) is None
    with torch.no_grad():  # as the sweep's eager calls; with grad on eager refuses it too
        torch.testing.assert_close(StaticModule(model, (x,)).runtime()(x), model(x))


class Projected(nn.Module):
    """A product into an ``out=`` tensor of another size (``new_empty(0)``, resized), as the
    round's ``out_arguments``."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x, self.weight, out=x.new_empty(0)) * 2


def test_a_result_written_into_a_tensor_of_another_size_decomposes():
    """Under ``decompose`` the product's ``out=`` becomes ``resize`` (functional) of an empty
    tensor and a ``copy`` over it; ``resize`` answers what the memory it adds held, and srbench,
    which checks each op's candidates against the op's own answer, found two calls of it
    disagreeing and refused the model ("its own kernel answers otherwise when called again").
    Like ``resize_``, it is now checked by its result's geometry."""
    model = Projected().eval()
    runtime = StaticModule(model, (torch.randn(2, 3, 8),), StaticOptions(decompose=True)).runtime()
    for x in (torch.randn(2, 3, 8), torch.randn(4, 5, 8)):
        with torch.no_grad():  # eager refuses out= under grad
            torch.testing.assert_close(runtime(x), model(x), rtol=0, atol=0)


def test_each_model_runs_from_the_settings_the_sweep_started_with():
    """Every setting a model (or its library) changes is set back after it, and before the next."""
    settings = outside_globals.TorchGlobals()
    before = settings.read()
    with settings.per_model():
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.distributions.Distribution.set_default_validate_args(not before["distributions' validate_args"])
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.set_anomaly_enabled(True)
        torch.set_float32_matmul_precision("medium")
        torch.set_num_threads(before["intra-op threads"] + 1)
        assert all(settings.read()[name] != value for name, value in before.items() if name != "default device")
    assert settings.read() == before


PACKAGE = '''"""A library that turns off torch.distributions' validation at import, as zuko does."""
import torch

torch.distributions.Distribution._validate_args = False


class Density(torch.nn.Module):
    def forward(self, x):
        return torch.distributions.Normal(x, x.abs() + 1).log_prob(x * 0.5)


class Other(Density):
    """A second model of the library: built after the first, its build imports nothing."""
'''


class Plain(nn.Module):
    """The same density in a model of no such library: under validation, ``Normal`` checks its
    arguments' values, a branch on data export refuses."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Normal(x, x.abs() + 1).log_prob(x * 0.5)


@pytest.fixture
def quiet_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The library above importable (not yet imported), validation on, and a sweep of its own."""
    (tmp_path / "quietdist").mkdir()
    (tmp_path / "quietdist" / "__init__.py").write_text(PACKAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", True)
    monkeypatch.setattr(outside_globals, "_SWEEP", [])
    yield
    sys.modules.pop("quietdist", None)


def _case(name: str, build: type | str) -> OutsideModel:
    def built() -> nn.Module:
        return build() if isinstance(build, type) else getattr(importlib.import_module("quietdist"), build)()

    return OutsideModel(name, name, built, lambda shape: _call(torch.randn(1 + 2 * shape, 4)))


@pytest.mark.usefixtures("quiet_library")
@pytest.mark.parametrize("order", [("Density", "Other", "plain"), ("plain", "Other", "Density")])
def test_a_models_result_does_not_depend_on_the_models_before_it(order):
    """Importing zuko turns off ``torch.distributions``' validation for the whole process, and in
    a full sweep ``hf_time_series_loss`` and ``hf_informer_prob`` were captured only because the
    zuko models had run before them. Now a model without the library is refused in either order,
    and the library's models, the one whose build imports it and the one built after, are
    captured in either order, as each would be in a process of its own."""
    cases = [_case(name, Plain if name == "plain" else name) for name in order]
    settings = outside_globals.sweep_globals()
    rows = {}
    for case in cases:
        with settings.per_model():
            rows[case.name] = sweep_one(case, rounds=0, checks=("default",))
    assert rows["plain"].checks["export"].outcome is Outcome.NOT_CAPTURABLE
    for name in ("Density", "Other"):
        assert rows[name].checks["default"].outcome is Outcome.EQUIVALENT, rows[name].checks
    assert torch.distributions.Distribution._validate_args
