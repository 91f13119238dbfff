"""srbench's own static runtime (``srbench.static``) as a runtime plugin: the only runtime that
reads the memory options (planner, out variants, cleanup, managed outputs)."""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.runtimes import MEMORY_OPTIONS, RuntimeOptions


class SrbenchRuntime:
    honours: ClassVar[tuple[str, ...]] = MEMORY_OPTIONS
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False

    def __init__(self, model: torch.nn.Module, example_inputs: tuple, options: RuntimeOptions = RuntimeOptions()):
        from srbench.static import StaticModule, StaticOptions

        self.module = StaticModule(
            model,
            example_inputs,
            StaticOptions(
                planner=options.planner,
                enable_out_variant=options.enable_out_variant,
                cleanup_activations=options.cleanup_activations,
                manage_output_tensors=options.manage_output_tensors,
            ),
        )
        self.runtime = self.module.runtime()

    def __call__(self, *inputs: Any) -> Any:
        return self.runtime(*inputs)
