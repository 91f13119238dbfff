"""PyTorch's C++ Static Runtime (``torch/csrc/jit/runtime/static``), driven from Python.

``torch._C._jit_to_static_module`` takes a frozen TorchScript module; the Python binding exposes
no options, so the runtime runs with its defaults (out variants on, activations cleaned up,
outputs not managed) and ignores srbench's memory options. Its own
``benchmark_individual_ops`` gives the time per node kind.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import torch

from srbench.formatting import error_summary
from srbench.inputs import Inputs
from srbench.runtimes import EagerMode, RuntimeOptions, UnsupportedRuntime
from srbench.runtimes.torchscript import call_frozen, frozen_torchscript

_UNSUPPORTED = "Found unsupported op:"  # what Static Runtime logs, per op, before it refuses a graph


@contextmanager
def _native_stderr() -> Iterator[list[str]]:
    """The lines C++ code writes to the process's stderr in the body, kept from the terminal:
    Static Runtime names the ops it cannot run only there (``LOG(WARNING)``); its exception
    says only ``Expected canEnableStaticRuntime(graph) to be true``."""
    said: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            said.extend(sink.read().decode(errors="replace").splitlines())


class CxxStaticRuntime:
    honours: ClassVar[tuple[str, ...]] = ()
    devices: ClassVar[tuple[str, ...]] = ("cpu",)  # Static Runtime is CPU-only
    slow: ClassVar[bool] = False
    eager_mode: ClassVar[EagerMode] = EagerMode.INFERENCE_MODE

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        if options.device != "cpu":
            raise UnsupportedRuntime(f"PyTorch's Static Runtime runs on the CPU only, not on {options.device!r}")
        frozen, self.how, self.flat = frozen_torchscript(model, example_inputs)
        self.example = example_inputs
        made = "scripted" if self.how == "script" else "traced"
        try:
            with _native_stderr() as said:
                self.module = torch._C._jit_to_static_module(frozen._c)
        except RuntimeError as error:
            ops = sorted({line.split(_UNSUPPORTED, 1)[1].strip() for line in said if _UNSUPPORTED in line})
            why = f"it has ops Static Runtime does not run: {', '.join(ops)}" if ops else error_summary(error)
            raise UnsupportedRuntime(f"Static Runtime cannot load the frozen {made} module: {why}") from error

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with torch.inference_mode():
            return call_frozen(self.module, self.flat, self.example, args, kwargs)

    def op_profile(self, inputs: Inputs, iterations: int) -> dict[str, float]:
        """Milliseconds per call spent in each node kind, measured by Static Runtime itself."""
        args, kwargs = list(inputs.args), dict(inputs.kwargs)
        if self.flat is not None:
            args, kwargs = list(self.flat.tensors(inputs.args, kwargs)), {}
        metrics = self.module.benchmark_individual_ops(args, kwargs, 1, iterations)
        return dict(metrics.time_per_node_type)
