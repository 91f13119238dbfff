"""Observe srbench's static runtime: its generated code's observed variant, one run.

``forward_observed`` (:class:`srbench.static.codegen.Entry`) is the runtime's own straight-line
code with each node's lines inside a ``record_function`` range named after the node, bound to
the runtime's slab and managed tensors like ``forward``: what it allocates is what ``forward``
allocates. The slab's own allocation (with ``cleanup_activations``, a resize before the first
node and after the last) happens outside every node and is counted as the runtime's own.
"""

from __future__ import annotations

from srbench.graph.ambient_autocast import ambient_autocast
from srbench.inputs import Inputs
from srbench.observe.observation import Observation, observe_run
from srbench.observe.record import record
from srbench.static import StaticModule
from srbench.static.errors import ambient_autocast_error


def observe_static(module: StaticModule, inputs: Inputs | tuple, *, warmup: int = 1) -> Observation:
    """Run ``module`` on ``inputs`` (one call, or its positional arguments) with a fresh runtime
    ``warmup`` times, then once observed. A call in another form than the example's (keyword for
    positional, defaults left out) is moved to the prepared form first, as ``run`` does. A call
    under an autocast the caller entered is refused, as ``run`` refuses it (the program would run
    uncast, unlike eager), before any run: the observed one calls the bound program directly,
    past ``run``'s check, so with ``warmup=0`` nothing else would refuse it."""
    if ambient_autocast() is not None:
        raise ambient_autocast_error()
    inputs = module.in_prepared_form(Inputs.coerce(inputs))
    runtime = module.runtime()
    for _ in range(warmup):
        inputs.call(runtime)
    bound = runtime.bind(inputs)
    run = record(lambda: inputs.call(bound.forward_observed), str(module.prepared.device))
    return observe_run(run, runtime="srbench", model=module.name)
