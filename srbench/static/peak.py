"""The peak bytes of a prepared program, measured at prepare time on the example inputs.

Whether serving fallback results from the slab (:mod:`srbench.static.serving`) lowers a run's
peak or raises it depends on what the ops allocate for themselves besides their results, which
the plan does not see; so where the module measures its choices, both programs are run once under
the allocation observer (:func:`srbench.measure.memory.observe_allocations`, as the latency
benchmark counts a run's peak) and the one holding less is kept (see ``prepare_graph``).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from srbench.inputs import Inputs
from srbench.static.timing import bound_forward, state_kept

if TYPE_CHECKING:
    from srbench.static.module import StaticModule
    from srbench.static.prepared import PreparedGraph


def measured_peak(module: StaticModule, prepared: PreparedGraph, inputs: Inputs | tuple) -> int:
    """The most bytes one warm run of ``prepared`` (a program of ``module``) holds on ``inputs``,
    which stay untouched: what it allocates, outputs included, plus the slab it keeps between
    runs."""
    from srbench.measure.memory import observe_allocations

    inputs = Inputs.coerce(inputs).clone()
    runtime, forward = bound_forward(module, prepared)
    call = functools.partial(inputs.call, forward)
    with state_kept(prepared):
        call()  # warm: allocations made once (oneDNN primitives, lazily made constants) are not a run's
        observed = observe_allocations(call, prepared.device.type)
    return observed.peak_bytes + runtime.slab_bytes
