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


class CallMismatch(TypeError):
    """A call unlike the one a traced module was made for (structure or scalar values)."""


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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            if self.flat is not None:
                return self.module(*self.flat.tensors(args, kwargs))
            return self.module(*args, **kwargs)
