"""Timing prepared programs against each other at prepare time, on the example inputs.

Some prepare-time choices trade one kind of speed for another (several streams against one, fused
oneDNN kernels against ATen's own): which wins depends on the model's shapes and on the machine at
the time, so the choices that depend on it are measured (:mod:`~srbench.static.stream_choice`,
:mod:`~srbench.static.rewrite_choice`). Each candidate program is bound to a scratch runtime and
run on copies of the example inputs in interleaved rounds (alternating which goes first, so drift
on a shared machine hits both alike), within a small budget.

On a loaded machine a call's time is its own plus whatever waiting for a core the load adds, in
bursts: the ratio of the two candidates' medians flipped choices (the lean attention against
eager's fused layers, at load average 4-9.6: 5 of 37 prepares). So a comparison decides on the
ratio of each round's two calls, and only where the sign test's interval of its median lies
wholly on one side of the threshold; otherwise it is undecided and the choice keeps its default.
It stops as soon as it is decided (after :data:`MIN_ROUNDS`), so a clear difference costs a few
rounds. Where the candidates do all their work on the calling thread, rounds are timed by that
thread's CPU time, which does not count the waits (:class:`Clock`).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from srbench.inputs import Inputs

if TYPE_CHECKING:
    from srbench.static.module import StaticModule
    from srbench.static.prepared import PreparedGraph
    from srbench.static.runtime import StaticRuntime

# Warm-up: rounds run unrecorded until WARMUP_SECONDS have passed (at least MIN_WARMUP rounds, at
# most MAX_WARMUP). A program's first tens of calls can run well below its pace (a multistream
# program's new threads, oneDNN's primitives made at first use): with two warm-up rounds, the
# batch-32 towers' two streams measured 10-20% slower than one stream in 5 of 5 prepares on an
# idle machine, where warm they run 15% faster (with 10 or 20 warm-up rounds, 5 of 5 kept them).
WARMUP_SECONDS = 0.1
MIN_WARMUP, MAX_WARMUP = 2, 20
# How long the recorded rounds of a comparison may take, and how many it needs at least and at most:
# it stops at MIN_ROUNDS or later once the ratio is clearly on one side of the threshold asked
# about, and at the budget otherwise (undecided).
BUDGET_SECONDS = 0.5
MIN_ROUNDS, MAX_ROUNDS = 8, 200
# How sure a decision must be: the ratio's median is decided above or below a threshold only where
# its distribution-free confidence interval (the sign test's, over the per-round ratios) at this
# level lies wholly on that side. At 8 rounds that means all 8 ratios on one side.
CONFIDENCE = 0.99


class Clock(enum.Enum):
    """What a comparison's rounds are timed by."""

    WALL = "wall clock"
    # The calling thread's CPU time: a call that loses its core to another process is not charged
    # for the wait, which is most of what load adds; right only where the call does all its work
    # on the calling thread.
    THREAD_CPU = "thread CPU time"

    def read(self) -> float:
        return time.thread_time() if self is Clock.THREAD_CPU else time.perf_counter()

    @staticmethod
    def for_candidates(candidates: tuple[PreparedGraph, ...]) -> Clock:
        """The calling thread's CPU time where every candidate runs on the CPU, on one stream, with
        one intra-op thread (all its work on the calling thread); the wall clock otherwise: CPU
        time would not see what several streams or intra-op threads do at once, nor a device's
        kernels."""
        single_threaded = torch.get_num_threads() == 1 and all(
            candidate.device.type == "cpu" and candidate.streams_used == 1 for candidate in candidates
        )
        return Clock.THREAD_CPU if single_threaded else Clock.WALL


class Side(enum.Enum):
    """Where a measured ratio lies against a threshold."""

    ABOVE = "above"
    BELOW = "below"
    UNDECIDED = "undecided"  # the threshold is within the ratio's confidence interval


@dataclass(frozen=True)
class Comparison:
    """Two candidates' seconds, round by round (``first[i]`` and ``second[i]`` ran next to each
    other), by ``clock``. Decisions read the per-round ratios, not the ratio of the two medians: load
    that slows one round slows both of its calls, and a round hit on one side only is one ratio
    among many instead of a shift of one candidate's median."""

    first: tuple[float, ...]
    second: tuple[float, ...]
    clock: Clock = Clock.WALL

    @property
    def medians(self) -> tuple[float, float]:
        """Each candidate's median seconds per call (what the choices report)."""
        return statistics.median(self.first), statistics.median(self.second)

    @property
    def ratios(self) -> list[float]:
        """``first / second`` of each round, ascending."""
        return sorted(first / second for first, second in zip(self.first, self.second))

    def ratio_bounds(self) -> tuple[float, float]:
        """The :data:`CONFIDENCE` interval of the median per-round ratio, from the ratios' order
        statistics (the sign test's: it assumes nothing about how load spreads them); the whole
        range of the ratios where there are too few of them for that confidence."""
        ratios = self.ratios
        count = len(ratios)
        # dropping the `cut` lowest and highest ratios covers the median with 1 - 2 P(X <= cut), X
        # the rounds below it ~ Binomial(count, 1/2): the most that keeps that at CONFIDENCE
        beyond = 0
        while _binomial_tail(count, beyond) <= (1 - CONFIDENCE) / 2:
            beyond += 1
        cut = max(beyond - 1, 0)
        return ratios[cut], ratios[count - 1 - cut]

    def side_of(self, threshold: float) -> Side:
        """Whether the median per-round ratio is clearly above or below ``threshold``."""
        if len(self.first) < MIN_ROUNDS:
            return Side.UNDECIDED
        low, high = self.ratio_bounds()
        if low > threshold:
            return Side.ABOVE
        if high < threshold:
            return Side.BELOW
        return Side.UNDECIDED

    def describe(self) -> str:
        """The ratios' median and interval, the rounds and the clock, for a choice's reason."""
        low, high = self.ratio_bounds()
        median = statistics.median(self.ratios)
        return f"{median:.3g}x per round ({low:.3g}-{high:.3g}x), {len(self.first)} rounds by {self.clock.value}"


