"""srbench's own static runtime (``srbench.static``) as a runtime plugin: the only runtime that
reads the static options (:class:`srbench.options.StaticOptions`: planner, cleanup, out variants,
managed outputs, decompose).

Preparing raises ``srbench.graph.CaptureError`` when ``torch.export`` cannot capture the model,
and :class:`UnsupportedRuntime` when an op of the graph can run neither with an out variant nor
as a fallback, or when the example call passes an argument the runtime does not take (a sparse
or nested tensor: :class:`~srbench.static.InputSignatureError` at prepare time); suites report
them as expected failures with the reason. A later call of another structure, leaf kind or dtype
than the example's gets a program of its own; an ``InputSignatureError`` at a later call (a tensor
on another device, or a call the model does not take, named by how it differs from the example)
stays one: the runtime took the model, the call is the user's.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from srbench.inputs import Inputs
from srbench.memory.records import lower_bound
from srbench.runtimes import STATIC_OPTION_NAMES, EagerMode, PlannedMemory, RuntimeOptions, UnsupportedRuntime


class SrbenchRuntime:
    honours: ClassVar[tuple[str, ...]] = STATIC_OPTION_NAMES
    devices: ClassVar[tuple[str, ...]] = ("cpu", "cuda")
    slow: ClassVar[bool] = False
    eager_mode: ClassVar[EagerMode] = EagerMode.NO_GRAD

    def __init__(self, model: torch.nn.Module, example_inputs: Inputs, options: RuntimeOptions = RuntimeOptions()):
        from srbench.static import InputSignatureError, StaticModule, UnsupportedOpError

        try:  # RuntimeOptions are StaticOptions: every static option reaches the runtime as is
            self.module = StaticModule(model, example_inputs, options, name=type(model).__name__)
        except (UnsupportedOpError, InputSignatureError) as error:
            raise UnsupportedRuntime(str(error)) from error
        self.runtime = self.module.runtime()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.runtime(*args, **kwargs)

    def planned_memory(self) -> PlannedMemory | None:
        """The slab planned for the example inputs' shapes, or ``None`` when nothing is managed."""
        prepared = self.module.prepared
        if prepared.plan is None:
            return None
        return PlannedMemory(
            planned_bytes=prepared.plan.plan.total_bytes,
            lower_bound=prepared.plan.lower_bound,
            graph_lower_bound=lower_bound(prepared.analysis.records),
        )

    def op_profile(self, inputs: Inputs, iterations: int) -> dict[str, float]:
        """Milliseconds per call spent in each node kind, timed by the generated profiling code."""
        profile = self.runtime.profile(inputs, iterations=iterations, warmup=1)
        return {kind.kind: kind.mean_ms for kind in profile.kinds}
