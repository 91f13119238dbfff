"""asv benchmarks generated from srbench's suite files: one parameter value per suite case.

The cases come from ``suites/*.yaml`` through ``srbench.suites.load_suite`` (the files pytest
runs), chosen by ``SRBENCH_ASV_SUITES`` (default ``quick``, the CI suite; e.g.
``SRBENCH_ASV_SUITES=full`` or ``quick,planners``; ``none`` for no case, so that running other
benchmark modules does not measure the suites) and optionally narrowed by a regular expression
on the case id in ``SRBENCH_ASV_CASES``. For every case:

- ``EndToEnd.time_run``: latency of one call of the prepared runtime (asv's timer);
- ``EndToEnd.peakmem_run``: asv's peak resident memory of the benchmark process (it includes
  importing torch and preparing the runtime, so it tracks the whole footprint of running a case);
- ``Memory.track_*``: the runtime's planned bytes, their ratio to the lower bound, allocations
  per steady-state call and the peak of what one call allocates (``torch.profiler``);
- ``OpTime.track_op_time``: seconds per call spent in each kind of node that takes at least 2% of
  the case's operator time (``other``: the rest together; ``total``: all of them).

Preparing and profiling a case is the expensive part. asv needs the node kinds as parameters
when it imports this module, and ``setup_cache`` is not parametrized, so each case is measured
once per version of the code, in a subprocess, and cached under ``.asv/measurements``
(``srbench.asv_tracking.case_measurements``); the ``track_`` benchmarks read that cache. The
timed benchmarks prepare their case in ``setup``, outside the timing. A case that does not apply
here (unsupported runtime, no GPU) shows as n/a; one that fails is recorded as failed for that
case only.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from srbench.asv_tracking.case_measurements import CaseMetrics, asv_run_key, default_cache_dir, load_or_measure
from srbench.asv_tracking.suite_selection import CASES_VARIABLE, NO_SUITES, SUITES_VARIABLE, selected_cases
from srbench.asv_tracking.tracked_metrics import not_applicable_errors, prepare, tracked_op_times, unavailable_device

REPO_ROOT = Path(__file__).resolve().parents[1]
CASES = selected_cases(REPO_ROOT / "suites")
if not CASES and os.environ.get(SUITES_VARIABLE) != NO_SUITES:
    raise LookupError(f"the selected suites have no case (check {CASES_VARIABLE} and the suite files)")
CASE_IDS = list(CASES)
METRICS = load_or_measure(list(CASES.values()), default_cache_dir(REPO_ROOT), run_key=asv_run_key())
OP_TIMES = {case_id: tracked_op_times(metrics.op_seconds_by_kind) for case_id, metrics in METRICS.items()}
NODE_KINDS = sorted({kind for times in OP_TIMES.values() for kind in times})


def _measured(case_id: str) -> CaseMetrics | None:
    """The case's cached metrics; ``None`` when the case does not apply here; raises on failure."""
    metrics = METRICS[case_id]
    if metrics.failure is not None:
        raise RuntimeError(f"measuring case {case_id} failed:\n{metrics.failure}")
    return None if metrics.skipped else metrics


def _number(value: float | None) -> float:
    """asv stores NaN as "n/a": for numbers a runtime does not have (eager plans no memory)."""
    return math.nan if value is None else float(value)


class EndToEnd:
    """The prepared runtime of one case, called on the case's first inputs."""

    params = [CASE_IDS]
    param_names = ["case"]
    timeout = 600

    def setup(self, case_id: str) -> None:
        spec = CASES[case_id]
        reason = unavailable_device(spec)
        if reason:
            raise NotImplementedError(reason)  # asv: skipped
        try:
            self.prepared = prepare(spec)
        except not_applicable_errors() as error:
            raise NotImplementedError(f"{type(error).__name__}: {error}") from error
        self.prepared.run()  # warm-up: first calls allocate and initialise lazily

    def time_run(self, case_id: str) -> None:
        self.prepared.run()

    def peakmem_run(self, case_id: str) -> None:
        self.prepared.run()


def _track(metric: str, unit: str):
    """A ``track_`` benchmark returning one :class:`CaseMetrics` attribute of the case."""

    def track(self, case_id: str) -> float:
        metrics = _measured(case_id)
        return math.nan if metrics is None else _number(getattr(metrics, metric))

    track.unit = unit
    return track


class Memory:
    """The case's memory plan and what one steady-state call allocates (cached measurement)."""

    params = [CASE_IDS]
    param_names = ["case"]

    track_planned_bytes = _track("planned_bytes", "bytes")
    track_lower_bound_ratio = _track("lower_bound_ratio", "planned/lower bound")
    track_allocations_per_run = _track("allocations_per_run", "allocations")
    track_observed_peak_bytes = _track("observed_peak_bytes", "bytes")


class OpTime:
    """Seconds per call spent in each kind of node (``torch.profiler`` or the runtime's own)."""

    params = [CASE_IDS, NODE_KINDS]
    param_names = ["case", "node_kind"]

    def track_op_time(self, case_id: str, node_kind: str) -> float:
        if _measured(case_id) is None:
            return math.nan
        return _number(OP_TIMES[case_id].get(node_kind))

    track_op_time.unit = "seconds"


if not CASES:  # SRBENCH_ASV_SUITES=none: no suite benchmarks in this run
    del EndToEnd, Memory, OpTime
