"""TorchScript: the model scripted (or, where scripting fails, traced), then frozen.

Both PyTorch's TorchScript interpreter and its C++ Static Runtime start from this frozen module,
so :func:`frozen_torchscript` is shared by the two runtimes.

A scripted module takes a call as the model does, keyword arguments included. Tracing takes
tensors only, as positional arguments, and returns tensors, tuples, lists and dicts of them
only: a model is traced through :class:`FlatCall`, which takes the call's tensors as positional
arguments and rebuilds the call around them, its structure and Python scalars fixed at their
example values, and returns the output's tensors, from which the runtime rebuilds the output
(a ``torch.return_types.max`` stays one, a ``None`` stays ``None``). Such a runtime then flattens
every call the same way, and refuses one of another structure or other scalar values with
:class:`CallMismatch` naming the difference, and one of other shapes that the trace does not fit.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import torch
from torch.utils import _pytree as pytree

from srbench.formatting import error_summary
from srbench.inputs import Inputs, KeywordOrder
from srbench.runtimes import EagerMode, RuntimeOptions, UnsupportedRuntime, quiet_jit


class CallMismatch(UnsupportedRuntime):
    """A call unlike the one a traced module was made for (structure or scalar values): the
    trace's limit, which suites report as an expected failure with this reason."""


class FlatCall(torch.nn.Module):
    """``model`` called with the tensors of one call as positional arguments, returning the
    tensors of its output as a tuple: the call's structure (positional and keyword arguments,
    nested containers) and its Python scalars are those of ``example``. :meth:`tensors` flattens
    a call the same way, after checking it; :meth:`output` rebuilds the model's output from the
    tensors, in the structure (named tuples, ``ModelOutput`` objects, ``None``) and with the
    other leaves the traced call returned, which a traced module would otherwise lose."""

    def __init__(self, model: torch.nn.Module, example: Inputs):
        super().__init__()
        self.model = model
        self.keyword_order = KeywordOrder.of(model)  # a call's keywords flattened in this arrangement
        leaves, self.structure = pytree.tree_flatten(_tree(self.keyword_order.arrange(example)))
        self.scalars = {index: leaf for index, leaf in enumerate(leaves) if not isinstance(leaf, torch.Tensor)}
        self.count = len(leaves)
        self.returned: pytree.TreeSpec | None = None  # set by the traced call
        self.returned_constants: dict[int, Any] = {}

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        given = iter(tensors)
        leaves = [self.scalars[i] if i in self.scalars else next(given) for i in range(self.count)]
        args, kwargs = pytree.tree_unflatten(leaves, self.structure)
        # a torch.Size stays a leaf: pytree would rebuild it as a plain tuple
        returned, self.returned = pytree.tree_flatten(self.model(*args, **kwargs), is_leaf=_is_size)
        self.returned_constants = {
            i: _untraced(leaf) for i, leaf in enumerate(returned) if not isinstance(leaf, torch.Tensor)
        }
        return tuple(leaf for leaf in returned if isinstance(leaf, torch.Tensor))

    def numbers_returned(self) -> list[Any]:
        """The numbers (and sizes) the traced call returned: fixed in the trace at their values
        for the traced shapes, where the model may compute them from its inputs' shapes."""
        return [leaf for leaf in self.returned_constants.values() if isinstance(leaf, (numbers.Number, torch.Size))]

    def output(self, tensors: Any) -> Any:
        """The model's output from what the traced module returned (its tensors, in order)."""
        assert self.returned is not None, "FlatCall.output before the call was traced"
        given = iter((tensors,) if isinstance(tensors, torch.Tensor) else tensors)
        count, constants = self.returned.num_leaves, self.returned_constants
        leaves = [constants[i] if i in constants else next(given) for i in range(count)]
        return pytree.tree_unflatten(leaves, self.returned)

    def tensors(self, args: tuple, kwargs: dict[str, Any]) -> list[torch.Tensor]:
        """The tensors of the call ``(args, kwargs)``, in the order :meth:`forward` takes them."""
        leaves, structure = pytree.tree_flatten(_tree(self.keyword_order.arrange(Inputs(args, kwargs))))
        if structure != self.structure:
            raise CallMismatch(
                f"the traced module takes calls shaped {_one_line(self.structure)}, not {_one_line(structure)}"
            )
        for index, value in self.scalars.items():
            if type(leaves[index]) is not type(value) or leaves[index] != value:
                raise CallMismatch(
                    f"the traced module was traced with {value!r} as argument leaf {index}, got {leaves[index]!r}"
                )
        return [leaf for index, leaf in enumerate(leaves) if index not in self.scalars]


def _tree(inputs: Inputs) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return inputs.args, dict(inputs.kwargs)


