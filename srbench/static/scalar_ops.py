"""Python equivalents of the scalar ops ``torch.export`` writes into graphs with sizes read
from the data (``nonzero``, ``unique``, ``repeat_interleave`` by a tensor): the sizes read back
(``sym_size.int`` and its kin) and the checks on them (``_assert_scalar``). None has a binding of
its own, so each ran through its raw overload (about 1.5 µs: its arguments matched to the
schema) or ``torch._assert_scalar`` (about 0.5 µs) at every call, where eager runs none of them;
a ``Tensor`` method or a Python test costs a tenth of that. The resolver checks each like every
other candidate (:meth:`srbench.static.resolve.Resolver._rewrites`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def assert_scalar(condition: Any, message: str) -> None:
    """``aten._assert_scalar``: a ``RuntimeError`` with ``message`` when ``condition`` is false,
    as ATen raises it."""
    if not condition:
        raise RuntimeError(message)


_tensor = torch._C.TensorBase

EQUIVALENTS: dict[str, tuple[str, Callable[..., Any]]] = {
    "aten.sym_size.int": ("Tensor.size", _tensor.size),
    "aten.sym_stride.int": ("Tensor.stride", _tensor.stride),
    "aten.sym_numel.default": ("Tensor.numel", _tensor.numel),
    "aten.sym_storage_offset.default": ("Tensor.storage_offset", _tensor.storage_offset),
    "aten._assert_scalar.default": ("assert_scalar", assert_scalar),
}
