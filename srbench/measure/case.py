"""One case of a suite, prepared for measuring: the model, its inputs on the case's device, eager's
answers, and the runtime prepared under the case's options.

The pytest plugin and the asv benchmarks both start here. Thread counts are the caller's job:
wrap preparation and every measurement in ``srbench.runtimes.intra_op_threads(spec.options.threads)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from srbench.inputs import Inputs
from srbench.measure.equivalence import EquivalenceReport, Expected, check_equivalence, eager_answer
from srbench.measure.memory import MemoryReport, measure_memory
from srbench.measure.profile import op_profile
from srbench.runtimes import Runtime, eager_mode_of, get_runtime
from srbench.suites.spec import CaseSpec
from srbench.zoo import ModelCase, Zoo, load_zoo


@dataclass
class PreparedCase:
    spec: CaseSpec
    model_case: ModelCase
    runtime: Runtime
    first_inputs: Inputs
    second_inputs: Inputs
    expected_first: Expected
    expected_second: Expected
    prepare_seconds: float

    @property
    def rtol(self) -> float:
        return self.spec.rtol if self.spec.rtol is not None else self.model_case.rtol

    @property
    def atol(self) -> float:
        return self.spec.atol if self.spec.atol is not None else self.model_case.atol

    def run(self) -> Any:
        """One call of the prepared runtime on the first inputs (what timing measures)."""
        return self.first_inputs.call(self.runtime)

    def check_equivalence(self) -> EquivalenceReport:
        return check_equivalence(
            self.runtime,
            self.first_inputs,
            self.second_inputs,
            self.expected_first,
            self.expected_second,
            rtol=self.rtol,
            atol=self.atol,
            outputs_may_be_reused=bool(self.spec.option("manage_output_tensors")),
        )

    def measure_memory(self) -> MemoryReport:
        from srbench.estimate.model import estimated_eager_peak

        device = self.spec.options.device
        estimated = estimated_eager_peak(self.model_case, batch=self.spec.batch, device=device)
        return measure_memory(self.runtime, self.first_inputs, device=device, estimated_peak_bytes=estimated)

    def op_profile(self, iterations: int = 10) -> dict[str, float]:
        return op_profile(self.runtime, self.first_inputs, iterations=iterations)


def prepare_case(spec: CaseSpec, *, zoo: Zoo | None = None) -> PreparedCase:
    """Build the model and inputs of ``spec``, compute eager's answers, then prepare the runtime.

    Raises ``UnsupportedRuntime`` or ``srbench.graph.CaptureError`` (with the reason) when the
    runtime cannot take the model, and ``ModelUnavailable`` when the model cannot be built here.
    """
    model_case = (zoo if zoo is not None else load_zoo()).get(spec.model)
    device = spec.options.device
    model = model_case.model().to(device)
    first = model_case.example_inputs(0, spec.batch).to(device)
    second = model_case.example_inputs(1, spec.batch).to(device)
    runtime_class = get_runtime(spec.runtime)
    mode = eager_mode_of(runtime_class)
    expected_first, expected_second = eager_answer(model, first, mode), eager_answer(model, second, mode)
    start = time.perf_counter()
    runtime = runtime_class(model, first, spec.options)
    prepare_seconds = time.perf_counter() - start
    return PreparedCase(spec, model_case, runtime, first, second, expected_first, expected_second, prepare_seconds)
