"""TorchScript: the model scripted (or, where scripting fails, traced), then frozen.

Both PyTorch's TorchScript interpreter and its C++ Static Runtime start from this frozen module,
so :func:`frozen_torchscript` is shared by the two runtimes.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.runtimes import RuntimeOptions, UnsupportedRuntime, quiet_jit


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def frozen_torchscript(model: torch.nn.Module, example_inputs: tuple) -> tuple[torch.jit.ScriptModule, str]:
    """Script ``model`` (or trace it on ``example_inputs`` when scripting fails) and freeze it.

    Returns the frozen module and how it was made (``"script"`` or ``"trace"``). Raises
    :class:`UnsupportedRuntime` naming both reasons when neither works.
    """
    model = model.eval()
    with quiet_jit():
        try:
            scripted, how = torch.jit.script(model), "script"
        except Exception as script_error:  # TorchScript raises many types for unsupported Python
            try:
                with torch.no_grad():
                    scripted, how = torch.jit.trace(model, example_inputs, check_trace=False, strict=False), "trace"
            except Exception as trace_error:
                raise UnsupportedRuntime(
                    f"TorchScript can neither script ({_first_line(script_error)}) "
                    f"nor trace ({_first_line(trace_error)}) {type(model).__name__}"
                ) from trace_error
        try:
            return torch.jit.freeze(scripted.eval()), how
        except Exception as freeze_error:
            raise UnsupportedRuntime(
                f"torch.jit.freeze failed on the {how}d module: {_first_line(freeze_error)}"
            ) from freeze_error


class TorchScriptRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False

    def __init__(self, model: torch.nn.Module, example_inputs: tuple, options: RuntimeOptions = RuntimeOptions()):
        self.module, self.how = frozen_torchscript(model, example_inputs)

    def __call__(self, *inputs: Any) -> Any:
        with torch.inference_mode():
            return self.module(*inputs)
