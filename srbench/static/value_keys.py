"""Keys of Python values baked into a program: equal exactly where two values behave alike.

``torch.export`` specialises a program to the call's Python values: a scalar argument, and the
context of a container node, which for a class declared with ``pytree.register_constant`` (a
frozen dataclass of settings) is the constant itself. Programs were found by ``==`` on these
(the signature's key, the generated guard), and ``==`` says alike what a model tells apart:
``0.0 == -0.0`` (``1 / x``, ``copysign`` and ``atan2`` differ), ``1 == True == 1.0`` (a float
multiplies an integer tensor into a float one; ``is True`` branches), and NaN is unequal to
itself (a program prepared for every call). :func:`value_key` is ``==`` made exact: the type of
every part, the sign of every zero, NaN equal to NaN (its payload ignored: no op tells it),
through tuples, lists, sets, dicts and dataclasses (the fields its ``==`` compares). An object
of any other class is keyed by its own ``==`` (as ``torch.compile`` guards a constant), or by
its identity where it is unhashable.
"""

from __future__ import annotations

import dataclasses
import math
from collections import namedtuple
from collections.abc import Hashable
from typing import Any

from torch.utils import _pytree as pytree

# node types whose contexts the generated guard reads itself (a dict's keys by its lookups, a
# named tuple's class by its type); every other node's context is a value baked into the program
_READ_DIRECTLY = (tuple, list, dict, namedtuple)


def zero_signs(value: Any) -> tuple[tuple[int, float], ...]:
    """The sign of each zero part of a float or complex scalar (its index among the parts, and
    ``copysign(1, part)``), which ``==`` and ``hash`` do not see: ``0.0 == -0.0``, yet ``1 / x``,
    ``copysign`` and ``atan2`` tell them apart, and export bakes the value into the program, so
    a program prepared for ``0.0`` answered a call passing ``-0.0`` as if it were ``0.0``.
    Empty for any other value (a nonzero float's sign is in its value)."""
    if isinstance(value, complex):
        parts: tuple[float, ...] = (value.real, value.imag)
    elif isinstance(value, float):
        parts = (value,)
    else:
        return ()
    return tuple((index, math.copysign(1.0, part)) for index, part in enumerate(parts) if part == 0)


def value_key(value: Any) -> Hashable:
    """A key of ``value`` equal to another's exactly where the two behave alike (see the module
    docstring). The generated guard calls it at every call passing a baked context, so the
    common kinds come first and a dataclass's compared fields are looked up once per class."""
    kind = type(value)
    if kind in _PLAIN:
        return (kind, value)
    fields = _compared_fields(kind)
    if fields is not None:
        return (kind, tuple(value_key(getattr(value, name)) for name in fields))
    if isinstance(value, (float, complex)):
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        return (kind, tuple("nan" if math.isnan(part) else part for part in parts), zero_signs(value))
    if isinstance(value, (tuple, list)):
        return (kind, tuple(value_key(item) for item in value))
    if isinstance(value, (set, frozenset)):
        return (kind, frozenset(value_key(item) for item in value))
    if isinstance(value, dict):
        return (kind, frozenset((value_key(key), value_key(item)) for key, item in value.items()))
    try:
        hash(value)
    except TypeError:
        return (kind, id(value))
    return (kind, value)


# kinds whose ``==`` is exact once the type is known (no signed zero, no NaN, no other type equal)
_PLAIN = frozenset({str, bytes, int, bool, type(None)})


_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _compared_fields(cls: type) -> tuple[str, ...] | None:
    """The fields a dataclass's ``==`` compares, looked up once per class; ``None`` for a class
    that is no dataclass."""
    if cls not in _FIELDS:
        is_dataclass = dataclasses.is_dataclass(cls)
        _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare) if is_dataclass else None
    return _FIELDS[cls]


def equality_suffices(value: Any) -> bool:
    """Whether ``==`` tells ``value`` from every value of another key: it holds no number (whose
    type, zero's sign and NaN ``==`` does not see). The guard checks a baked context's key only
    where it does not (about 2-4 us a call for a dataclass of three fields), ``!=`` otherwise."""
    return not _holds_numbers(value_key(value))


def _holds_numbers(key: Hashable) -> bool:
    if isinstance(key, type):
        return issubclass(key, (int, float, complex))  # bool is an int
    if isinstance(key, (tuple, frozenset)):
        return any(_holds_numbers(part) for part in key)
    return False


def contexts_key(structure: pytree.TreeSpec) -> tuple[Hashable, ...]:
    """The :func:`value_key` of every context of ``structure`` baked into a program (a registered
    constant, a dataclass node's; a dict's keys, which a forward iterating over them bakes in),
    in flattening order: a TreeSpec compares them by ``==`` (a dict's ``[1]`` equal to ``[True]``)."""
    keys: list[Hashable] = []
    stack = [structure]
    while stack:
        spec = stack.pop()
        if spec.is_leaf():
            continue
        if baked_context(spec) or spec.type is dict:
            keys.append(value_key(spec.context))
        stack.extend(reversed(spec.children()))
    return tuple(keys)


def baked_context(spec: pytree.TreeSpec) -> bool:
    """Whether ``spec``'s node context is a value baked into the program (see ``_READ_DIRECTLY``)."""
    return spec.type not in _READ_DIRECTLY