def _one_line(structure: pytree.TreeSpec) -> str:
    """A call's structure on one line (a suite's reason shows its first line): ``(args, kwargs)``
    with ``*`` for each leaf, e.g. ``((*, *), {'y': *, 'scale': *})``."""

    def walk(spec: pytree.TreeSpec) -> str:
        if spec.is_leaf():
            return "*"
        children = [walk(child) for child in spec.children()]
        if spec.type is dict:
            return "{" + ", ".join(f"{key!r}: {child}" for key, child in zip(spec.context, children)) + "}"
        if spec.type is list:
            return "[" + ", ".join(children) + "]"
        inner = ", ".join(children) + ("," if len(children) == 1 else "")
        return f"({inner})" if spec.type is tuple else f"{getattr(spec.type, '__name__', spec.type)}({inner})"

    return walk(structure)


def _untraced(value: Any) -> Any:
    """A returned constant as the model returns it: the tracer makes a size's elements 0-dim tensors."""
    return torch.Size(int(n) for n in value) if isinstance(value, torch.Size) else value


def _is_size(value: Any) -> bool:
    return isinstance(value, torch.Size)


def _shapes(args: tuple, kwargs: dict[str, Any]) -> list[tuple[int, ...]]:
    return [tuple(leaf.shape) for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]


def call_frozen(run: Any, flat: FlatCall | None, traced_on: Inputs, args: tuple, kwargs: dict[str, Any]) -> Any:
    """``run`` (the frozen module, or Static Runtime's module made from it) on one call.

    A traced module replays the ops of one call: loops unrolled to that call's length, lists of
    that call's size. One that fails on a call of other shapes than ``traced_on`` (``flat`` is
    not ``None``) fails for that reason, TorchScript's limit, not the call's; it raises
    :class:`UnsupportedRuntime` saying so. A failure at the traced shapes is left as it is.
    """
    if flat is None:  # scripted: called as the model is
        return run(*args, **kwargs)
    args, kwargs = tuple(flat.tensors(args, kwargs)), {}  # traced through FlatCall: the tensors, positionally
    example = _shapes(tuple(flat.tensors(traced_on.args, dict(traced_on.kwargs))), {})
    given = _shapes(args, kwargs)
    fixed = flat.numbers_returned()
    if fixed and given != example:
        raise UnsupportedRuntime(
            f"TorchScript could not script the model and traced it on tensors of shapes {example}; the model "
            f"returns Python numbers ({', '.join(map(repr, fixed[:3]))}) that the trace fixed at their values "
            f"there, and a call of shapes {given} may need others"
        )
    try:
        return flat.output(run(*args))
    except RuntimeError as error:
        if given == example:
            raise
        raise UnsupportedRuntime(
            f"TorchScript could not script the model and traced it on tensors of shapes {example}; "
            f"the trace does not fit a call of shapes {given}: {error_summary(error)}"
        ) from error


def frozen_torchscript(
    model: torch.nn.Module, example_inputs: Inputs
) -> tuple[torch.jit.ScriptModule, str, FlatCall | None]:
    """Script ``model`` (or trace it on ``example_inputs`` when scripting fails) and freeze it.

    Returns the frozen module, how it was made (``"script"`` or ``"trace"``) and, when it was
    traced through :class:`FlatCall`, that flattening (``None`` when the module takes calls as the
    model does). Raises :class:`UnsupportedRuntime` naming both reasons when neither works.
    """
    model = model.eval()
    scripted: torch.jit.ScriptModule
    flat: FlatCall | None = None
    with quiet_jit():
        try:
            scripted, how = torch.jit.script(model), "script"
        except Exception as script_error:  # TorchScript raises many types for unsupported Python
            example_inputs = example_inputs.clone()  # tracing runs the model: its writes must not reach the caller's
            flat = FlatCall(model, example_inputs)
            tensors = tuple(flat.tensors(example_inputs.args, dict(example_inputs.kwargs)))
            try:
                with torch.no_grad():
                    scripted, how = torch.jit.trace(flat, tensors, check_trace=False, strict=False), "trace"
            except Exception as trace_error:
                raise UnsupportedRuntime(
                    f"TorchScript can neither script ({error_summary(script_error)}) "
                    f"nor trace ({error_summary(trace_error)}) {type(model).__name__}"
                ) from trace_error
        try:
            return torch.jit.freeze(scripted.eval()), how, flat
        except Exception as freeze_error:
            raise UnsupportedRuntime(
                f"torch.jit.freeze failed on the {how}{'d' if how == 'trace' else 'ed'} module: "
                f"{error_summary(freeze_error)}"
            ) from freeze_error


class TorchScriptRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False
    eager_mode: ClassVar[EagerMode] = EagerMode.INFERENCE_MODE

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        self.module, self.how, self.flat = frozen_torchscript(model, example_inputs)
        self.example = example_inputs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            return call_frozen(self.module, self.flat, self.example, args, kwargs)
