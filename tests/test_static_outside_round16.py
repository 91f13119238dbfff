"""What a sixteenth round of models from outside the zoo broke (``benchmarks/outside_round16.py``:
lucidrains' language, set, vision, geometric and recurrent libraries, S5's and the LRU's complex
states, two hand-written models and transformers architectures no earlier round built, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from srbench.graph.capture import CaptureError, capture
from srbench.graph.transform_levels import transform_levels_kept
from srbench.options import StaticOptions
from srbench.static import StaticModule

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class NestedVmap(nn.Module):
    """S5's pattern: a ``vmap`` over the batch whose function runs an inner ``vmap`` over the
    steps, closing over a tensor computed in the outer one. torch.export lifts that tensor as a
    constant, and torch's retrace of the graph (which srbench needs to run the transform op by op)
    fails on it between the two ``_vmap_increment_nesting`` calls and their decrements."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        def per_sample(rows: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            scaled = self.weight * s
            return torch.vmap(lambda u: scaled @ u)(rows)

        return torch.vmap(per_sample)(x, scale)


def _nested_call() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(2, 5, 3, generator=generator), torch.rand(2, generator=generator)


def _outside_every_transform() -> None:
    assert torch._C._functorch.get_dynamic_layer_stack_depth() == 0
    assert torch._C._functorch.peek_interpreter_stack() is None
    torch.randn(2)  # raised "vmap: called random operation while in randomness error mode"
    assert torch.vmap(torch.sin)(torch.zeros(3, 2)).shape == (3, 2)


def test_a_capture_failing_inside_vmap_leaves_the_process_outside_it():
    """The round's ``s5_complex_state`` (s5-pytorch) is refused by torch's retrace (torch 2.13:
    "'Tensor' object has no attribute 'constant'"), and that failure left functorch's dynamic
    layer stack two ``vmap`` levels deep: every model built after it in the sweep's process was
    reported unavailable, its ``torch.randn`` raising vmap's randomness error. A capture now
    restores the stack and the dispatch key sets however it ends (a torch whose retrace succeeds
    captures the model; the process is left outside every transform either way)."""
    with contextlib.suppress(CaptureError):
        capture(NestedVmap().eval(), _nested_call())
    _outside_every_transform()


def test_decompose_does_not_advise_dropping_decompose_where_the_retrace_fails_too():
    """Under ``decompose`` torch's lowering failed on the nested ``vmap`` and the refusal said the
    model "can be prepared without decompose"; without it torch's retrace fails alike (the
    re-sweep of 2026-11-29 09:08 UTC, ``s5_complex_state``). Both now give the retrace's refusal
    (a torch whose retrace succeeds captures the model)."""
    refusals = []
    for decompose in (False, True):
        try:
            capture(NestedVmap().eval(), _nested_call(), decompose=decompose)
        except CaptureError as refusal:
            refusals.append(str(refusal))
    if refusals:
        assert len(refusals) == 2 and refusals[0] == refusals[1], refusals
        assert "torch's retrace of the model's torch.func transforms" in refusals[1]
        assert "without decompose" not in refusals[1]
    _outside_every_transform()


def test_preparing_after_a_refused_vmap_model_builds_and_runs_the_next():
    """The sweep's sequence, through ``StaticModule``: the refused model, then a model whose
    construction draws random numbers, prepared and run as eager runs it."""
    with contextlib.suppress(CaptureError):
        StaticModule(NestedVmap().eval(), _nested_call(), StaticOptions())
    torch.manual_seed(0)
    following = nn.Sequential(nn.Linear(3, 8), nn.GELU(), nn.Linear(8, 2)).eval()
    x = torch.randn(4, 3)
    runtime = StaticModule(following, (x,), StaticOptions()).runtime()
    with torch.no_grad():
        torch.testing.assert_close(runtime(x), following(x))
    _outside_every_transform()


