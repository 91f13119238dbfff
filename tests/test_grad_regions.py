"""Grad-mode switches of the model's own (``torch.enable_grad`` inside a ``no_grad`` call, and
``torch.no_grad`` inside that): the program answers as eager, ``requires_grad`` of every output
included, under the defaults and on CPU streams forced (each stream a thread, whose grad mode is
its own), and leaves the caller's grad mode as it found it; a switch ``torch.export`` drops is
refused (:mod:`srbench.graph.grad_switches`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.graph import CaptureError
from srbench.measure.equivalence import compare
from srbench.static import StaticModule, StaticOptions

OPTIONS = [
    StaticOptions(),
    StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False),
    StaticOptions(streams=4, scheduler="parallel_steps", measure_choices=False),
]


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)


class SwitchedOnByCalls(Pair):
    """Grad mode switched on and back by calls, not a ``with`` block, around two chains a
    scheduler can put on two streams, and two more chains outside."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        before = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        tracked = self.a(x).relu(), self.b(x).tanh()
        torch.set_grad_enabled(before)
        return (*tracked, self.a(x).sin(), self.b(x).cos())


class OffInsideOn(Pair):
    """``no_grad`` inside ``enable_grad``, around a ``cond``: the inner results have no history,
    the outer ones have."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.enable_grad():
            y = self.a(x)
            with torch.no_grad():
                z = torch.cond(y.sum() > 0, lambda v: v.relu(), lambda v: v.sin(), (y,))
                untracked = self.b(z).relu()
            tracked = self.a(z).tanh(), self.b(y).sigmoid()
        return (untracked, *tracked, y * 2)


class OnAroundCond(Pair):
    """``enable_grad`` around a ``cond`` and the ops after it: torch.export's program runs them
    all with grad mode off (torch 2.13)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.a(x)
        with torch.enable_grad():
            z = torch.cond(y.sum() > 0, lambda v: v.relu(), lambda v: v.sin(), (y,))
            tracked = self.b(z).relu(), self.a(z).tanh()
        return (*tracked, y * 2)


def _x(seed: int) -> torch.Tensor:
    return torch.randn(3, 8, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("options", OPTIONS, ids=["defaults", "streams2", "streams4"])
@pytest.mark.parametrize("model_type", [SwitchedOnByCalls, OffInsideOn])
def test_grad_switches_answer_as_eager_with_requires_grad(model_type: type[Pair], options: StaticOptions) -> None:
    torch.manual_seed(0)
    model = model_type().eval()
    module = StaticModule(model, (_x(0),), options)
    if options.streams > 1:
        assert module.prepared.streams_used > 1  # the multistream program ran
    runtime = module.runtime()
    with torch.no_grad():
        for seed in (1, 2, 1):
            got, expected = runtime(_x(seed)), model(_x(seed))
            assert not torch.is_grad_enabled()
            compare(got, expected, rtol=1e-5, atol=1e-6, run=f"call with seed {seed}")  # requires_grad too
    assert [t.requires_grad for t in got] == [t.requires_grad for t in expected]
    assert any(t.requires_grad for t in got) and not all(t.requires_grad for t in got)


def test_grad_switched_on_around_a_cond_is_refused_not_answered_without_history() -> None:
    """Export drops the switch: the program gave eager's values without their history."""
    model = OnAroundCond().eval()
    with torch.no_grad():
        assert [t.requires_grad for t in model(_x(0))] == [True, True, False]
    with pytest.raises(CaptureError, match="drops the model's grad-mode switch around a control-flow op"):
        StaticModule(model, (_x(0),), StaticOptions())
