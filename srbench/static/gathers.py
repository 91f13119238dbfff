"""Reads at positions fixed by the input signature, made in one call instead of several.

A program is made for one input signature: every input's shape and strides are guarded at each
call. Where an op reads a tensor at positions that follow from those alone, the positions can be
worked out at prepare time, and a chain of Python calls (about a microsecond each, mostly the call
itself on these sizes) becomes one:

* a chain of views of an input (DLRM and Wide & Deep take each feature's ids as
  ``ids.select(1, i).reshape(-1)``) is one ``as_strided`` of the input: the chain's shape,
  strides and storage offset relative to the input's are fixed (the offset is counted from the
  input's own, which is not guarded);
* a copy of such a chain (a ``reshape`` that cannot view, as the same ids at batch 32) is a gather
  of the input's elements, ``torch.take(input, positions)``;
* advanced indexing with constant index tensors (``products[:, rows, cols]``, DLRM's interaction)
  is the same gather: ``aten.index.Tensor`` has no binding and its ``.out`` overload matches its
  arguments to the schema at every call (about 3 µs), ``torch.take`` with ``out=`` takes under one.

``take`` reads its input as if flattened in row-major order whatever its strides, so the positions
are computed once by running the same views or the same indexing on a grid of the input's
geometry that holds each element's row-major position. They are an ``int64`` constant of the
result's size, offered only up to :data:`MAX_POSITIONS` elements (a gather of more is no longer
bound by the call), from inputs of at most :data:`MAX_GRID` elements (the grid is a prepare-time
tensor of the input's size). These are candidates like any other: the resolver checks each on the
example inputs (a view must view the same bytes with the same geometry, a gather must give the
op's values bit for bit and its strides). Where nothing else reads the chain's views, the one call
is taken without timing it against the op's own (which does not count the views it reads, now
left out); otherwise it is timed against them like any candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
import torch.fx

from srbench.static.calls import Call, Const, OffsetFrom

# The most elements of positions a gather keeps as a constant (512 KiB of int64).
MAX_POSITIONS = 1 << 16
# The most elements of a tensor whose positions grid is made at prepare time (8 MiB of int64).
MAX_GRID = 1 << 20

# Views placed at an absolute storage offset (``as_strided(x, size, stride, offset)``), not relative
# to the tensor they view: where they land does not follow from the input's geometry.
_ABSOLUTE = frozenset({torch.ops.aten.as_strided.default})
# What computing positions may raise on arguments it cannot take (a size read from a node, say).
_REFUSED = (RuntimeError, TypeError, ValueError, IndexError)

_Tensor = torch._C.TensorBase
_take = torch._C._VariableFunctions.take


class ViewChain(NamedTuple):
    """The placeholder a node's first argument views through one or more view ops, and whether
    nothing else reads those views (``private``: reading the input directly makes them dead)."""

    root: torch.fx.Node
    private: bool


def view_chain(node: torch.fx.Node, is_view: Callable[[torch.fx.Node], bool]) -> ViewChain | None:
    """What ``node``'s first argument is a chain of views of (``is_view``: nodes resolved as
    views; a view op's first argument is the tensor it views), or ``None``."""
    if node.target in _ABSOLUTE:
        return None
    current = node.args[0] if node.args else None
    steps, private = 0, True
    while isinstance(current, torch.fx.Node) and current.op == "call_function" and is_view(current):
        if current.target in _ABSOLUTE:
            return None
        private = private and len(current.users) == 1
        current, steps = (current.args[0] if current.args else None), steps + 1
    if steps and isinstance(current, torch.fx.Node) and current.op == "placeholder":
        return ViewChain(current, private)
    return None


def _plain(tensor: Any) -> bool:
    return (
        isinstance(tensor, torch.Tensor)
        and tensor.layout == torch.strided
        and not tensor.is_mkldnn
        and not tensor.is_quantized
        and not tensor.is_conj()
        and not tensor.is_neg()
    )


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def folded_view(root: torch.fx.Node, root_value: Any, value: Any) -> Call | None:
    """``value``, a view of ``root``'s value reached through several view ops, as one
    ``as_strided`` of ``root``: same shape and strides, at the same distance from where the
    input starts (no offset argument where that distance is 0: ``as_strided`` then keeps the
    input's)."""
    if not (_plain(root_value) and _plain(value)) or value.dtype != root_value.dtype:
        return None
    if not _same_storage(value, root_value):
        return None
    delta = value.storage_offset() - root_value.storage_offset()
    geometry: tuple[Any, ...] = (tuple(value.shape), tuple(value.stride()))
    if delta:
        geometry += (OffsetFrom(root, delta),)
    return Call("Tensor.as_strided", _Tensor.as_strided, (root, *geometry))


def _grid(like: torch.Tensor) -> torch.Tensor | None:
    """An ``int64`` tensor with ``like``'s shape and strides whose every element holds its own
    row-major position (``None`` where elements share memory or the tensor is too large)."""
    if like.numel() > MAX_GRID:
        return None
    grid = torch.empty_strided(like.shape, like.stride(), dtype=torch.int64, device=like.device)
    try:  # refused where elements share memory (an expanded input)
        grid.copy_(torch.arange(like.numel(), device=like.device).view(like.shape))
    except RuntimeError:
        return None
    return grid


def _gather(source: torch.fx.Node, positions: Any, out: bool) -> Call | None:
    if not isinstance(positions, torch.Tensor) or positions.numel() > MAX_POSITIONS:
        return None
    if not out and not positions.is_contiguous():  # take allocates a contiguous result
        return None
    positions = positions.contiguous()
    return Call("torch.take", _take, (source, Const(positions)), out="out" if out else None)


def gathered_copy(
    node: torch.fx.Node, root: torch.fx.Node, root_value: Any, viewed: Any, op: Callable[..., Any], out: bool
) -> Call | None:
    """``node``, an op that copied the view ``viewed`` of ``root``'s value (``op`` on it and
    ``node``'s other arguments, which must be literals), as one gather from ``root``."""
    if not (_plain(root_value) and _plain(viewed)) or not _same_storage(viewed, root_value):
        return None
    if node.all_input_nodes != [node.args[0]]:  # other arguments must be literals
        return None
    grid = _grid(root_value)
    if grid is None:
        return None
    delta = viewed.storage_offset() - root_value.storage_offset()
    try:
        positions = op(grid.as_strided(viewed.shape, viewed.stride(), delta), *node.args[1:], **node.kwargs)
    except _REFUSED:
        return None
    return _gather(root, positions, out)


def constant_index_gather(node: torch.fx.Node, source_value: Any, indices: Sequence[Any], out: bool) -> Call | None:
    """``aten.index.Tensor(source, indices)`` with every index tensor a constant (``indices``:
    their values, ``None`` where a dimension is taken whole) as one gather from ``source``."""
    source = node.args[0]
    if not isinstance(source, torch.fx.Node) or not _plain(source_value):
        return None
    grid = _grid(source_value)
    if grid is None:
        return None
    try:
        positions = torch.ops.aten.index.Tensor(grid, list(indices))
    except _REFUSED:
        return None
    return _gather(source, positions, out)
