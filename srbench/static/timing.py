"""Timing prepared programs against each other at prepare time, on the example inputs.

Some prepare-time choices trade one kind of speed for another (several streams against one, fused
oneDNN kernels against ATen's own): which wins depends on the model's shapes and on the machine at
the time, so the choices that depend on it are measured (:mod:`~srbench.static.stream_choice`,
:mod:`~srbench.static.rewrite_choice`). Each candidate program is bound to a scratch runtime and
run on copies of the example inputs in interleaved rounds (alternating which goes first, so drift
on a shared machine hits both alike), within a small budget.
"""

from __future__ import annotations

import contextlib
import functools
import statistics
import time
from collections.abc import Callable, Iterator
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
# How long the recorded rounds of a comparison may take, and how many it needs at least and at most.
BUDGET_SECONDS = 0.5
MIN_ROUNDS, MAX_ROUNDS = 3, 30


def interleaved_medians(
    module: StaticModule, candidates: tuple[PreparedGraph, ...], inputs: Inputs | tuple
) -> list[float]:
    """The median seconds per call of each of ``candidates`` (programs of ``module``) on
    ``inputs`` (one call, or a tuple of positional arguments), which stay untouched."""
    inputs = Inputs.coerce(inputs).clone()
    calls = [bound_forward(module, candidate)[1] for candidate in candidates]
    with state_kept(*candidates):
        return call_medians(calls, inputs, device_barrier(candidates[0].device))


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


def call_medians(
    calls: list[Callable[..., Any]], inputs: Inputs, barrier: Callable[[], None] = _nothing_queued
) -> list[float]:
    """The median seconds of each of ``calls`` on ``inputs``, after the warm-up, in interleaved
    rounds within the budget (see the constants above); each call timed from ``barrier`` to
    ``barrier`` (:func:`device_barrier`)."""
    samples: list[list[float]] = [[] for _ in calls]
    warm_until = time.perf_counter() + WARMUP_SECONDS
    warmed = 0
    while warmed < MAX_WARMUP and (warmed < MIN_WARMUP or time.perf_counter() < warm_until):
        _round(calls, inputs, barrier, warmed, None)
        warmed += 1
    deadline = time.perf_counter() + BUDGET_SECONDS
    for round_ in range(MAX_ROUNDS):
        if round_ >= MIN_ROUNDS and time.perf_counter() > deadline:
            break
        _round(calls, inputs, barrier, round_, samples)
    return [statistics.median(values) for values in samples]


def _round(
    calls: list[Callable[..., Any]],
    inputs: Inputs,
    barrier: Callable[[], None],
    round_: int,
    samples: list[list[float]] | None,
) -> None:
    """One call of each candidate, in an order that alternates with ``round_``; the seconds each
    took go to ``samples`` (none while warming up)."""
    for index in range(len(calls)) if round_ % 2 else reversed(range(len(calls))):
        barrier()
        start = time.perf_counter()
        inputs.call(calls[index])
        barrier()
        if samples is not None:
            samples[index].append(time.perf_counter() - start)
