"""TorchScript: the model scripted (or, where scripting fails, traced), then frozen.

Both PyTorch's TorchScript interpreter and its C++ Static Runtime start from this frozen module,
so :func:`frozen_torchscript` is shared by the two runtimes.

A scripted module takes a call as the model does, keyword arguments included. Tracing takes
tensors only, as positional arguments (or keyword arguments named in ``forward``'s signature,
which ``forward(*args, **kwargs)`` wrappers such as transformers' do not have): a call that is not
a flat tuple of tensors is traced through :class:`FlatCall`, which takes the call's tensors as
positional arguments and rebuilds the call around them, its structure and Python scalars fixed
at their example values. Such a runtime then flattens every call the same way, and refuses one
of another structure or other scalar values with :class:`CallMismatch` naming the difference.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs
from srbench.runtimes import RuntimeOptions, UnsupportedRuntime, quiet_jit


class CallMismatch(UnsupportedRuntime):
    """A call unlike the one a traced module was made for (structure or scalar values): the
    trace's limit, which suites report as an expected failure with this reason."""


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


class FlatCall(torch.nn.Module):
    """``model`` called with the tensors of one call as positional arguments: the call's
    structure (positional and keyword arguments, nested containers) and its Python scalars are
    those of ``example``. :meth:`tensors` flattens a call the same way, after checking it."""

    def __init__(self, model: torch.nn.Module, example: Inputs):
        super().__init__()
        self.model = model
        leaves, self.structure = pytree.tree_flatten(_tree(example))
        self.scalars = {index: leaf for index, leaf in enumerate(leaves) if not isinstance(leaf, torch.Tensor)}
        self.count = len(leaves)

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [self.scalars[i] if i in self.scalars else next(given) for i in range(self.count)]
        args, kwargs = pytree.tree_unflatten(leaves, self.structure)
        return self.model(*args, **kwargs)

    def tensors(self, args: tuple, kwargs: dict[str, Any]) -> list[torch.Tensor]:
        """The tensors of the call ``(args, kwargs)``, in the order :meth:`forward` takes them."""
        leaves, structure = pytree.tree_flatten(_tree(Inputs(args, kwargs)))
        if structure != self.structure:
            raise CallMismatch(f"the traced module takes calls shaped {self.structure}, not {structure}")
        for index, value in self.scalars.items():
            if type(leaves[index]) is not type(value) or leaves[index] != value:
                raise CallMismatch(
                    f"the traced module was traced with {value!r} as argument leaf {index}, got {leaves[index]!r}"
                )
        return [leaf for index, leaf in enumerate(leaves) if index not in self.scalars]


def _tree(inputs: Inputs) -> tuple[tuple[Any, ...], dict[str, Any]]:
    canonical = inputs.canonical()
    return canonical.args, dict(canonical.kwargs)


def _shapes(args: tuple, kwargs: dict[str, Any]) -> list[tuple[int, ...]]:
    return [tuple(leaf.shape) for leaf in pytree.tree_leaves((args, kwargs)) if isinstance(leaf, torch.Tensor)]


def call_frozen(
    run: Any, how: str, flat: FlatCall | None, traced_on: Inputs, args: tuple, kwargs: dict[str, Any]
) -> Any:
    """``run`` (the frozen module, or Static Runtime's module made from it) on one call.

    A traced module replays the ops of one call: loops unrolled to that call's length, lists of
    that call's size. One that fails on a call of other shapes than ``traced_on`` (``how`` is
    ``"trace"``) fails for that reason, TorchScript's limit, not the call's; it raises
    :class:`UnsupportedRuntime` saying so. A failure at the traced shapes is left as it is.
    """
    if flat is not None:  # traced through FlatCall: the call's tensors, positionally
        args, kwargs = tuple(flat.tensors(args, kwargs)), {}
    if how != "trace":
        return run(*args, **kwargs)
    try:
        return run(*args, **kwargs)
    except RuntimeError as error:
        example = _shapes(traced_on.args, dict(traced_on.kwargs))
        if flat is not None:
            example = _shapes(tuple(flat.tensors(traced_on.args, dict(traced_on.kwargs))), {})
        given = _shapes(args, kwargs)
        if given == example:
            raise
        raise UnsupportedRuntime(
            f"TorchScript could not script the model and traced it on tensors of shapes {example}; "
            f"the trace does not fit a call of shapes {given}: {_first_line(error)}"
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
            traced: torch.nn.Module = model
            example_inputs = example_inputs.clone()  # tracing runs the model: its writes must not reach the caller's
            tensors = example_inputs.args
            if example_inputs.kwargs or not all(isinstance(x, torch.Tensor) for x in tensors):
                traced = flat = FlatCall(model, example_inputs)
                tensors = tuple(flat.tensors(example_inputs.args, dict(example_inputs.kwargs)))
            try:
                with torch.no_grad():
                    scripted, how = torch.jit.trace(traced, tensors, check_trace=False, strict=False), "trace"
            except Exception as trace_error:
                raise UnsupportedRuntime(
                    f"TorchScript can neither script ({_first_line(script_error)}) "
                    f"nor trace ({_first_line(trace_error)}) {type(model).__name__}"
                ) from trace_error
        try:
            return torch.jit.freeze(scripted.eval()), how, flat
        except Exception as freeze_error:
            raise UnsupportedRuntime(
                f"torch.jit.freeze failed on the {how}d module: {_first_line(freeze_error)}"
            ) from freeze_error


class TorchScriptRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        self.module, self.how, self.flat = frozen_torchscript(model, example_inputs)
        self.example = example_inputs

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            return call_frozen(self.module, self.how, self.flat, self.example, args, kwargs)
