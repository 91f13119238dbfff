"""What a seventh round of models from outside the zoo broke (``benchmarks/outside_round7.py``,
run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import importlib
import warnings

import pytest
import torch
from test_static_outside_round6 import OPTIONS, assert_as_eager, randn  # the sixth round's protocol
from torch import nn
from torch.nn.utils import prune

from srbench.graph.capture import CaptureError, capture
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule


class ReturnsWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(x), self.linear.weight.t()


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)])
def test_preparing_does_not_write_the_models_tensors(options):
    """Checking a model for state carried in attributes calls it twice and writes its tensors
    back: every parameter and buffer, written or not. That moved their version counters, so a
    backward pending over the parameters failed after preparing ("modified by an inplace
    operation"), and a view of a parameter made under ``inference_mode`` (eager's own answer
    returning ``weight.t()``) could no longer be read (``returns_state``). Only tensors the
    calls changed are written back now."""
    model = ReturnsWeight().eval()
    x = randn(2, 8)
    with torch.inference_mode():
        _, eager_view = model(x)
    loss = model(x)[0].sum()  # a backward pending over the parameters
    versions = [parameter._version for parameter in model.parameters()]
    runtime = StaticModule(model, Inputs.of(x), options).runtime()
    assert [parameter._version for parameter in model.parameters()] == versions
    loss.backward()
    torch.testing.assert_close(runtime(x)[1], eager_view)


class Stateful(nn.Module):
    """A step counter and a buffer the model writes, beside parameters it only reads."""

    steps: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        return self.linear(x) * self.steps


def test_state_the_check_writes_is_still_given_back():
    """Writing back only what changed still gives back what the check's calls wrote: the
    counter stands where it stood before preparing, and the first call counts one."""
    model = Stateful().eval()
    x = randn(2, 4)
    runtime = StaticModule(model, Inputs.of(x), StaticOptions()).runtime()
    assert int(model.steps) == 0
    torch.testing.assert_close(runtime(x), model.linear(x).detach())
    assert int(model.steps) == 1


def _reparametrized() -> nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # weight_norm's deprecation
        return nn.Sequential(
            torch.nn.utils.weight_norm(nn.Linear(8, 8)),
            torch.nn.utils.spectral_norm(nn.Linear(8, 8)),
            prune.l1_unstructured(nn.Linear(8, 8), "weight", amount=0.4),
        ).eval()


@pytest.mark.parametrize("options", OPTIONS)
def test_hook_based_reparametrizations_are_no_carried_state(options):
    """``torch.nn.utils.weight_norm``, ``spectral_norm`` (the older, hook-based ones) and
    ``prune`` assign the module's ``weight`` in a forward pre-hook before every forward, a new
    tensor each call made from its registered tensors. The check for state carried in
    attributes saw a new tensor after each call and refused the model (``module_hooks``)."""
    model = _reparametrized()
    assert_as_eager(model, [Inputs.of(randn(2, 8)), Inputs.of(randn(3, 8, seed=1))], options)


class KeepsItsInput(nn.Module):
    """Assigns a plain attribute that is state: the next call reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.last = torch.zeros(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.linear(x) + self.last
        self.last = x.mean(0)
        return out


def test_an_attribute_set_in_forward_is_still_refused():
    """The exemption is for the reparametrizations' hooks only: an attribute a forward sets and
    the next call reads is still refused."""
    from srbench.graph.capture import CaptureError

    with pytest.raises(CaptureError, match="carries state from call to call in its attribute 'last'"):
        StaticModule(KeepsItsInput().eval(), Inputs.of(randn(2, 8)), StaticOptions()).runtime()


class Ensemble(nn.Module):
    """Three Linear layers' weights stacked and run by ``torch.vmap``; a per-row ``vmap(dot)``."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(randn(3, 4, 8))
        self.bias = nn.Parameter(randn(3, 4, seed=1))

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        every = torch.vmap(lambda weight, bias: torch.nn.functional.linear(x, weight, bias))(self.weight, self.bias)
        return every.relu(), torch.vmap(torch.dot, in_dims=(0, None))(x, w)


@pytest.mark.parametrize("options", OPTIONS)
def test_vmap_in_forward(options):
    """``torch.vmap`` in forward: export keeps it as pre-dispatch calls (``_add_batch_dim``...)
    whose ops take tensors batched at a functorch level that exists only while the graph runs
    in order; preparing runs ops one at a time and every such model failed ("your tensor may
    have escaped from inside a function being vmapped", ``vmap_ensemble``). The graph is now
    retraced at the ATen level, where the batching rules made plain ops of them."""
    calls = [Inputs.of(randn(2, 8), randn(8, seed=2)), Inputs.of(randn(5, 8, seed=3), randn(8, seed=4))]
    assert_as_eager(Ensemble().eval(), calls, options)


def test_a_failed_retrace_of_vmap_names_the_retrace_not_decompose(monkeypatch):
    """Where torch's retrace of a ``vmap`` fails (without ``decompose``), the refusal says it was
    that retrace: it said "lowering to core ATen (decompose=True) failed ... prepare without
    decompose", advice that cannot help a model not prepared with ``decompose``."""

    def failing_retrace(exported):
        raise RuntimeError("batching rule missing")

    # srbench.graph exports the function ``capture``, which hides the module of the same name
    monkeypatch.setattr(importlib.import_module("srbench.graph.capture"), "_retraced", failing_retrace)
    with pytest.raises(CaptureError) as refused:
        capture(Ensemble().eval(), Inputs.of(randn(2, 8), randn(8, seed=2)))
    message = str(refused.value)
    assert "retrace of the model's torch.func transforms" in message
    assert "batching rule missing" in message
    assert "decompose" not in message
