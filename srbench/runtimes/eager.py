"""Eager PyTorch under ``torch.inference_mode``: the measured baseline, and the reference of the
runtimes that run under it too (:class:`~srbench.runtimes.EagerMode`)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.inputs import Inputs
from srbench.runtimes import EagerMode, RuntimeOptions


class EagerRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False
    eager_mode: ClassVar[EagerMode] = EagerMode.INFERENCE_MODE

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        self.model = model.eval()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            return self.model(*args, **kwargs)
