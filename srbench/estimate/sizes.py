"""Bytes of a fake tensor, also when its size depends on the data.

A graph captured with data-dependent sizes (boolean-mask indexing, ``nonzero``) has tensors whose
shapes hold *unbacked* symbols (``u0``): no number, but often a range the tracer proved
(``index`` of a 10 x 4 mask: ``u0`` in [0, 40]). Such a size is given as its upper bound and says
so; an unbounded one is unknown. :func:`concrete_graph` makes a copy of a graph whose metadata
holds those upper bounds, so that everything downstream that needs numbers (lifetimes,
planners, the allocator models) can run on it: the estimate of such a graph is a bound, and
each node that made it one is named with the reason.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.fx.node import map_aggregate

from srbench.memory.lifetimes import storage_nbytes


class Bound(enum.Enum):
    """How far a byte count can be trusted."""

    EXACT = "exact"
    UPPER = "upper bound"  # the size depends on the data; this is the most it can be
    UNKNOWN = "unknown"  # the size depends on the data without a known bound; counted as 0


@dataclass(frozen=True)
class ByteCount:
    nbytes: int
    bound: Bound = Bound.EXACT
    why: str | None = None  # for a bound: which symbols, in which ranges

    def __add__(self, other: ByteCount) -> ByteCount:
        bound = max(self.bound, other.bound, key=list(Bound).index)
        why = "; ".join(dict.fromkeys(w for w in (self.why, other.why) if w)) or None
        return ByteCount(self.nbytes + other.nbytes, bound, why)


ZERO = ByteCount(0)


def _upper(value: int | torch.SymInt) -> int | None:
    """The largest ``value`` can be, or None when nothing bounds it."""
    if isinstance(value, int):
        return value
    node = value.node
    upper = node.shape_env.bound_sympy(node.expr).upper
    # not ``upper.is_finite``: torch's unbounded integer (``int_oo``) says it is finite, being an integer
    return int(upper) if upper.is_Integer else None


def _ranges(value: torch.Tensor) -> str:
    symbols = sorted(free_unbacked_symbols(value), key=str)
    shape_env = next(
        (size.node.shape_env for size in (*value.shape, *value.stride()) if isinstance(size, torch.SymInt)), None
    )
    parts = []
    for symbol in symbols:
        known = shape_env.var_to_range.get(symbol) if shape_env is not None else None
        parts.append(f"{symbol} unbounded" if known is None else f"{symbol} in [{known.lower}, {known.upper}]")
    return "size depends on the data: " + ", ".join(parts)


def is_data_dependent(value: object) -> bool:
    return isinstance(value, torch.Tensor) and bool(free_unbacked_symbols(value))


def tensor_bytes(value: torch.Tensor) -> ByteCount:
    """Bytes a fresh tensor like ``value`` occupies (strided extent, as
    :func:`srbench.memory.lifetimes.storage_nbytes`), bounded when its size depends on the data."""
    if not is_data_dependent(value):
        return ByteCount(storage_nbytes(value))
    extent = value.storage_offset() + 1 + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride()))
    candidates = [_upper(extent * value.element_size()), _upper(value.untyped_storage().nbytes())]
    why = _ranges(value)
    if any(candidate is None for candidate in candidates):
        return ByteCount(0, Bound.UNKNOWN, why)
    return ByteCount(max(0, *(c for c in candidates if c is not None)), Bound.UPPER, why)


def _concrete(value: Any) -> Any:
    if not is_data_dependent(value):
        return value
    assert isinstance(value, torch.Tensor)
    shape = [_upper(size) or 0 for size in value.shape]
    stride = [_upper(stride) or 0 for stride in value.stride()]
    return torch.empty_strided(shape, stride, dtype=value.dtype, device="meta")


def concrete_graph(graph: torch.fx.Graph) -> tuple[torch.fx.Graph, dict[str, str]]:
    """``graph`` itself when no size depends on the data; otherwise a copy whose data-dependent
    tensor metadata holds upper bounds (0 where unbounded), and, by node name, why each such
    node's size is a bound."""
    why = {
        node.name: "; ".join(_ranges(v) for v in _tensors(node.meta.get("val")) if is_data_dependent(v))
        for node in graph.nodes
        if any(is_data_dependent(v) for v in _tensors(node.meta.get("val")))
    }
    if not why:
        return graph, {}
    copy = torch.fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    for node in copy.nodes:
        if node.name in why:
            node.meta = {**node.meta, "val": map_aggregate(node.meta["val"], _concrete)}
    return copy, why


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for element in value for item in _tensors(element)]
    return []
