"""PyTorch's C++ Static Runtime (``torch/csrc/jit/runtime/static``), driven from Python.

``torch._C._jit_to_static_module`` takes a frozen TorchScript module; the Python binding exposes
no options, so the runtime runs with its defaults (out variants on, activations cleaned up,
outputs not managed) and ignores srbench's memory options. Its own
``benchmark_individual_ops`` gives the time per node kind.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.inputs import Inputs
from srbench.runtimes import RuntimeOptions, UnsupportedRuntime
from srbench.runtimes.torchscript import frozen_torchscript


class CxxStaticRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu",)  # Static Runtime is CPU-only
    slow: ClassVar[bool] = False

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        if options.device != "cpu":
            raise UnsupportedRuntime(f"PyTorch's Static Runtime runs on the CPU only, not on {options.device!r}")
        frozen, self.how, self.flat = frozen_torchscript(model, example_inputs)
        try:
            self.module = torch._C._jit_to_static_module(frozen._c)
        except RuntimeError as error:
            raise UnsupportedRuntime(f"Static Runtime cannot load the frozen {self.how}d module: {error}") from error

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            if self.flat is not None:  # traced through FlatCall: the call's tensors, positionally
                return self.module(*self.flat.tensors(args, kwargs))
            return self.module(*args, **kwargs)

    def op_profile(self, inputs: Inputs, iterations: int) -> dict[str, float]:
        """Milliseconds per call spent in each node kind, measured by Static Runtime itself."""
        args, kwargs = list(inputs.args), dict(inputs.kwargs)
        if self.flat is not None:
            args, kwargs = list(self.flat.tensors(inputs.args, kwargs)), {}
        metrics = self.module.benchmark_individual_ops(args, kwargs, 1, iterations)
        return dict(metrics.time_per_node_type)
