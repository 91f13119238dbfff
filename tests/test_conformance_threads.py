"""Threads and gradients: a runtime used by two threads at once refuses the second call with a
clear error (never a crash, never a wrong answer); inputs that require grad while grad mode is on
are refused (inference only); under no_grad or inference_mode they give eager's results."""

from __future__ import annotations

import threading

import pytest
import torch

from srbench.static import (
    ConcurrentUseError,
    InferenceOnlyError,
    OutVariantRegistry,
    RuntimePool,
    StaticModule,
    StaticOptions,
)


class Blocking:
    """An out variant for ``tanh`` that, once armed, holds the run until released."""

    def __init__(self) -> None:
        self.armed = False
        self.inside = threading.Event()
        self.release = threading.Event()
        self.reenter: object = None

    def __call__(self, x, *, out):
        if self.armed:
            self.inside.set()
            if self.reenter is not None:
                self.reenter(x)
            assert self.release.wait(10)
        torch.tanh(x, out=out)


class TanhMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.linear(x)) * 2


def _blocked_runtime(options: StaticOptions):
    blocking = Blocking()
    registry = OutVariantRegistry()
    registry.register("aten::tanh", blocking)
    torch.manual_seed(0)
    model = TanhMLP().eval()
    runtime = StaticModule(model, (torch.randn(2, 8),), options, name="tanh_mlp", out_variants=registry).runtime()
    return model, runtime, blocking


@pytest.mark.parametrize("second_shape", [False, True], ids=["same-shape", "new-shape"])
@pytest.mark.parametrize("cleanup", [True, False], ids=["cleanup", "keep"])
def test_a_call_while_another_thread_runs_is_refused_and_the_first_is_right(cleanup, second_shape, one_thread):
    model, runtime, blocking = _blocked_runtime(StaticOptions(cleanup_activations=cleanup))
    x = torch.randn(2, 8)
    runtime(x)  # bound: the next call of this shape takes the fast path
    blocking.armed = True
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.setdefault("first", runtime(x)))
    first.start()
    assert blocking.inside.wait(10)
    other = torch.randn(5, 8) if second_shape else torch.randn(2, 8)
    with pytest.raises(ConcurrentUseError, match=r"StaticRuntime of model 'tanh_mlp' is already running a call"):
        runtime(other)
    blocking.release.set()
    first.join(10)
    with torch.no_grad():
        torch.testing.assert_close(results["first"], model(x))
    blocking.armed = False
    with torch.no_grad():
        torch.testing.assert_close(runtime(other), model(other))  # usable again once the first call ends


def test_a_call_re_entering_the_runtime_from_its_own_run_is_refused(one_thread):
    model, runtime, blocking = _blocked_runtime(StaticOptions())
    x = torch.randn(2, 8)
    runtime(x)
    blocking.armed = True
    blocking.release.set()
    blocking.reenter = lambda value: runtime(x)
    with pytest.raises(ConcurrentUseError, match="re-entered"):
        runtime(x)
    blocking.armed = False
    with torch.no_grad():
        torch.testing.assert_close(runtime(x), model(x))


def test_threads_hammering_one_runtime_get_right_answers_or_the_error(static_options_caller_owned_outputs, one_thread):
    """Without the check this crashed the process (cleanup) or gave wrong answers (keep); two
    shapes, so calls also race to prepare and bind. Every option but managed outputs, which by
    contract any next run of the runtime overwrites, from whichever thread."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).eval()
    inputs = [torch.randn(4 + i % 2, 32) for i in range(4)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]
    runtime = StaticModule(model, (inputs[0],), static_options_caller_owned_outputs).runtime()
    outcomes: list[str] = []

    def work(index: int) -> None:
        for _ in range(200):
            try:
                got = runtime(inputs[index])
            except ConcurrentUseError:
                outcomes.append("refused")
                continue
            outcomes.append("right" if torch.allclose(got, expected[index], atol=1e-6) else "wrong")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(outcomes) == 800 and "wrong" not in outcomes and "right" in outcomes


def test_a_pool_gives_each_thread_its_own_runtime_and_never_refuses(one_thread):
    torch.manual_seed(0)
    model = TanhMLP().eval()
    pool = RuntimePool(StaticModule(model, (torch.randn(2, 8),)))
    inputs = [torch.randn(2 + i % 2, 8) for i in range(4)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for _ in range(50):
                torch.testing.assert_close(pool(inputs[index]), expected[index])
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and pool.runtimes_created == 4


def test_inputs_requiring_grad_under_grad_mode_are_refused_as_inference_only(one_thread):
    torch.manual_seed(0)
    model = TanhMLP().eval()
    runtime = StaticModule(model, (torch.randn(2, 8),), name="tanh_mlp").runtime()
    x = torch.randn(2, 8, requires_grad=True)
    for attempt in range(2):  # the slow path (first call), then the fast path
        with pytest.raises(InferenceOnlyError, match=r"input x requires grad while grad mode is on.*inference only"):
            runtime(x)
        if attempt == 0:
            runtime(x.detach())


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode], ids=["no_grad", "inference_mode"])
def test_inputs_requiring_grad_outside_grad_mode_give_eager_results(mode, one_thread):
    torch.manual_seed(0)
    model = TanhMLP().eval()
    runtime = StaticModule(model, (torch.randn(2, 8),)).runtime()
    x = torch.randn(2, 8, requires_grad=True)
    with mode():
        got, want = runtime(x), model(x)
    torch.testing.assert_close(got, want)
    assert got.requires_grad is want.requires_grad is False


def test_outputs_never_track_gradients_even_with_grad_mode_on(one_thread):
    """Documented: parameters that require grad do not make outputs track them (inference only)."""
    torch.manual_seed(0)
    model = TanhMLP().eval()
    out = StaticModule(model, (torch.randn(2, 8),)).runtime()(torch.randn(2, 8))
    assert torch.is_grad_enabled() and out.grad_fn is None and not out.requires_grad
