"""A call written in another form than its program's, rebound to that form.

Eager takes ``model(x, mask)``, ``model(x, attention_mask=mask)`` and ``model(x=x, ...)`` as one
call; ``torch.export`` flattened the prepared one, and a program's generated guard reads its
arguments where that call passed them. A call is moved to the prepared form (the example's
positional count and keywords, an argument beyond them by keyword, a scalar given with its
default's value left out): :func:`rebinding` says how, as a :class:`Rebinding` of the call's
:class:`Form`, one description that both the slow path (:meth:`Rebinding.apply`) and a small
generated adapter (:meth:`Rebinding.source`) read. The adapter checks a call's form (and that
each scalar left out still has its default's value), moves its arguments and calls the program's
guarded function, and passes any other call on as it is: to the adapter of another form the
runtime has seen for that program, and from the last of them to the program's guarded function
(the runtime's fast path is that chain, the form used last first). A call in a form seen before
no longer takes the slow path, nor does a switch between such forms; one in the program's own
form runs at the chain's end (the check of each form first, about 0.2 us each).
"""

from __future__ import annotations

import inspect
import keyword
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

from srbench.inputs import KEYWORDS_BY_NAME, Inputs, KeywordOrder
from srbench.static.recency import keep_newest

# Compiled adapters a module keeps, and adapters a runtime keeps per program: a model taking
# ``**kwargs`` has as many forms as keyword names its callers use.
FORMS_KEPT = 16


@dataclass(frozen=True)
class Form:
    """How a call passes its arguments: how many positionally, which by keyword."""

    positional: int
    keywords: frozenset[str]

    @classmethod
    def of(cls, inputs: Inputs) -> Form:
        return cls(len(inputs.args), frozenset(inputs.kwargs))


@dataclass(frozen=True)
class Positional:
    """The call's positional argument ``index``."""

    index: int

    def expr(self) -> str:
        return f"args[{self.index}]"

    def read(self, inputs: Inputs) -> Any:
        return inputs.args[self.index]


@dataclass(frozen=True)
class Keyword:
    """The call's keyword argument ``name``."""

    name: str

    def expr(self) -> str:
        return f"kwargs[{self.name!r}]"

    def read(self, inputs: Inputs) -> Any:
        return inputs.kwargs[self.name]


@dataclass(frozen=True)
class Default:
    """A parameter's default (the call leaves it out): the object itself, compared by identity
    (a default need not be hashable, and is one object for the life of the function)."""

    value: Any = field(compare=False)
    identity: int = 0

    @classmethod
    def of(cls, value: Any) -> Default:
        return cls(value, id(value))

    def read(self, inputs: Inputs) -> Any:
        return self.value


Source = Positional | Keyword | Default


def _is_default(parameter: inspect.Parameter, value: Any) -> bool:
    """Whether ``value`` is a scalar equal to ``parameter``'s scalar default (a tensor never is)."""
    default = parameter.default
    scalar = default is None or isinstance(default, (bool, int, float, str))
    return scalar and type(value) is type(default) and value == default


@dataclass(frozen=True)
class Rebinding:
    """A call of form ``given`` moved to its program's form: the program's positional arguments
    (``args``) and keyword arguments (``kwargs``), each from where the call has it; ``left_out``:
    the call's scalars left out for being equal to their parameter's default, which an adapter
    checks at each call (another value is another program's call). An argument the program
    takes because its value was not its default is not checked: given its default's value, the
    adapter passes it on, and the program's guard (which holds the other value) sends the call to
    the slow path, which leaves it out (``tests/test_static_call_forms.py`` checks every adapter
    against the slow path's moves over every form of two signatures)."""

    given: Form
    args: tuple[Source, ...]
    kwargs: tuple[tuple[str, Source], ...]
    left_out: tuple[tuple[Positional | Keyword, Default], ...] = ()
    # the call's keywords a ``**kwargs`` parameter collects: passed on after :attr:`kwargs`, in the
    # call's order, which the model sees (:class:`~srbench.inputs.KeywordOrder`) and the program's
    # guard checks; in a fixed order, every order ran the program of that one
    collected: frozenset[str] = frozenset()

    def apply(self, inputs: Inputs) -> Inputs:
        """``inputs`` (of form :attr:`given`) in the program's form."""
        collected = {name: value for name, value in inputs.kwargs.items() if name in self.collected}
        return Inputs(
            tuple(s.read(inputs) for s in self.args), {**{name: s.read(inputs) for name, s in self.kwargs}, **collected}
        )

    def source(self) -> tuple[str, dict[str, Any]]:
        """The adapter's source, ``adapted(*args, **kwargs)``, and the constants it reads besides
        ``_program``, the program's guarded function, ``_next``, what it passes a call it does not
        move to, and ``_outer``, the runtime's one-item list of the call an adapter moved last
        (with its rebinding, which the slow path reads to see the call as written): a
        call of another form, or a left-out scalar of another value, is passed to ``_next`` as it
        is (another form's adapter, or the program: a call in the program's own form runs there;
        another goes on to the runtime's slow path); a call moved is kept there while it runs,
        for the slow path that the program's guard sends it to (another shape) to see it as
        written, and let go after (the caller's tensors are not held)."""
        constants: dict[str, Any] = {"_keywords": self.given.keywords, "_rebinding": self, "_collected": self.collected}
        checks = [
            f"len(args) != {self.given.positional}",
            "kwargs.keys() != _keywords" if self.given.keywords else "kwargs",
        ]
        for index, (where, default) in enumerate(self.left_out):
            if default.value is None:
                checks.append(f"{where.expr()} is not None")
            else:
                constants[f"_t{index}"], constants[f"_v{index}"] = type(default.value), default.value
                checks.append(f"type({where.expr()}) is not _t{index} or {where.expr()} != _v{index}")

        def expr(source: Source) -> str:
            if isinstance(source, Default):
                name = f"_d{len(constants)}"
                constants[name] = source.value
                return name
            return source.expr()

        parts = [expr(source) for source in self.args]
        named = [(name, expr(source)) for name, source in self.kwargs]
        if all(name.isidentifier() and not keyword.iskeyword(name) for name, _ in named):
            parts += [f"{name}={value}" for name, value in named]
        elif named:
            parts.append("**{" + ", ".join(f"{name!r}: {value}" for name, value in named) + "}")
        if self.collected:
            parts.append("**{name: kwargs[name] for name in kwargs if name in _collected}")
        source = "\n".join(
            [
                "def adapted(*args, **kwargs):",
                f"    if {' or '.join(checks)}:",
                "        return _next(*args, **kwargs)",
                "    _outer[0] = _rebinding, args, kwargs",
                "    try:",
                f"        return _program({', '.join(parts)})",
                "    finally:",
                "        _outer[0] = None",
            ]
        )
        return source, constants


