"""The outside-models sweep's concurrency check (``benchmarks/outside_threads.py``): one prepared
module, a runtime per thread, two threads calling at once, every result against eager's."""

from __future__ import annotations

import threading
import time

import torch
from torch import nn

from benchmarks.outside_fresh import sweep_fresh
from benchmarks.outside_models import OPTION_SETS, Outcome, OutsideModel, check_named
from benchmarks.outside_threads import CALLS_PER_THREAD, THREADS, check_threads
from srbench.inputs import Inputs
from srbench.measure.equivalence import eager_answer
from srbench.options import StaticOptions
from srbench.static import RuntimePool


class TwoBranches(nn.Module):
    """Two independent branches, so the forced two-stream program runs one on each stream."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.left = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width))
        self.right = nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.left(x) * self.right(x)


def _inputs(width: int = 16):
    def make(shape: int) -> Inputs:
        return Inputs((torch.randn(1 + 3 * shape, width, generator=torch.Generator().manual_seed(shape)),), {})

    return make


def _case(width: int = 16) -> OutsideModel:
    return OutsideModel("two_branches", "two independent branches", lambda: TwoBranches(width), _inputs(width))


def test_the_thread_checks_pass_a_model_prepared_fresh():
    row = sweep_fresh(_case(), ["threads2", "threads2_forced"])
    assert {name: check.outcome for name, check in row.checks.items()} == dict.fromkeys(
        ("threads2", "threads2_forced"), Outcome.EQUIVALENT
    ), row.summary()


def test_the_forced_thread_check_runs_the_multistream_program(monkeypatch):
    """``threads2_forced`` prepares under ``streams2_forced``: two streams inside each runtime."""
    seen: list[StaticOptions] = []
    original = check_threads.__globals__["_caller"]

    def recording(thread, pool, *rest):
        seen.append(pool.module.options)
        assert pool.module.prepared.streams_used == 2
        original(thread, pool, *rest)

    monkeypatch.setitem(check_threads.__globals__, "_caller", recording)
    case = _case()
    torch.manual_seed(0)
    model = case.build().eval()
    calls = [case.make_inputs(0), case.make_inputs(1)]
    check, runtime = check_named(model, case, calls, [eager_answer(model, call) for call in calls], "threads2_forced")
    assert check.outcome is Outcome.EQUIVALENT, check.detail
    assert runtime is None
    assert seen and all(options == StaticOptions(**OPTION_SETS["streams2_forced"]) for options in seen)


def test_each_result_is_compared_with_eager_for_its_own_inputs():
    """Answers of the wrong shape (eager's answers swapped) fail the check, naming the call."""
    case = _case()
    torch.manual_seed(0)
    model = case.build().eval()
    calls = [case.make_inputs(0), case.make_inputs(1)]
    swapped = [eager_answer(model, calls[1]), eager_answer(model, calls[0])]
    check = check_threads(model, case, calls, swapped, StaticOptions())
    assert check.outcome is Outcome.WRONG
    assert "call 0 (shape" in check.detail


def test_two_runtimes_are_called_at_once(monkeypatch):
    """Each thread takes its own runtime from the pool, and the barrier makes calls overlap (a
    model whose calls take a millisecond or more, so overlap does not rest on a lucky wake-up)."""
    intervals: dict[int, list[tuple[float, float]]] = {}
    runtimes: dict[int, int] = {}
    lock = threading.Lock()
    original = RuntimePool.runtime

    def timed_runtime(pool: RuntimePool):
        runtime = original(pool)

        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return runtime(*args, **kwargs)
            finally:
                with lock:
                    intervals.setdefault(threading.get_ident(), []).append((start, time.perf_counter()))

        with lock:
            runtimes[threading.get_ident()] = id(runtime)
        return call

    monkeypatch.setattr(RuntimePool, "runtime", timed_runtime)
    case = _case(width=384)
    torch.manual_seed(0)
    model = case.build().eval()
    calls = [case.make_inputs(0), case.make_inputs(1)]
    expected = [eager_answer(model, call) for call in calls]
    check = check_threads(model, case, calls, expected, StaticOptions())
    assert check.outcome is Outcome.EQUIVALENT, check.detail
    assert len(runtimes) == THREADS and len(set(runtimes.values())) == THREADS
    first, second = intervals.values()
    assert len(first) == len(second) == CALLS_PER_THREAD
    overlapping = sum(a[0] < b[1] and b[0] < a[1] for a, b in zip(first, second))
    assert overlapping > 0
