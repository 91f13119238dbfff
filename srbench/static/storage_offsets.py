"""Storage offsets that ops take as absolute, counted where the static runtime puts their input.

``as_strided`` (and ``as_strided_``, ``as_strided_copy``, ``as_strided_scatter``) place their
result at a storage offset counted from the start of their input's storage, not from where the
input itself starts. In eager a tensor the model computes starts a storage of its own, so an
offset the model (or ``decompose``'s functionalization: ``fill_diagonal_`` becomes an
``as_strided`` and an ``as_strided_scatter`` at offset 0) wrote for it is one from that tensor's
first element. In the static runtime the same tensor lives in the slab past other tensors: the op
read, or scattered into, other elements, silently.

Before the ops are resolved, such an offset on a tensor the program computes becomes an
:class:`~srbench.static.calls.OffsetFrom` the input: its distance from the input's own offset
when captured, added to the input's offset at every run. A tensor whose storage is the caller's
(an input, a parameter or buffer, or a view of one) is the very storage eager addresses, and
keeps the absolute offset.
"""

from __future__ import annotations

import torch
import torch.fx

from srbench.static.calls import OffsetFrom

aten = torch.ops.aten

# Each op whose storage offset argument is absolute, and that argument's position.
ABSOLUTE_OFFSET_POSITION: dict[torch._ops.OpOverload, int] = {
    aten.as_strided.default: 3,
    aten.as_strided_.default: 3,
    aten.as_strided_copy.default: 3,
    aten.as_strided_scatter.default: 4,
}
_OFFSET = "storage_offset"


def _storage_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose result owns ``node``'s storage: up its first argument while its op returns
    an alias of it (a view, or an in-place op)."""
    while node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and node.args:
        returns = node.target._schema.returns
        base = node.args[0]
        if not returns or returns[0].alias_info is None or not isinstance(base, torch.fx.Node):
            break
        node = base
    return node


def offsets_from_computed_inputs(graph: torch.fx.Graph) -> list[str]:
    """Give each absolute-offset op on a tensor the program computes its offset relative to that
    tensor (see the module docstring), in place; the names of the nodes changed."""
    changed = []
    for node in graph.nodes:
        op = node.target if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) else None
        position = ABSOLUTE_OFFSET_POSITION.get(op) if op is not None else None
        if position is None or not node.args or not isinstance(node.args[0], torch.fx.Node):
            continue
        base = node.args[0]
        given = node.args[position] if len(node.args) > position else node.kwargs.get(_OFFSET)
        captured = base.meta.get("val")
        if type(given) is not int or not isinstance(captured, torch.Tensor) or _storage_root(base).op == "placeholder":
            continue
        start = captured.storage_offset()
        if not isinstance(start, int):  # a symbolic offset: where the base starts is not fixed
            continue
        relative = OffsetFrom(base, given - start)
        if len(node.args) > position:
            node.args = (*node.args[:position], relative, *node.args[position + 1 :])
        else:
            node.kwargs = {**node.kwargs, _OFFSET: relative}
        changed.append(node.name)
    return changed
