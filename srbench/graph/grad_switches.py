"""A grad-mode switch of the model's that ``torch.export`` drops: refused, not answered without it.

``torch.export`` records a model's ``torch.enable_grad()`` block (or ``torch.set_grad_enabled``)
as ``_set_grad_enabled`` calls, then moves each stretch between two calls into a
``wrap_with_set_grad_enabled`` sub-module (``replace_set_grad_with_hop_pass``); a stretch whose
first node is not the call (it tells them so) is put back inline with its call removed, which is
right where the call changes nothing (grad mode already so). But a stretch that holds a
control-flow op (``torch.cond``) starts with the branches' ``get_attr`` nodes, so a block turning
grad mode on around a ``cond`` is put back inline too, its switch dropped (torch 2.13): its
results, which require grad in eager even under ``no_grad`` (they depend on parameters), came
back without history from export's program and from srbench's, and the equivalence check found
them so (values equal, ``requires_grad`` not).

:func:`dropped_grad_switches` notes, for the one export it wraps, each such call that would have
changed grad mode where it ran and was removed; the capture refuses the model, naming it
(:class:`~srbench.graph.capture.CaptureError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.fx
from torch._export.passes import replace_set_grad_with_hop_pass as _pass

DROPPED_GRAD_SWITCH = (
    "torch.export drops the model's grad-mode switch around a control-flow op (an enable_grad block "
    "holding torch.cond): its results would lose the history they have in eager"
)


@contextmanager
def dropped_grad_switches() -> Iterator[list[bool]]:
    """While the block runs (one ``torch.export`` call, under srbench's export lock), the grad
    mode of each ``_set_grad_enabled`` call export removes although it differs from the mode the
    export runs under; empty where export kept every switch as a ``wrap_with_set_grad_enabled``."""
    dropped: list[bool] = []
    inline = _pass._remove_set_grad_and_inline

    def noting(node: torch.fx.Node) -> None:
        assert isinstance(node.target, str)
        stretch = getattr(node.graph.owning_module, node.target)
        ambient = torch.is_grad_enabled()
        dropped.extend(
            call.args[0]
            for call in stretch.graph.nodes
            if _pass._is_set_grad_enabled_node(call) and call.args[0] != ambient
        )
        inline(node)

    _pass._remove_set_grad_and_inline = noting
    try:
        yield dropped
    finally:
        _pass._remove_set_grad_and_inline = inline
