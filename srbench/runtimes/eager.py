"""Eager PyTorch under ``torch.inference_mode``: the reference every other runtime is compared with."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.inputs import Inputs
from srbench.runtimes import RuntimeOptions


class EagerRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        self.model = model.eval()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            return self.model(*args, **kwargs)
