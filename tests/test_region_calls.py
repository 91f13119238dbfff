"""The static runtime calls export's context-manager ops (``wrap_with_autocast``,
``wrap_with_set_grad_enabled``) through srbench.static.region_calls: the same context around the
same sub-module as the op, without its per-call ``torch._dynamo.disable`` wrapper (a region of a
control-flow op's sub-block; one of the program itself is lowered to its casts at prepare,
srbench.graph.lowered_autocast)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule
from srbench.static.region_calls import run_autocast_region, run_grad_region


class Body(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.linear(x).relu(),)


class Fails(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (x.index_select(0, torch.tensor([9])),)


class CastThenGrad(nn.Module):
    """A bfloat16 cpu region and an ``enable_grad`` block whose result carries history."""

    def __init__(self) -> None:
        super().__init__()
        self.body = Body()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            (cast,) = self.body(x)
        with torch.enable_grad():
            (tracked,) = self.body(x * 2)
        return cast, tracked


def _x() -> torch.Tensor:
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


def test_an_autocast_region_runs_as_the_op_runs_it():
    torch.manual_seed(0)
    body = Body()
    with torch.no_grad():
        (expected,) = torch.ops.higher_order.wrap_with_autocast("cpu", torch.bfloat16, True, False, body, _x())
        (got,) = run_autocast_region("cpu", torch.bfloat16, True, False, body, _x())
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert not torch.is_autocast_enabled("cpu")


def test_an_autocast_region_is_left_after_an_error():
    with pytest.raises(IndexError):
        run_autocast_region("cpu", torch.bfloat16, True, False, Fails(), _x())
    assert not torch._C._is_any_autocast_enabled()


@pytest.mark.parametrize("outer", [True, False])
def test_a_grad_region_switches_grad_mode_around_its_body_and_back(outer):
    torch.manual_seed(0)
    body = Body()
    with torch.set_grad_enabled(outer):
        (tracked,) = run_grad_region(True, body, _x())
        assert torch.is_grad_enabled() is outer
        (untracked,) = run_grad_region(False, body, _x())
        assert torch.is_grad_enabled() is outer
        with pytest.raises(IndexError):
            run_grad_region(not outer, Fails(), _x())
        assert torch.is_grad_enabled() is outer
    assert tracked.requires_grad and not untracked.requires_grad


def test_the_program_calls_the_leaner_grad_region_and_answers_as_eager():
    """The grad region is called through ``run_grad_region``; the autocast region is no call
    of the program at all, lowered to its casts."""
    torch.manual_seed(0)
    model = CastThenGrad().eval()
    module = StaticModule(model, (_x(),))
    called = {plan.call.fn for plan in module.prepared.plans if plan.call is not None}
    assert run_grad_region in called and run_autocast_region not in called
    got = module.runtime()(_x())
    with torch.no_grad():
        expected = model(_x())
    for g, e in zip(got, expected):
        assert (g.dtype, g.requires_grad) == (e.dtype, e.requires_grad)
        torch.testing.assert_close(g, e, rtol=0, atol=0)