def rebinding(
    function: Callable[..., Any],
    inputs: Inputs,
    positional: int,
    keywords: frozenset[str],
    keyword_order: KeywordOrder = KEYWORDS_BY_NAME,
) -> Rebinding | None:
    """How ``inputs`` move to the form of a call of ``function`` with ``positional`` positional
    arguments and the keyword arguments ``keywords`` (plus, by keyword, any argument beyond them
    given a value other than a scalar default): ``f(x, y=y)`` as ``f(x, y)`` or the reverse, a
    default left out as given or the reverse. ``None`` where ``inputs`` are in their program's
    form already, or where rebinding cannot give that form (``*args`` given, a signature Python
    cannot read or bind): the signature check then names the difference; and where the model sees
    every keyword's order (``keyword_order``: a hook given the call's keywords sees the form too),
    so that a call in another form is prepared as written."""
    given = Form.of(inputs)
    if given == Form(positional, keywords) or keyword_order.sees_every_order:
        return None  # in form; or every keyword's order seen (a hook given them): prepared as written
    try:
        signature = inspect.signature(function)
        bound = signature.bind(
            *map(Positional, range(given.positional)), **{name: Keyword(name) for name in inputs.kwargs}
        )
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:positional]
    if len(names) < positional:
        return None

    def source(parameter: inspect.Parameter) -> Source:
        found = bound.arguments.get(parameter.name)
        return found if found is not None else Default.of(parameter.default)

    kwargs: list[tuple[str, Source]] = []
    collected: frozenset[str] = frozenset()
    left_out: list[tuple[Positional | Keyword, Default]] = []
    for parameter in parameters:
        where = bound.arguments.get(parameter.name)
        if parameter.name in names:
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            if where:
                return None
        elif parameter.kind is parameter.VAR_KEYWORD:
            collected = frozenset(where or {})
        elif parameter.name in keywords or (where is not None and not _is_default(parameter, where.read(inputs))):
            if parameter.kind is parameter.POSITIONAL_ONLY:
                return None
            kwargs.append((parameter.name, source(parameter)))
        elif where is not None:
            left_out.append((where, Default.of(parameter.default)))
    found = Rebinding(
        given, tuple(source(p) for p in parameters if p.name in names), tuple(kwargs), tuple(left_out), collected
    )
    return None if Form(positional, frozenset(name for name, _ in kwargs) | collected) == given else found


class Adapters:
    """The compiled adapters of one module, by rebinding, the least recently used first, at most
    :data:`FORMS_KEPT`: compiled once, bound by each runtime to its own program and slow path."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._code: dict[Rebinding, tuple[CodeType, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def bind(
        self,
        rebinding: Rebinding,
        program: Callable[..., Any],
        outer: list[Any],
        passes_to: Callable[..., Any] | None = None,
    ) -> Callable[..., Any]:
        """The adapter of ``rebinding`` calling ``program``, a runtime's guarded function, keeping
        each call it moves in ``outer``, and passing any other call to ``passes_to`` (``program``
        where not given; see :meth:`Rebinding.source`)."""
        with self._lock:
            found = self._code.pop(rebinding, None)
        if found is None:
            source, constants = rebinding.source()
            namespace: dict[str, Any] = {}
            exec(compile(source, f"<srbench form of {self._name}>", "exec"), namespace)
            found = (namespace["adapted"].__code__, constants)
        with self._lock:
            self._code[rebinding] = found  # put back last
            keep_newest(self._code, FORMS_KEPT)
        code, constants = found
        after = passes_to if passes_to is not None else program
        return types.FunctionType(code, {**constants, "_program": program, "_next": after, "_outer": outer}, "adapted")
