"""The numbers asv tracks for one case, measured with ``srbench.measure`` (what pytest uses).

A case that does not apply here (a runtime that cannot take the model, a model or device that is
not available) is *skipped* with the reason, which asv shows as "n/a"; anything else that goes
wrong propagates and is recorded as that case's failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from srbench.asv_tracking.case_measurements import CaseMetrics
from srbench.suites import CaseSpec

PROFILE_ITERATIONS = 20
# Node kinds taking less than this share of a case's operator time are tracked together as
# OTHER: their microsecond times mostly measure noise, and each would be a graph of its own.
MIN_OP_SHARE = 0.02
OTHER = "other"
TOTAL = "total"


def tracked_op_times(seconds_by_kind: Mapping[str, float]) -> dict[str, float]:
    """The per-op times asv tracks for one case: each kind with at least ``MIN_OP_SHARE`` of the
    operator time, the rest summed as ``other``, and the ``total``."""
    total = sum(seconds_by_kind.values())
    tracked = {kind: seconds for kind, seconds in seconds_by_kind.items() if total and seconds >= MIN_OP_SHARE * total}
    tracked[OTHER] = total - sum(tracked.values())
    tracked[TOTAL] = total
    return tracked


def case_from_json(data: Mapping[str, Any]) -> CaseSpec:
    """The inverse of ``CaseSpec.to_json()``."""
    return CaseSpec.from_json(data)


def not_applicable_errors() -> tuple[type[BaseException], ...]:
    """Errors meaning "this case does not apply here" rather than "this case is broken"."""
    from srbench.graph import CaptureError
    from srbench.runtimes import UnsupportedRuntime
    from srbench.zoo import ProviderUnavailable

    return (UnsupportedRuntime, CaptureError, ProviderUnavailable)


def unavailable_device(spec: CaseSpec) -> str | None:
    """Why ``spec.options.device`` cannot be used here, or ``None`` when it can."""
    import torch

    if spec.options.device.startswith("cuda") and not torch.cuda.is_available():
        return f"case {spec.id} needs {spec.options.device}, and no CUDA device is available"
    return None


def prepare(spec: CaseSpec):
    """``srbench.measure.prepare_case`` under the case's thread count (set for the process, as
    the benchmark process runs this case only)."""
    import torch

    from srbench.measure import prepare_case

    torch.set_num_threads(spec.options.threads)
    return prepare_case(spec)


def measure(spec: CaseSpec) -> CaseMetrics:
    """Prepare ``spec`` and measure its memory plan, allocations and per-op profile."""
    reason = unavailable_device(spec)
    if reason:
        return CaseMetrics(spec.id, skipped=reason)
    try:
        prepared = prepare(spec)
    except not_applicable_errors() as error:
        return CaseMetrics(spec.id, skipped=f"{type(error).__name__}: {error}")
    memory = prepared.measure_memory()
    milliseconds_by_kind = prepared.op_profile(iterations=PROFILE_ITERATIONS)
    return CaseMetrics(
        spec.id,
        planned_bytes=memory.planned_bytes,
        lower_bound_bytes=memory.lower_bound,
        allocations_per_run=float(memory.allocations),
        observed_peak_bytes=memory.peak_bytes,
        op_seconds_by_kind={kind: ms / 1000.0 for kind, ms in milliseconds_by_kind.items()},
    )
