"""What one suite case does inside its test: prepare, check equivalence with eager, and, under
``--benchmark``, time it with pytest-benchmark and record memory and the per-op profile.

The result goes into the test report's ``user_properties`` (plain JSON values), which pytest-xdist
carries from workers to the controller, so the session summary is built in one process and no
two workers ever write the same file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # importing srbench.suites loads the zoo and torch: not at plugin import
    from srbench.suites.spec import CaseSpec

RESULT_PROPERTY = "srbench"


def _latency(benchmark: Any) -> dict[str, float] | None:
    """pytest-benchmark's statistics in seconds, or ``None`` when it did not time (under xdist)."""
    metadata = getattr(benchmark, "stats", None)
    if metadata is None:
        return None
    stats = metadata.stats
    return {
        "median": stats.median,
        "mean": stats.mean,
        "stddev": stats.stddev,
        "min": stats.min,
        "rounds": stats.rounds,
    }


def run_case(spec: CaseSpec, benchmark: Any | None, user_properties: list[tuple[str, Any]]) -> None:
    from srbench.graph import CaptureError
    from srbench.measure import prepare_case
    from srbench.runtimes import RuntimeUnavailable, UnsupportedRuntime, intra_op_threads

    with intra_op_threads(spec.options.threads):
        try:
            prepared = prepare_case(spec)
        except RuntimeUnavailable as error:
            pytest.skip(f"{type(error).__name__}: {error}")
        except (UnsupportedRuntime, CaptureError) as error:
            pytest.xfail(f"{type(error).__name__}: {error}")
        try:
            equivalence = prepared.check_equivalence()
        except UnsupportedRuntime as error:  # a runtime that prepares per call refusing another shape
            pytest.xfail(f"{type(error).__name__} at a later call: {error}")
        result: dict[str, Any] = {
            "case": spec.to_json(),
            "prepare_seconds": prepared.prepare_seconds,
            "equivalence": equivalence.to_json(),
        }
        if benchmark is not None:
            benchmark.group = f"{spec.suite}: {spec.model}"  # pytest-benchmark's table, one part per model
            benchmark.pedantic(prepared.run, rounds=spec.repetitions, warmup_rounds=1, iterations=1)
            memory = prepared.measure_memory().to_json()
            profile = prepared.op_profile()
            benchmark.extra_info.update(
                {
                    "srbench_case": spec.id,
                    **memory,
                    "op_profile_ms": profile,
                    "prepare_seconds": prepared.prepare_seconds,
                }
            )
            result.update(latency=_latency(benchmark), memory=memory, op_profile_ms=profile)
    user_properties.append((RESULT_PROPERTY, result))
