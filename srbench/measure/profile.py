"""Per-op profile of a prepared runtime: milliseconds per call spent in each kind of node.

Runtimes with their own per-node timing provide ``op_profile(inputs, iterations)`` (srbench's
static runtime, PyTorch's Static Runtime); for the others, ``torch.profiler`` attributes the
self time of every ATen op, which sums to the time spent in operators.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.profiler import ProfilerActivity, profile

from srbench.inputs import Inputs


def profiler_op_times(run: Callable[[], Any], iterations: int) -> dict[str, float]:
    """Self CPU milliseconds per call of each ATen op ``run`` calls, averaged over ``iterations``."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(iterations):
            run()
    times = {
        event.key: event.self_cpu_time_total / 1000.0 / iterations
        for event in prof.key_averages()
        if event.key.startswith(("aten::", "prim::", "quantized::")) and event.self_cpu_time_total > 0
    }
    return dict(sorted(times.items(), key=lambda item: -item[1]))


def op_profile(runtime: Callable[..., Any], inputs: Inputs, *, iterations: int = 10) -> dict[str, float]:
    """Milliseconds per call by node kind for ``runtime`` on the call ``inputs``, largest first."""
    own = getattr(runtime, "op_profile", None)
    if callable(own):
        times = own(inputs, iterations)
        return dict(sorted(times.items(), key=lambda item: -item[1]))
    inputs.call(runtime)  # warm-up outside the profile
    return profiler_op_times(lambda: inputs.call(runtime), iterations)
