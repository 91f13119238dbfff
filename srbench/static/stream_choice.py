"""A tentative multistream program is kept only if it runs faster than one stream, measured.

The critical-path scheduler's gain is an estimate from a cost model; what concurrency really
gives depends on the machine at the time: on an idle machine two threads run two kernels at
once, on a busy one the GIL changes hands through the OS scheduler and every hand-off costs a
wake-up. So at prepare time, a program on several streams whose schedule is tentative
(:attr:`~srbench.schedulers.schedule.Schedule.tentative`) and its one-stream twin are each bound
to a scratch runtime and run on the example inputs, in interleaved rounds, and the multistream
program is kept only if its median is at least :data:`MARGIN` below the twin's (a result close
to that line, :data:`UNDECIDED`, is measured again and the two are averaged). The measured
medians are added to the kept program's schedule notes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from srbench.inputs import Inputs
from srbench.static.prepared import PreparedGraph
from srbench.static.timing import interleaved_medians

if TYPE_CHECKING:
    from srbench.static.module import StaticModule

# Several streams must be this much faster than one to be kept (a measurement at prepare time
# is noisy; concurrency that does not clearly pay is not worth its threads and memory).
MARGIN = 0.05
# A ratio (several / one) within this distance of the threshold (1 - MARGIN) is measured once
# more and decided on both measurements: one measurement of the batch-32 towers spreads by about
# 10% on an idle 2-core machine (two streams 0.86-0.90 of one in most prepares), enough to land
# on either side of the threshold now and then.
UNDECIDED = 0.05


def keep_faster(module: StaticModule, prepared: PreparedGraph, inputs: Inputs | tuple) -> PreparedGraph:
    """``prepared``, or its one-stream twin when that measured as fast (see the module docstring);
    ``inputs``: the example call (or a tuple of positional arguments)."""
    twin = prepared.one_stream
    if twin is None:
        return prepared
    several = replace(prepared, one_stream=None)
    medians = interleaved_medians(module, (several, twin), inputs)
    if abs(medians[0] / medians[1] - (1 - MARGIN)) < UNDECIDED:
        again = interleaved_medians(module, (several, twin), inputs)
        medians = [(first + second) / 2 for first, second in zip(medians, again)]
    faster = several if medians[0] < (1 - MARGIN) * medians[1] else twin
    assert faster.schedule is not None
    measured = {1: medians[1], several.streams_used: medians[0]}
    return replace(
        faster, schedule=replace(faster.schedule, notes={**faster.schedule.notes, "measured_seconds": measured})
    )