def _binomial_tail(count: int, at_most: int) -> float:
    """P(X <= ``at_most``) for X ~ Binomial(``count``, 1/2)."""
    return sum(math.comb(count, k) for k in range(at_most + 1)) / 2**count


def compare(
    module: StaticModule, candidates: tuple[PreparedGraph, PreparedGraph], inputs: Inputs | tuple, threshold: float
) -> Comparison:
    """Two of ``module``'s candidate programs timed against each other on ``inputs`` (one call,
    or a tuple of positional arguments; they stay untouched) until the per-round ratio (first /
    second) is clearly above or below ``threshold``, or the budget is spent (see the constants
    above); by :meth:`Clock.for_candidates`."""
    inputs = Inputs.coerce(inputs).clone()
    calls = [bound_forward(module, candidate)[1] for candidate in candidates]
    clock = Clock.for_candidates(candidates)
    with state_kept(*candidates):
        return compare_calls(calls, inputs, threshold, clock, device_barrier(candidates[0].device))


def bound_forward(module: StaticModule, prepared: PreparedGraph) -> tuple[StaticRuntime, Callable[..., Any]]:
    """A scratch runtime of ``module`` bound to ``prepared`` (one of its candidate programs) and
    that program's ``forward`` without the input check: what prepare-time measurements call."""
    from srbench.static.runtime import StaticRuntime

    runtime = StaticRuntime(module, prepared.device)
    return runtime, runtime._bind(prepared, prepared.program.compiled(module.name)).forward_unchecked


@contextlib.contextmanager
def state_kept(*programs: PreparedGraph) -> Iterator[None]:
    """Give the model's state that ``programs`` write (parameters and buffers written in place,
    buffers rebound to new tensors) back its values and tensors after the timed calls: they are
    not the user's calls, and a step counter, running statistics, an average or a renormalised
    embedding must end as if they had not run."""
    state = list({id(tensor): tensor for program in programs for tensor in program.written_state}.values())
    tables = [(table, key, table[key]) for program in programs for table, key in program.rebound_state]
    with torch.no_grad():
        saved = [tensor.clone() for tensor in state]
    try:
        yield
    finally:
        with torch.no_grad():
            for tensor, value in zip(state, saved):
                tensor.copy_(value)
        for table, key, tensor in tables:
            table[key] = tensor


def device_barrier(device: torch.device) -> Callable[[], None]:
    """What waits for ``device``'s queued work. A CUDA call returns once its kernels are queued:
    timed without waiting, a program that queues fast but runs slowly (one stream against several)
    would look fast. On the CPU every op has ended when the call returns."""
    if device.type == "cuda":
        return functools.partial(torch.cuda.synchronize, device)
    return _nothing_queued


def _nothing_queued() -> None:
    """The CPU's barrier: nothing to wait for."""


def compare_calls(
    calls: list[Callable[..., Any]],
    inputs: Inputs,
    threshold: float,
    clock: Clock = Clock.WALL,
    barrier: Callable[[], None] = _nothing_queued,
) -> Comparison:
    """Two calls on ``inputs`` in interleaved rounds after the warm-up, until their ratio is clearly
    on one side of ``threshold`` or the budget is spent (see the constants above); each call timed
    by ``clock`` from ``barrier`` to ``barrier`` (:func:`device_barrier`)."""
    samples: list[list[float]] = [[] for _ in calls]
    warm_until = time.perf_counter() + WARMUP_SECONDS
    warmed = 0
    while warmed < MAX_WARMUP and (warmed < MIN_WARMUP or time.perf_counter() < warm_until):
        _round(calls, inputs, barrier, clock, warmed, None)
        warmed += 1
    deadline = time.perf_counter() + BUDGET_SECONDS
    comparison = Comparison((), (), clock)
    for round_ in range(MAX_ROUNDS):
        if round_ >= MIN_ROUNDS and time.perf_counter() > deadline:
            break
        _round(calls, inputs, barrier, clock, round_, samples)
        comparison = Comparison(tuple(samples[0]), tuple(samples[1]), clock)
        if comparison.side_of(threshold) is not Side.UNDECIDED:
            break
    return comparison


def _round(
    calls: list[Callable[..., Any]],
    inputs: Inputs,
    barrier: Callable[[], None],
    clock: Clock,
    round_: int,
    samples: list[list[float]] | None,
) -> None:
    """One call of each candidate, in an order that alternates with ``round_``; the seconds each
    took by ``clock`` go to ``samples`` (none while warming up)."""
    for index in range(len(calls)) if round_ % 2 else reversed(range(len(calls))):
        barrier()
        start = clock.read()
        inputs.call(calls[index])
        barrier()
        if samples is not None:
            samples[index].append(clock.read() - start)
