"""Prepare-time rewrites are kept only where the rewritten program is not clearly slower, measured.

A rewrite is checked for its result when it is made (:mod:`srbench.static.passes`), but whether
it pays depends on shapes: a oneDNN convolution computes channels-last, so a graph whose input
is read by several convolutions, or whose results are concatenated in eager's layout, pays a
reorder each time, and on an inception-style block the fused program ran 1.11-1.14x eager's time
where the program without rewrites ran 0.95x. No rule over the graph predicts that reliably, so
the program with the rewrites and the one without are both prepared and timed on the example
inputs (:func:`~srbench.static.timing.compare`). The rewrites stay unless their program is
clearly at least :data:`MARGIN` slower: the per-round ratio's confidence interval wholly above
``1 + MARGIN`` (a measurement that cannot tell keeps them). They also save memory (a batch norm
folded away is an intermediate less), and a smaller difference is what one loaded moment shows:
the transformer encoder's fused layers (as a rule 2-5% faster than the decomposed program, and
10% less memory) measured 8% slower in one prepare of sixteen under load, and single
measurements with two busy loops beside the prepares on the 2-core machine spread from 0.93x to
1.23x. Before, the rule was two measurements each finding the ratio of the medians above
``1 + MARGIN``; under load that still flipped (see :mod:`~srbench.static.timing`). A rewrite
that really costs time (the inception-style block above, 1.17-1.20x the plain program's time)
measures clearly slower. They are kept or dropped together, not one by one: each subset would
need its own program, and rewrites interact (a reorder one saves another may need).
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
from srbench.static.timing import Comparison, Side, compare

if TYPE_CHECKING:
    from srbench.static.module import StaticModule

# The rewritten program is dropped only when it measures clearly this much slower than the one without.
MARGIN = 0.10


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
    reason = _reason(slower, "with the rewrites", "without them")
    dropped = tuple(
        replace(rewrite, outcome=RewriteOutcome.SLOWER, reason=reason)
        if rewrite.outcome is RewriteOutcome.APPLIED
        else rewrite
        for rewrite in rewritten.rewrites
    )
    return replace(plain, rewrites=dropped)


def _clearly_slower(
    module: StaticModule, first: PreparedGraph, second: PreparedGraph, inputs: Inputs | tuple
) -> Comparison | None:
    """The comparison that found ``first`` clearly at least :data:`MARGIN` slower than ``second``;
    ``None`` where it did not (faster, within the margin, or undecided)."""
    threshold = 1 + MARGIN
    comparison = compare(module, (_one_stream(first), _one_stream(second)), inputs, threshold)
    return comparison if comparison.side_of(threshold) is Side.ABOVE else None


def _reason(slower: Comparison, first: str, second: str) -> str:
    """Why a program was dropped, for ``srbench profile``: both medians and the per-round ratio."""
    first_ms, second_ms = (seconds * 1e3 for seconds in slower.medians)
    return f"{first} the program measured {first_ms:.3g} ms, {second} {second_ms:.3g} ms ({slower.describe()})"


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
    reason = _reason(slower, "with the lean attention", "with eager's fused layers")
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
