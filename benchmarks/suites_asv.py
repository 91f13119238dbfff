"""asv benchmarks generated from srbench's suite files: one parameter value per suite case.

The cases come from ``suites/*.yaml`` through ``srbench.suites.load_suite`` (the files pytest
runs), chosen by ``SRBENCH_ASV_SUITES`` (default ``quick``, the CI suite; e.g.
``SRBENCH_ASV_SUITES=full`` or ``quick,planners``; ``none`` for no case, so that running other
benchmark modules does not measure the suites) and optionally narrowed by a regular expression
on the case id in ``SRBENCH_ASV_CASES``. Importing this module reads the suite files and measures
nothing. For every case:

- ``EndToEnd.time_run``: latency of one call of the prepared runtime (asv's timer);
- ``EndToEnd.peakmem_run``: asv's peak resident memory of the benchmark process (it includes
  importing torch and preparing the runtime, so it tracks the whole footprint of running a case);
- ``Memory.track_<name>``, one per entry of ``srbench.asv_tracking.tracked_metrics.TRACKED_METRICS``
  (add a tracked number there): planned bytes, their ratio to the lower bound, allocations per
  steady-state call, the peak of what one call allocates (``torch.profiler``) and eager's peak
  estimated on fake tensors (``srbench.estimate``);
- ``OpTime.track_op_time``: seconds per call by bucket of node kinds (convolution, matmul,
  attention, ..., ``other``, ``total``; see ``tracked_metrics``).

asv runs every parameter combination in a process of its own, under the benchmark's ``timeout``.
The timed benchmarks prepare their case in ``setup``, outside the timing. The ``track_`` ones read
one measurement of every case taken by ``setup_cache``, which asv runs once for ``Memory`` and
``OpTime`` together (they share the method) and passes to each benchmark; a case that fails there
fails its own benchmarks only, unless it kills the measuring process, which fails them all. A case
that does not apply here (unsupported runtime, no GPU) shows as n/a.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from srbench.asv_tracking.attributes import asv_attributes
from srbench.asv_tracking.suite_selection import selected_cases
from srbench.asv_tracking.tracked_metrics import (
    OP_TIME_BUCKETS,
    TRACKED_METRICS,
    CaseMeasurement,
    NotApplicable,
    TrackedMetric,
    measure_all,
    prepare,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
CASES = selected_cases(REPO_ROOT / "suites")
CASE_IDS = list(CASES)
SECONDS_PER_CASE = 600


class EndToEnd:
    """The prepared runtime of one case, called on the case's first inputs."""

    params = [CASE_IDS]
    param_names = ["case"]
    timeout = SECONDS_PER_CASE

    def setup(self, case_id: str) -> None:
        self.prepared = prepare(CASES[case_id])
        self.prepared.run()  # warm-up: first calls allocate and initialise lazily

    def time_run(self, case_id: str) -> None:
        self.prepared.run()

    def peakmem_run(self, case_id: str) -> None:
        self.prepared.run()


class _Measured:
    """Benchmarks reading the measurement ``setup_cache`` takes of every case."""

    params: list[list[str]] = [CASE_IDS]
    param_names = ["case"]

    @asv_attributes(timeout=SECONDS_PER_CASE * len(CASE_IDS))
    def setup_cache(self) -> dict[str, CaseMeasurement]:
        return measure_all(CASES.values())

    def setup(self, measurements: dict[str, CaseMeasurement], case_id: str, *_: str) -> None:
        self.measured = measurements[case_id]
        if self.measured.not_applicable:
            raise NotApplicable(self.measured.not_applicable)
        if self.measured.failure:
            raise RuntimeError(f"measuring case {case_id} failed:\n{self.measured.failure}")


def _number(value: float | None) -> float:
    """asv stores NaN as "n/a": for numbers a case does not have (eager plans no memory)."""
    return math.nan if value is None else float(value)


def _track(metric: TrackedMetric) -> Callable[[Memory, dict[str, CaseMeasurement], str], float]:
    @asv_attributes(unit=metric.unit)
    def track(self: Memory, measurements: dict[str, CaseMeasurement], case_id: str) -> float:
        return _number(self.measured.record.get(metric.key))

    return track


class Memory(_Measured):
    """The case's memory plan and what one steady-state call allocates."""


for _metric in TRACKED_METRICS:
    setattr(Memory, f"track_{_metric.name}", _track(_metric))


class OpTime(_Measured):
    """Seconds per call spent in each bucket of node kinds (the runtime's own timing or ``torch.profiler``)."""

    params = [CASE_IDS, OP_TIME_BUCKETS]
    param_names = ["case", "node_kind"]

    @asv_attributes(unit="seconds")
    def track_op_time(self, measurements: dict[str, CaseMeasurement], case_id: str, bucket: str) -> float:
        return _number(self.measured.op_seconds.get(bucket))


if not CASES:  # SRBENCH_ASV_SUITES=none: no suite benchmarks in this run
    del EndToEnd, Memory, OpTime