def test_the_sweep_goes_on_after_s5():
    """The round's own sequence, with the library (skipped where the ``s5`` extra is not
    installed): S5's row is torch's retrace refusing it, and the model after it builds and
    agrees with eager."""
    pytest.importorskip("s5", reason="s5-pytorch (the `s5` extra) is not installed")
    from benchmarks.outside_models import Outcome, sweep_one
    from benchmarks.outside_round16 import sixteenth_round

    cases = {case.name: case for case in sixteenth_round()}
    refused = sweep_one(cases["s5_complex_state"], 0, checks=("default",)).checks["default"]
    assert refused.outcome is Outcome.ERROR and "retrace" in refused.detail, refused
    following = sweep_one(cases["float64_bfloat16_params"], 0, checks=("default",)).checks["default"]
    assert following.outcome is Outcome.EQUIVALENT, following
    _outside_every_transform()


class RunningMean(nn.Module):
    """The streaming normaliser's pattern, smallest: a running mean updated in place at every
    call, subtracted from the input."""

    mean: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return x - self.mean


class FirstCallCache(nn.Module):
    """A buffer filled by the first call only (a rotary table's cache, say): the answers hold
    from the second call on."""

    table: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(4))
        self.filled = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.filled:
            self.table.copy_(torch.linspace(0.0, 1.0, 4))
            self.filled = True
        return x * self.table


def _case(name: str, build: type[nn.Module]):
    from benchmarks.outside_models import OutsideModel, _call

    sizes = ((2, 4), (5, 4))
    return OutsideModel(
        name,
        name,
        build,
        lambda shape: _call(torch.randn(*sizes[shape], generator=torch.Generator().manual_seed(shape))),
    )


def test_a_model_whose_answers_drift_is_not_applicable_to_eager_first_and_thread_checks():
    """The round's ``streaming_state_buffers`` was reported wrong eager-first and under the
    two-thread checks, by their protocols, not srbench: eager's calls moved the running statistics
    srbench's runs then started from, and the thread checks compare every call with one answer per
    shape. The sweep now asks eager twice more for one call's answer and, where it drifts, says
    those checks do not apply; the fresh order's option sets still check the model (and agree)."""
    from benchmarks.outside_fresh import sweep_fresh
    from benchmarks.outside_models import Outcome, sweep_one

    drifting = _case("running_mean", RunningMean)
    eager_first = sweep_one(drifting, 0, checks=("default", "threads2"))
    assert [check.outcome for check in eager_first.checks.values()] == [Outcome.NOT_APPLICABLE], eager_first
    assert not eager_first.failed
    fresh = sweep_fresh(drifting, checks=("default", "threads2"))
    assert fresh.checks["default"].outcome is Outcome.EQUIVALENT, fresh
    assert fresh.checks["threads2"].outcome is Outcome.NOT_APPLICABLE, fresh
    cached = sweep_one(_case("first_call_cache", FirstCallCache), 0, checks=("default",))
    assert cached.checks["default"].outcome is Outcome.EQUIVALENT, cached


def test_a_capture_failing_inside_a_dual_level_leaves_none_entered():
    """torch's retrace of a ``jvp`` of a ``jvp`` given a sliced argument (round 19's
    ``func_derivatives``, in the relaid check's test) failed between the graph's
    ``_enter_dual_level`` and ``_exit_dual_level`` calls, which left forward AD's level entered:
    every dual level after it in the process failed ("Nested forward mode AD is not supported at
    the moment": round 22's forward-AD test, run after it in CI). Whether torch's retrace fails
    there varies between runs, so the failure is made here as the graph makes it: the level
    entered through torch's C API inside the block that guards every capture, then an error."""
    with contextlib.suppress(RuntimeError), transform_levels_kept():
        torch._C._enter_dual_level()
        raise RuntimeError("torch's retrace failed here")
    with torch.autograd.forward_ad.dual_level():
        assert torch.autograd.forward_ad._current_level == 0
