"""Timing prepared programs against each other at prepare time, on the example inputs.

Some prepare-time choices trade one kind of speed for another (several streams against one, fused
oneDNN kernels against ATen's own): which wins depends on the model's shapes and on the machine at
the time, so the choices that depend on it are measured (:mod:`~srbench.static.stream_choice`,
:mod:`~srbench.static.rewrite_choice`). Each candidate program is bound to a scratch runtime and
run on copies of the example inputs in interleaved rounds (alternating which goes first, so drift
on a shared machine hits both alike), within a small budget.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from srbench.inputs import Inputs
from srbench.static.prepared import PreparedGraph

if TYPE_CHECKING:
    from srbench.static.module import StaticModule

# How long a comparison may take, and how many rounds it needs at least and at most.
BUDGET_SECONDS = 0.5
MIN_ROUNDS, MAX_ROUNDS, WARMUP = 3, 15, 2


def interleaved_medians(
    module: StaticModule, candidates: tuple[PreparedGraph, ...], inputs: Inputs | tuple
) -> list[float]:
    """The median seconds per call of each of ``candidates`` (programs of ``module``) on
    ``inputs`` (one call, or a tuple of positional arguments), which stay untouched."""
    from srbench.static.runtime import StaticRuntime

    inputs = Inputs.coerce(inputs).clone()
    calls = []
    for candidate in candidates:
        runtime = StaticRuntime(module, candidate.device)
        bound = runtime._bind(candidate, candidate.program.compiled(module.name))
        calls.append(bound.forward_unchecked)
    samples: list[list[float]] = [[] for _ in calls]
    deadline = time.perf_counter() + BUDGET_SECONDS
    for round_ in range(-WARMUP, MAX_ROUNDS):
        if round_ >= MIN_ROUNDS and time.perf_counter() > deadline:
            break
        for index in range(len(calls)) if round_ % 2 else reversed(range(len(calls))):
            start = time.perf_counter()
            inputs.call(calls[index])
            if round_ >= 0:
                samples[index].append(time.perf_counter() - start)
    return [statistics.median(values) for values in samples]
