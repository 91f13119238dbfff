"""srbench prepared first, on a freshly built model, as a user writes ``StaticModule(Build(), x)``:
the outside-models sweep's fresh order (``benchmarks/outside_models.py --order fresh``,
``benchmarks/outside_fresh.py``), and what it found, each on the smallest model that shows it."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from benchmarks.outside_fresh import sweep_fresh
from benchmarks.outside_models import Outcome, OutsideModel, sweep_one
from srbench.inputs import Inputs


def _randn(shape: int) -> Inputs:
    return Inputs((torch.randn(1 + 2 * shape, 4, generator=torch.Generator().manual_seed(shape)),), {})


class BiasRegisteredInForward(nn.Module):
    """x-transformers' ALiBi: a ``None`` buffer that the first call registers (a cache made from
    the shapes), read by every later call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("bias", None, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bias is None:
            self.register_buffer("bias", torch.arange(4.0), persistent=False)
        return x + self.bias


def test_the_fresh_order_prepares_before_any_eager_call():
    """The sweep's own order calls eager first, which registers the buffer, and srbench accepts
    the model; the fresh order hands srbench a model no one called, which its check for state a
    first call sets refuses (the refusal x-transformers' ALiBi keeps, README)."""
    case = OutsideModel("bias_in_forward", "a buffer registered at the first call", BiasRegisteredInForward, _randn)
    assert not sweep_one(case, rounds=0).failed
    fresh = sweep_fresh(case, ["default"])
    assert fresh.checks["default"].outcome is Outcome.ERROR
    assert "first call sets state" in fresh.checks["default"].detail


def test_a_builder_not_deterministic_under_its_seed_is_said():
    """Two builds under one seed must be the same model, or the twin's answers are no reference:
    a builder drawing its weights from a generator of its own is named, not blamed on srbench."""
    seeds = itertools.count()

    def build() -> nn.Module:
        layer = nn.Linear(4, 4)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(4, 4, generator=torch.Generator().manual_seed(next(seeds))))
        return layer

    row = sweep_fresh(OutsideModel("unseeded", "weights from a generator of its own", build, _randn), ["default"])
    assert row.checks["default"].outcome is Outcome.ERROR
    assert row.checks["default"].detail == "builder not deterministic under its seed: weight differs between two builds"


def test_every_option_set_gets_an_instance_of_its_own():
    """Each option set is prepared on a model no one called: a model that counts its calls in a
    buffer would show a second preparation on a called instance."""
    built: list[nn.Module] = []

    def build() -> nn.Module:
        built.append(nn.Linear(4, 4))
        return built[-1]

    row = sweep_fresh(OutsideModel("linear", "one layer", build, _randn), ["default", "decompose", "plugin"])
    assert {name: check.outcome for name, check in row.checks.items()} == dict.fromkeys(
        ("default", "decompose", "plugin"), Outcome.EQUIVALENT
    )
    assert len(built) == 4  # the twin, then one per option set
