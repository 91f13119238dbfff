"""How one node is called: the callable chosen at prepare time and the arguments it gets.

A :class:`Call` is the single description both the prepare-time probe (which runs it on real
example values to check it) and the code generator (which writes it as one line of Python) read,
so what was checked is exactly what runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

# Where the fast Python bindings of ATen ops live; checked in this order.
_BINDING_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch", torch._C._VariableFunctions),
    ("torch._C._nn", torch._C._nn),
    ("torch._C._linalg", getattr(torch._C, "_linalg")),  # noqa: B009 - not in torch's type stubs
    ("torch._C._special", getattr(torch._C, "_special")),  # noqa: B009
    ("torch._C._fft", getattr(torch._C, "_fft")),  # noqa: B009
    ("torch._C._sparse", getattr(torch._C, "_sparse")),  # noqa: B009
)


@dataclass(frozen=True)
class Const:
    """A value fixed at prepare time (a transposed weight, say), bound as a constant of the code."""

    value: Any


@dataclass(frozen=True)
class OffsetFrom:
    """A storage offset ``delta`` elements past ``node``'s own at every run: where a view of an
    input starts (a program guards its inputs' shapes and strides, not where they begin)."""

    node: torch.fx.Node
    delta: int


@dataclass(frozen=True)
class Call:
    """``fn(*args, **kwargs)`` plus, for out variants, where the result buffers go.

    ``args``/``kwargs`` hold graph nodes, :class:`Const` values and plain literals. ``out`` is
    ``None`` (the call allocates its result), ``"out"`` (a binding's ``out=``: one tensor, or a
    tuple for a multi-output op), or a tuple of keyword names, one per result (an ATen ``.out``
    overload such as ``topk.values(..., values=, indices=)``).
    """

    label: str
    fn: Callable[..., Any]
    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    out: str | tuple[str, ...] | None = None
    parses_schema: bool = False  # a raw overload: arguments matched to the schema at every call
    spells_defaults: bool = False  # a binding given the schema's defaults (see binding_calls)


def overload_call(
    op: torch._ops.OpOverload, args: tuple, kwargs: Mapping[str, Any] | None = None, out: tuple[str, ...] | None = None
) -> Call:
    """Call ``op`` through its raw overload (no C binding): always available, several
    microseconds slower per call than a binding."""
    return Call(str(op), op._op, args, dict(kwargs or {}), out=out, parses_schema=True)


def packet_name(op: torch._ops.OpOverload) -> str:
    return op._schema.name.split("::", 1)[1]


def op_kind(target: object) -> str:
    """The node kind used in profiles: ``aten::addmm`` for an op, the function's name otherwise."""
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name
    return getattr(target, "__name__", repr(target))


def function_binding(op: torch._ops.OpOverload) -> tuple[str, Callable[..., Any]] | None:
    """The C binding of an ATen op (``torch.addmm``, ``torch._C._nn.linear``), if it has one.

    Only builtins count: ``torch.split`` and friends are Python wrappers with other signatures.
    """
    if op.namespace != "aten":
        return None
    name = packet_name(op)
    for label, namespace in _BINDING_NAMESPACES:
        fn = getattr(namespace, name, None)
        if fn is not None and type(fn).__name__ == "builtin_function_or_method":
            return f"{label}.{name}", fn
    return None


def method_binding(op: torch._ops.OpOverload) -> tuple[str, Callable[..., Any]] | None:
    """The C method of ``Tensor`` for an ATen op (``Tensor.view``, ``Tensor.add_``), if any."""
    if op.namespace != "aten":
        return None
    name = packet_name(op)
    fn = torch._C.TensorBase.__dict__.get(name)
    if fn is not None and type(fn).__name__ == "method_descriptor":
        return f"Tensor.{name}", fn
    return None


def with_schema_defaults(
    op: torch._ops.OpOverload, args: tuple, kwargs: Mapping[str, Any]
) -> tuple[tuple, dict[str, Any]] | None:
    """``args`` and ``kwargs`` with every argument they leave out given its schema default
    (positionally up to the first one given by keyword, by keyword from there), or ``None`` when
    they leave none out."""
    positional, keywords = list(args), dict(kwargs)
    spelled = False
    for index, argument in enumerate(op._schema.arguments):
        if index < len(args) or argument.name in kwargs or not argument.has_default_value():
            continue
        if not argument.kwarg_only and len(positional) == index and len(keywords) == len(kwargs):
            positional.append(argument.default_value)
        else:
            keywords[argument.name] = argument.default_value
        spelled = True
    return (tuple(positional), keywords) if spelled else None


def binding_calls(
    op: torch._ops.OpOverload,
    binding: tuple[str, Callable[..., Any]],
    args: tuple,
    kwargs: Mapping[str, Any],
    out: str | None = None,
) -> list[Call]:
    """A binding called as the graph calls ``op``, then with the arguments the graph leaves out
    given the schema's defaults. A Python binding parses its defaults from the C++ signature and
    gets some wrong: ``torch.margin_ranking_loss(a, b, t)`` reduces with ``reduction=0`` (none)
    where the schema's default is 1 (mean), and so do ``torch.binary_cross_entropy_with_logits``,
    ``torch._C._nn.nll_loss_nd`` and other losses; called as the graph calls them they disagree
    with the op, and the op ran through its raw overload, microseconds slower per call. The
    second call is only tried where the first fails (``spells_defaults``)."""
    label, fn = binding
    calls = [Call(label, fn, args, dict(kwargs), out=out)]
    spelled = with_schema_defaults(op, args, kwargs)
    if spelled is not None:
        calls.append(Call(label, fn, spelled[0], spelled[1], out=out, spells_defaults=True))
    return calls


def materialize(value: Any, env: Mapping[str, Any]) -> Any:
    """Replace graph nodes by their values in ``env`` and constants by what they hold."""
    if isinstance(value, torch.fx.Node):
        return env[value.name]
    if isinstance(value, Const):
        return value.value
    if isinstance(value, OffsetFrom):
        return env[value.node.name].storage_offset() + value.delta
    if isinstance(value, (list, tuple)):
        return type(value)(materialize(item, env) for item in value)
    if isinstance(value, dict):
        return {key: materialize(item, env) for key, item in value.items()}
    return value


def read_nodes(call: Call) -> set[str]:
    """The names of the graph nodes ``call`` reads."""
    names: set[str] = set()

    def visit(value: Any) -> None:
        if isinstance(value, torch.fx.Node):
            names.add(value.name)
        elif isinstance(value, OffsetFrom):
            names.add(value.node.name)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    visit((call.args, dict(call.kwargs)))
    return names


def invoke(call: Call, env: Mapping[str, Any], outs: tuple[torch.Tensor, ...] = ()) -> Any:
    """Run ``call`` on real values (the probe does this; generated code does the same inline)."""
    args = materialize(call.args, env)
    kwargs = dict(materialize(dict(call.kwargs), env))
    if call.out == "out":
        kwargs["out"] = outs[0] if len(outs) == 1 else tuple(outs)
    elif call.out is not None:
        kwargs.update(zip(call.out, outs))
    return call.fn(*args, **kwargs)
