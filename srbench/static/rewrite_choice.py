"""Prepare-time rewrites are kept only where the rewritten program is not clearly slower, measured.

A rewrite is checked for its result when it is made (:mod:`srbench.static.passes`), but whether
it pays depends on shapes: a oneDNN convolution computes channels-last, so a graph whose input
is read by several convolutions, or whose results are concatenated in eager's layout, pays a
reorder each time, and on an inception-style block the fused program ran 1.11-1.14x eager's time
where the program without rewrites ran 0.95x. No rule over the graph predicts that reliably, so
the program with the rewrites and the one without are both prepared and timed on the example
inputs (:func:`~srbench.static.timing.interleaved_medians`). The rewrites stay unless their
program is at least :data:`MARGIN` slower: they also save memory (a batch norm folded away is an
intermediate less), and a smaller difference is within what a prepare-time measurement on a
shared machine can tell apart. A measurement that says "slower" is taken again, and the
rewrites are dropped only if both say so. The transformer encoder's fused layers (as a rule 2-5%
faster than the decomposed program, and 10% less memory) measured 8% slower in one prepare of
sixteen under load, and the program ran decomposed. With two busy loops beside the prepares on the
2-core machine, one measurement at a 5% margin kept them in 7 prepares of 12, two measurements in
12 of 12 at 5% and 11 of 12 at 10% (single measurements there spread from 0.93x to 1.23x). The
margin is the wider one: the rewrites save memory, and a difference under 10% is what one loaded
moment shows. A rewrite that really costs time (the inception-style block above, 1.17-1.20x the
plain program's time) measures slower both times. They are kept or dropped together, not one by
one: each subset would need its own program, and rewrites interact (a reorder one saves another
may need).
Dropped rewrites stay on the program as :attr:`~RewriteOutcome.SLOWER`, with both timings, for
``srbench profile``.

Before that, where self-attention rewritten as a lean program
(:mod:`~srbench.static.passes.lean_attention`) took the place of eager's fused
``nn.TransformerEncoderLayer`` kernel, the program with the fused layers is prepared too and the
two are timed the same way (:func:`prefer_lean_attention`): the lean one holds less (the zoo's
``transformer_encoder``: 769 KiB against 1,024, eager's peak) and is kept unless it measures
clearly slower, by the same rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from srbench.inputs import Inputs
from srbench.static.passes import RewriteOutcome
from srbench.static.passes.fused_transformer import PASS_NAME as FUSED_PASS
from srbench.static.passes.lean_attention import PASS_NAME as LEAN_PASS
from srbench.static.prepared import PreparedGraph
from srbench.static.timing import interleaved_medians

if TYPE_CHECKING:
    from srbench.static.module import StaticModule

# The rewritten program is dropped only when it measures this much slower than the one without.
MARGIN = 0.10
# How many measurements must all find the rewritten program that much slower before it is dropped.
MEASUREMENTS = 2


def keep_faster_rewrites(
    module: StaticModule,
    rewritten: PreparedGraph,
    without_rewrites: Callable[[], PreparedGraph],
    inputs: Inputs | tuple,
) -> PreparedGraph:
    """``rewritten``, or the program ``without_rewrites()`` prepares when ``rewritten`` measured
    clearly slower on ``inputs`` (see the module docstring); nothing is measured (or prepared
    again) when no rewrite applied."""
    if not any(rewrite.outcome is RewriteOutcome.APPLIED for rewrite in rewritten.rewrites):
        return rewritten
    plain = without_rewrites()
    slower = _clearly_slower(module, rewritten, plain, inputs)
    if slower is None:
        return rewritten
    reason = "with the rewrites the program measured {:.3g} ms, without them {:.3g} ms".format(*slower)
    dropped = tuple(
        replace(rewrite, outcome=RewriteOutcome.SLOWER, reason=reason)
        if rewrite.outcome is RewriteOutcome.APPLIED
        else rewrite
        for rewrite in rewritten.rewrites
    )
    return replace(plain, rewrites=dropped)


def _clearly_slower(
    module: StaticModule, first: PreparedGraph, second: PreparedGraph, inputs: Inputs | tuple
) -> tuple[float, float] | None:
    """Both programs' times in ms (of the last measurement) where ``first`` is clearly slower than
    ``second``; ``None`` where one of :data:`MEASUREMENTS` measurements finds it within
    :data:`MARGIN`."""
    for _ in range(MEASUREMENTS):
        medians = interleaved_medians(module, (_one_stream(first), _one_stream(second)), inputs)
        first_ms, second_ms = (seconds * 1e3 for seconds in medians)
        if first_ms <= (1 + MARGIN) * second_ms:
            return None
    return first_ms, second_ms


def prefer_lean_attention(
    module: StaticModule,
    lean: PreparedGraph,
    fused: Callable[[], PreparedGraph],
    inputs: Inputs | tuple,
) -> PreparedGraph:
    """``lean``, or the program ``fused()`` prepares (eager's fused transformer layers first, where
    ``lean`` runs their attention as a lean program; the lean rewrites elsewhere) when ``lean``
    measured clearly slower on ``inputs`` (see the module docstring); nothing is measured where
    no fused layer gave way."""
    if not any(rewrite.taken_by == LEAN_PASS and rewrite.pass_name == FUSED_PASS for rewrite in lean.rewrites):
        return lean
    other = fused()
    slower = _clearly_slower(module, lean, other, inputs)
    if slower is None:
        return lean
    reason = "with the lean attention the program measured {:.3g} ms, with eager's fused layers {:.3g} ms".format(
        *slower
    )
    dropped = tuple(
        replace(rewrite, outcome=RewriteOutcome.SLOWER, reason=reason)
        if rewrite.pass_name == LEAN_PASS and rewrite.taken_by == FUSED_PASS
        else rewrite
        for rewrite in other.rewrites
    )
    return replace(other, rewrites=dropped)


def _one_stream(prepared: PreparedGraph) -> PreparedGraph:
    """What runs on one stream: a tentative multistream program's twin (streams are chosen after)."""
    return prepared.one_stream if prepared.one_stream is not None else prepared
