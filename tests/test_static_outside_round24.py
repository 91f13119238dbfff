"""What a twenty-fourth round of models from outside the zoo probed (``benchmarks/outside_round24.py``:
outputs sharing memory through views written after they were taken, integer and small dtypes,
state across calls, a generator argument, keyword orders), each as the smallest model that shows
it. Of its faults, a ``functools.wraps``-decorated ``forward`` whose wrapper sees the keyword
order is pinned in ``tests/test_static_keyword_order.py``, an ``out`` argument resized here."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class ExpandedThenWritten(nn.Module):
    """An expanded view returned, its base written in place after (``expand_then_inplace``)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gate = torch.sigmoid(x[..., :1])
        wide = gate.expand(-1, 4)
        gate.mul_(2.0).sub_(0.5)
        return wide, gate


class Conjugated(nn.Module):
    """``conj()``'s lazy view, the complex tensor written after through ``view_as_real``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(x.unflatten(-1, (2, 2)).contiguous() * 1.0)
        conjugate = z.conj()
        torch.view_as_real(z)[..., 1].mul_(0.5)
        return torch.view_as_real(conjugate.resolve_conj())


class Counting(nn.Module):
    """A step counter and a flag flipped each call choosing a head (``counter_flag_average_state``)."""

    steps: torch.Tensor
    flag: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("flag", torch.zeros((), dtype=torch.bool))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps.add_(1)
        self.flag.logical_not_()
        return torch.where(self.flag, self.first(x), self.second(x)) * self.steps


@pytest.mark.parametrize("model", [ExpandedThenWritten(), Conjugated()], ids=["expand", "conj"])
@pytest.mark.parametrize("decompose", [False, True])
def test_views_written_after_they_were_taken_answer_as_eager(model, decompose):
    """A view taken before its base is written must show the write, on every reuse of the plan
    (the buffers are reused across calls: two calls, the second at another batch)."""
    runtime = StaticModule(model, (torch.randn(2, 4),), StaticOptions(decompose=decompose)).runtime()
    for batch in (2, 3, 2):
        x = torch.randn(batch, 4)
        torch.testing.assert_close(runtime(x), model(x), rtol=0, atol=0)


def test_state_moved_every_call_follows_eager_across_shapes():
    """The counter and the flag live in buffers the program writes; alternating shapes (two
    programs) must move one state, not one per program."""
    model, twin = Counting().eval(), None
    twin = copy.deepcopy(model)
    runtime = StaticModule(model, (torch.randn(2, 4),)).runtime()
    with torch.no_grad():
        for batch in (2, 3, 3, 2, 3):
            x = torch.randn(batch, 4)
            torch.testing.assert_close(runtime(x), twin(x))
    assert int(model.steps) == int(twin.steps) == 5
    assert bool(model.flag) == bool(twin.flag)


class Seeded(nn.Module):
    """Noise from a generator the caller passes (``generator_argument``)."""

    def forward(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return x + torch.randn(x.shape, generator=generator)


def test_a_generator_argument_is_refused_naming_it():
    """Export lifts a copy of the generator taken at capture: the program would draw the same
    numbers whatever generator is passed. Refused, naming the argument and the remedy."""
    with pytest.raises(CaptureError) as refused:
        StaticModule(Seeded().eval(), Inputs((torch.randn(2, 4), torch.Generator().manual_seed(1)), {}))
    assert "argument args[1] is a torch.Generator" in refused.value.reason
    assert "pass the random values in as an input" in refused.value.reason


class OutArgument(nn.Module):
    """The result written into an ``out`` tensor the caller passes (``out_argument_resized``)."""

    def forward(self, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        torch.mul(x, 2.0, out=out)
        return out + 1


@pytest.mark.parametrize("size", [(0,), (3,)])
def test_an_out_argument_forward_resizes_is_refused_naming_it(size):
    """Eager resizes the caller's ``out`` to the result's size; no program can, and export
    failed with "IndexError: list index out of range" from its guards, which srbench passed on
    as the reason. Refused now, naming the argument and both sizes."""
    with pytest.raises(CaptureError) as refused:
        StaticModule(OutArgument().eval(), Inputs((torch.randn(2, 4), torch.empty(size)), {}))
    assert f"forward resized out from {list(size)} to [2, 4]" in refused.value.reason
    assert "list index out of range" not in refused.value.reason


def test_an_out_argument_of_the_result_size_is_written_as_eager_writes_it():
    x = torch.randn(2, 4)
    runtime = StaticModule(OutArgument().eval(), Inputs((x, torch.empty(2, 4)), {})).runtime()
    out = torch.empty(2, 4)
    torch.testing.assert_close(runtime(x, out), x * 2 + 1)
    torch.testing.assert_close(out, x * 2)


class Squeezed(nn.Module):
    """The caller's tensor's size changed by a view op written in place."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        getattr(x, self.how)(*((0,) if self.how == "unsqueeze_" else ()))
        return x * 2


def test_an_argument_resized_where_export_captures_it_still_runs_as_eager():
    """``x.squeeze_()`` on the caller's tensor is captured by export and run by srbench as eager
    runs it (the caller's tensor squeezed too): the resize check names only what export fails on
    (the first form of the check refused this model, which had run right)."""
    model = Squeezed("squeeze_").eval()
    runtime = StaticModule(model, (torch.randn(1, 3),)).runtime()
    x = torch.randn(1, 3)
    mine, theirs = x.clone(), x.clone()
    torch.testing.assert_close(runtime(mine), model(theirs))
    assert mine.shape == theirs.shape == (3,)


def test_an_argument_unsqueezed_in_place_is_refused_naming_it():
    with pytest.raises(CaptureError) as refused:
        StaticModule(Squeezed("unsqueeze_").eval(), (torch.randn(3, 3),))
    assert "forward resized x from [3, 3] to [1, 3, 3]" in refused.value.reason
