"""``torch.compile`` with its default backend (Inductor, which needs a C++ compiler on the CPU).

Compilation happens lazily at the first call, so prepare calls the model once on the example
inputs: the prepare time then includes compilation, and a model or a machine where compilation
fails is reported as unsupported, with the reason, instead of failing at the first timed call.
Compiling takes seconds to tens of seconds per model, hence ``slow``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.inputs import Inputs
from srbench.runtimes import EagerMode, RuntimeOptions, UnsupportedRuntime, quiet_jit


class CompiledRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = True
    eager_mode: ClassVar[EagerMode] = EagerMode.INFERENCE_MODE

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        # Dynamo caches compiled code per Python code object and silently falls back to eager after
        # a few recompilations; a sweep builds the same model class many times, so start clean.
        torch._dynamo.reset()
        self.module = torch.compile(model.eval())
        try:
            with quiet_jit():
                example_inputs.clone().call(self)  # a model that writes its inputs must not write the caller's
        except Exception as error:  # Dynamo and Inductor raise many types; all mean "cannot compile here"
            reason = str(error).strip().splitlines()
            raise UnsupportedRuntime(
                f"torch.compile failed: {type(error).__name__}: {reason[0] if reason else ''}"
            ) from error

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            return self.module(*args, **kwargs)
