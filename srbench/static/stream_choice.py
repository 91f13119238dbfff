"""A tentative multistream program is kept only if it runs faster than one stream, measured.

The critical-path scheduler's gain is an estimate from a cost model; what concurrency really
gives depends on the machine at the time: on an idle machine two threads run two kernels at
once, on a busy one the GIL changes hands through the OS scheduler and every hand-off costs a
wake-up. So at prepare time, a program on several streams whose schedule is tentative
(:attr:`~srbench.schedulers.schedule.Schedule.tentative`) and its one-stream twin are each bound
to a scratch runtime and run on the example inputs, in interleaved rounds
(:func:`~srbench.static.timing.compare`, by the wall clock: CPU time would not see what the
streams do at once), and the multistream program is kept only if the per-round ratio (several /
one) is clearly below ``1 - MARGIN``: its confidence interval wholly below. A measurement that
cannot tell keeps the one stream. The measured medians are added to the kept program's schedule
notes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from srbench.inputs import Inputs
from srbench.static.prepared import PreparedGraph
from srbench.static.timing import Side, compare

if TYPE_CHECKING:
    from srbench.static.module import StaticModule

# Several streams must be clearly this much faster than one to be kept (concurrency that does not
# clearly pay is not worth its threads and memory). One measurement of the batch-32 towers spreads
# by about 10% on an idle 2-core machine (two streams 0.86-0.90 of one in most prepares): before,
# a ratio of the medians near the line was measured again and the two averaged.
MARGIN = 0.05


def keep_faster(module: StaticModule, prepared: PreparedGraph, inputs: Inputs | tuple) -> PreparedGraph:
    """``prepared``, or its one-stream twin unless ``prepared`` measured clearly faster (see the
    module docstring); ``inputs``: the example call (or a tuple of positional arguments)."""
    twin = prepared.one_stream
    if twin is None:
        return prepared
    several = replace(prepared, one_stream=None)
    threshold = 1 - MARGIN
    comparison = compare(module, (several, twin), inputs, threshold)
    faster = several if comparison.side_of(threshold) is Side.BELOW else twin
    assert faster.schedule is not None
    several_seconds, one_seconds = comparison.medians
    measured = {1: one_seconds, several.streams_used: several_seconds}
    return replace(
        faster, schedule=replace(faster.schedule, notes={**faster.schedule.notes, "measured_seconds": measured})
    )
