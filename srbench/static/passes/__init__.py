"""Prepare-time rewrites of a captured graph: give back what ``torch.export`` took apart.

``torch.export`` records the ops a model's Python calls while tracing, which is not always what
eager PyTorch runs: in eval mode without autograd, ``nn.TransformerEncoderLayer`` takes one fused
kernel (``aten._transformer_encoder_layer_fwd``) that tracing never sees, and a convolution
followed by an inference batch norm is two passes over memory where one suffices. Each pass here
finds such a region, builds its replacement, and proposes it as a :class:`Candidate`;
:func:`apply_passes` checks every candidate on the example inputs (the replacement must give the
region's own result within the tolerance) and rewrites the graph only where it does. Refused
candidates are kept, with the reason, so ``srbench profile`` can say which node was not rewritten
and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from srbench.graph import CapturedGraph
from srbench.options import StaticOptions
from srbench.static.passes import mkldnn_out  # noqa: F401 - registers the out variants of what the passes emit
from srbench.static.passes.apply import Candidate, Pass, PassContext, Rewrite, RewriteOutcome, apply_passes
from srbench.static.passes.fused_convolution import fused_convolutions
from srbench.static.passes.fused_transformer import fused_transformer_layers
from srbench.static.passes.lean_attention import lean_attentions

# Self-attention as a lean program first: a transformer layer whose attention it takes is then not
# fused (their regions overlap). The other program fuses eager's layers first, and the lean
# rewrites take what they leave; which of the two runs is measured at prepare time
# (:func:`srbench.static.rewrite_choice.prefer_lean_attention`).
PASSES: tuple[Pass, ...] = (lean_attentions, fused_transformer_layers, fused_convolutions)
FUSED_LAYER_PASSES: tuple[Pass, ...] = (fused_transformer_layers, lean_attentions, fused_convolutions)

__all__ = [
    "FUSED_LAYER_PASSES",
    "PASSES",
    "Candidate",
    "Pass",
    "PassContext",
    "Rewrite",
    "RewriteOutcome",
    "apply_passes",
    "rewrite_graph",
]


def rewrite_graph(
    captured: CapturedGraph,
    model: torch.nn.Module,
    values: Mapping[str, Any],
    options: StaticOptions,
    passes: Sequence[Pass] = PASSES,
) -> tuple[Rewrite, ...]:
    """Run ``passes`` over ``captured``'s graph (in place) under ``options``' tolerance."""
    if not options.rewrite or options.decompose:  # the passes match export's pre-dispatch ops only
        return ()
    context = PassContext(captured.graph_module, model, captured.exported, values)
    return apply_passes(context, passes, rtol=options.rewrite_rtol, atol=options.rewrite_atol)
