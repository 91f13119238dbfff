"""The outside-models sweep's concurrency check: one prepared module, one runtime per thread.

The sweep's other checks call each model from one thread; a server calls one prepared
:class:`~srbench.static.StaticModule` from several, each through its own
:class:`~srbench.static.StaticRuntime` (thread mode 2, :class:`~srbench.static.RuntimePool`).
Here two Python threads take their runtimes from one pool and call them at once: before each
call both wait at a barrier, so the calls overlap, and the two threads run the model's two
shapes out of phase (one shape 0 while the other runs shape 1, then the other way round), so
each call has inputs unlike the other thread's: a slab, a mailbox or a program shared by
mistake gives the other call's numbers, where identical inputs would hide it. The second
shape's program is prepared while the other thread runs the first. Every result, and every
input the model writes, is compared with eager's answer to those inputs, computed beforehand in
one thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.outside_models import Check, Outcome, OutsideModel
from srbench.formatting import error_summary

THREADS = 2
CALLS_PER_THREAD = 20
BARRIER_TIMEOUT_S = 600.0  # a call that hangs (a deadlock between the threads) fails the check
JOIN_TIMEOUT_S = 2 * BARRIER_TIMEOUT_S


@dataclass
class _Failures:
    """The first failure of any thread (the others stop at their next barrier)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    first: tuple[int, BaseException] | None = None

    def note(self, thread: int, error: BaseException) -> None:
        with self.lock:
            if self.first is None:
                self.first = (thread, error)


def steady_answers(expected: Sequence[Any]) -> list[Any]:
    """Eager's answer to each shape once the model has been called: the third answer, to shape
    0 again, where there is one (a model whose first call fills a cache answers later calls so)."""
    return [expected[2] if len(expected) > 2 else expected[0], expected[1]]


def _caller(
    thread: int,
    pool: Any,
    case: OutsideModel,
    calls: Sequence[Any],
    answers: Sequence[Any],
    barrier: threading.Barrier,
    failures: _Failures,
    intra_op: int,
) -> None:
    """One thread's calls: its own runtime, its own copies of the inputs, shapes alternating."""
    from srbench.measure.equivalence import compare
    from srbench.runtimes import intra_op_threads

    try:
        with intra_op_threads(intra_op):  # a new thread's count is the machine's, not the caller's
            runtime = pool.runtime()
            for index in range(CALLS_PER_THREAD):
                shape = (index + thread) % len(calls)
                call = calls[shape].clone()
                barrier.wait()
                output = call.call(runtime)
                run = f"thread {thread}, call {index} (shape {shape})"
                answer = answers[shape]
                compare(output, answer.outputs, rtol=case.rtol, atol=case.atol, run=run)
                after = (call.args, dict(call.kwargs))
                eager_after = (answer.inputs_after.args, dict(answer.inputs_after.kwargs))
                compare(after, eager_after, rtol=0, atol=0, run=f"{run}, its inputs after the call")
    except threading.BrokenBarrierError:
        pass  # the other thread failed first and aborted the barrier: its error is the answer
    except BaseException as error:  # every failure is reported, the other thread stopped
        failures.note(thread, error)
        barrier.abort()


def check_threads(model: Any, case: OutsideModel, calls: Sequence[Any], expected: Sequence[Any],
                  options: Any) -> Check:  # fmt: skip
    """Prepare ``model`` once under ``options`` on shape 0 and call it from :data:`THREADS`
    threads at once, :data:`CALLS_PER_THREAD` calls each (see the module's docstring)."""
    import torch

    from srbench.measure.equivalence import EquivalenceError
    from srbench.static import RuntimePool, StaticModule

    try:
        pool = RuntimePool(StaticModule(model, calls[0], options, name=case.name))
    except Exception as error:  # a refusal to prepare is the check's answer, as in the others
        return Check(Outcome.ERROR, error_summary(error)[:200])
    answers = steady_answers(expected)
    barrier = threading.Barrier(THREADS, timeout=BARRIER_TIMEOUT_S)
    failures = _Failures()
    intra_op = torch.get_num_threads()
    threads = [
        threading.Thread(
            target=_caller, args=(index, pool, case, calls, answers, barrier, failures, intra_op), daemon=True
        )
        for index in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_TIMEOUT_S)
    hung = [index for index, thread in enumerate(threads) if thread.is_alive()]
    if hung:  # a call that never returns (a deadlock): daemon threads, so the sweep goes on
        return Check(Outcome.ERROR, f"thread {hung[0]} still in a call after {JOIN_TIMEOUT_S:.0f} s")
    if failures.first is not None:
        index, failure = failures.first
        outcome = Outcome.WRONG if isinstance(failure, EquivalenceError) else Outcome.ERROR
        return Check(outcome, f"thread {index}: {error_summary(failure)}"[:200])
    if pool.runtimes_created != THREADS:
        return Check(Outcome.ERROR, f"{pool.runtimes_created} runtimes for {THREADS} threads")
    return Check(Outcome.EQUIVALENT)
