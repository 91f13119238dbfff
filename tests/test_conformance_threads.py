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
        self.entries = threading.Semaphore(0)  # one per call held
        self.release = threading.Event()
        self.reenter: object = None

    def __call__(self, x, *, out):
        if self.armed:
            self.inside.set()
            self.entries.release()
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


class WritesThenReads(torch.nn.Module):
    """The outside sweep's ``writes_inputs_and_state`` pattern: a buffer written from the input,
    then read after other ops (a ``tanh`` the test can hold) in the same call."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.register_buffer("last_mean", torch.zeros(8))

    def forward(self, x):
        self.last_mean.copy_(x.mean(0))
        return torch.tanh(self.linear(x)) * 2 + self.last_mean


def _state_writing_pool(options: StaticOptions) -> tuple[torch.nn.Module, RuntimePool, Blocking]:
    blocking = Blocking()
    registry = OutVariantRegistry()
    registry.register("aten::tanh", blocking)
    torch.manual_seed(0)
    model = WritesThenReads().eval()
    module = StaticModule(model, (torch.randn(2, 8),), options, name="writes_then_reads", out_variants=registry)
    return model, RuntimePool(module), blocking


STATE_OPTIONS = [
    StaticOptions(),
    StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False),
]


@pytest.mark.parametrize("options", STATE_OPTIONS, ids=["defaults", "streams2_forced"])
def test_runtimes_of_a_model_writing_its_buffer_take_turns(options, one_thread):
    """Two runtimes of one module, a call each at once: the second call's write of the buffer
    landed between the first call's write and its read, so the first answered with the second's
    mean (the outside sweep's ``threads2`` check, ``writes_inputs_and_state`` and
    ``shared_storage_state``); now such a program's runs take turns under the module's state lock."""
    model, pool, blocking = _state_writing_pool(options)
    first_x, second_x = torch.randn(2, 8), torch.randn(2, 8) + 3
    with torch.no_grad():
        expected = [model(first_x), model(second_x)]
    runtimes = [pool.module.runtime(), pool.module.runtime()]
    for runtime in runtimes:
        runtime(first_x)  # bound: the calls below take the fast path
    blocking.armed = True
    results: dict[int, torch.Tensor] = {}
    first = threading.Thread(target=lambda: results.setdefault(0, runtimes[0](first_x)))
    first.start()
    assert blocking.entries.acquire(timeout=10)  # the first call wrote the buffer and is held in tanh
    second = threading.Thread(target=lambda: results.setdefault(1, runtimes[1](second_x)))
    second.start()
    blocking.entries.acquire(timeout=1)  # before the fix the second call got here too, its write done
    blocking.release.set()
    first.join(10)
    second.join(10)
    torch.testing.assert_close(results[0], expected[0])
    torch.testing.assert_close(results[1], expected[1])


def test_a_call_on_a_busy_runtime_of_a_state_writing_model_is_still_refused(one_thread):
    """Taking turns is between runtimes: a second thread's call on a runtime whose own call runs
    is refused, not queued behind it."""
    model, pool, blocking = _state_writing_pool(StaticOptions())
    runtime = pool.module.runtime()
    x = torch.randn(2, 8)
    runtime(x)
    blocking.armed = True
    results: dict[str, torch.Tensor] = {}
    first = threading.Thread(target=lambda: results.setdefault("first", runtime(x)))
    first.start()
    assert blocking.inside.wait(10)
    with pytest.raises(ConcurrentUseError, match="writes_then_reads"):
        runtime(x)
    blocking.release.set()
    first.join(10)
    with torch.no_grad():
        torch.testing.assert_close(results["first"], model(x))
