"""User-registered out variants: how to run an op writing into memory the runtime provides.

Most ATen ops have an ``.out`` overload that the runtime finds from the schema; this registry is
for the rest (custom ops, or a faster implementation of an existing one). A registered function
is called as ``fn(*args, out=out, **kwargs)`` with the node's arguments, where ``out`` is a tensor
(or a tuple of tensors for a multi-output op) of the result's shape, strides and dtype, and must
fill it in place. Registries are plain objects: pass one to :class:`~srbench.static.StaticModule`
(``out_variants=``), or use the default one through :func:`register_out_variant`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

OutFn = Callable[..., Any]


def op_key(op: torch._ops.OpOverload | str) -> str:
    """``aten::addmm`` / ``aten::add.Tensor`` style name of an op overload (or the string given)."""
    if isinstance(op, str):
        return op
    schema = op._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


class OutVariantRegistry:
    """Out-variant implementations by op overload name; lookups check the exact overload first,
    then the overload packet (``mylib::op`` covers every overload of it)."""

    def __init__(self) -> None:
        self._functions: dict[str, OutFn] = {}
        self._lock = threading.Lock()

    def register(self, op: torch._ops.OpOverload | str, fn: OutFn | None = None) -> Any:
        """Register ``fn`` for ``op``; without ``fn`` this is a decorator."""

        def add(function: OutFn) -> OutFn:
            if not callable(function):
                raise TypeError(f"out variant for {op_key(op)} must be callable, got {type(function).__name__}")
            with self._lock:
                self._functions[op_key(op)] = function
            return function

        return add if fn is None else add(fn)

    def unregister(self, op: torch._ops.OpOverload | str) -> None:
        with self._lock:
            self._functions.pop(op_key(op), None)

    def get(self, op: torch._ops.OpOverload) -> OutFn | None:
        key = op_key(op)
        with self._lock:
            return self._functions.get(key) or self._functions.get(key.split(".")[0])


OUT_VARIANTS = OutVariantRegistry()


def register_out_variant(op: torch._ops.OpOverload | str, fn: OutFn | None = None) -> Any:
    """Register an out variant in the default registry (usable as a decorator)."""
    return OUT_VARIANTS.register(op, fn)
