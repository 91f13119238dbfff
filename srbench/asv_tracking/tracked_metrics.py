"""What asv tracks for one suite case, and how it is measured (with ``srbench.measure``, as pytest does).

A tracked number is one line of :data:`TRACKED_METRICS` (``benchmarks/suites_asv.py`` makes it
``Memory.track_<name>``).
Per-op time is tracked per fixed *bucket* of node kinds (:data:`NODE_KIND_BUCKETS`), not per kind:
asv must know every parameter before anything is measured, and the kinds differ between runtimes
for the same work (eager's ``mkldnn_convolution`` is srbench's ``conv2d``). A bucket under
:data:`MIN_OP_SHARE` of a case's operator time is counted in ``other``: its microseconds mostly
measure noise.
"""

from __future__ import annotations

import re
import traceback
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from srbench.suites import CaseSpec


@dataclass(frozen=True)
class TrackedMetric:
    name: str  # the asv benchmark is Memory.track_<name>
    unit: str
    key: str  # in a case's record, MemoryReport.to_json() (n/a if absent)


TRACKED_METRICS = (
    TrackedMetric("planned_bytes", "bytes", "planned_bytes"),
    TrackedMetric("lower_bound_ratio", "planned/lower bound", "planned_to_lower_bound"),
    TrackedMetric("allocations_per_run", "allocations", "allocations"),
    TrackedMetric("observed_peak_bytes", "bytes", "peak_bytes"),
    TrackedMetric("estimated_peak_bytes", "bytes", "estimated_peak_bytes"),  # eager's, on fake tensors
)

# bucket -> pattern searched in a node kind's bare name ("aten::_embedding_bag" -> "embedding_bag");
# the first match wins, no match is OTHER.
NODE_KIND_BUCKETS = {
    "convolution": r"conv",
    "matmul": r"^(linear|addmm|mm|bmm|matmul|baddbmm|addbmm|addmv|mv|dot|einsum)$",
    "attention": r"attention",
    "recurrent": r"lstm|gru|rnn",
    "normalization": r"norm",
    "pooling": r"pool",
    "embedding": r"embedding",
    "activation": r"elu|sigmoid|tanh|silu|swish|softmax|clamp",
    "data_movement": r"^(view|reshape|unsafe_view|permute|transpose|t|expand|slice|select|narrow|squeeze|unsqueeze"
    r"|flatten|unbind|split|chunk|as_strided|getitem|contiguous|clone|copy|to|to_copy|cat|varconcat|stack|index"
    r"|index_select|gather|listconstruct|listunpack|tupleconstruct|tupleunpack)$",
}
OTHER = "other"
TOTAL = "total"
OP_TIME_BUCKETS = [*NODE_KIND_BUCKETS, OTHER, TOTAL]
MIN_OP_SHARE = 0.02
PROFILE_ITERATIONS = 20
_PATTERNS = {bucket: re.compile(pattern) for bucket, pattern in NODE_KIND_BUCKETS.items()}


def bucket_of(node_kind: str) -> str:
    """The bucket of a node kind as runtimes name them (``aten::add_``, ``aten.addmm.default``, ``prim::If``)."""
    parts = re.split(r"::|\.", node_kind)
    name = (parts[1] if len(parts) > 1 else parts[0]).strip("_").lower()
    return next((bucket for bucket, pattern in _PATTERNS.items() if pattern.search(name)), OTHER)


def op_time_buckets(seconds_by_kind: Mapping[str, float]) -> dict[str, float]:
    """Seconds per call by bucket: those with at least ``MIN_OP_SHARE`` of the total, ``other``, ``total``
    (none for an empty profile)."""
    sums: defaultdict[str, float] = defaultdict(float)
    for kind, seconds in seconds_by_kind.items():
        sums[bucket_of(kind)] += seconds
    total = sum(sums.values())
    tracked = {bucket: s for bucket, s in sums.items() if bucket != OTHER and total and s >= MIN_OP_SHARE * total}
    return {**tracked, OTHER: total - sum(tracked.values()), TOTAL: total} if sums else {}


class NotApplicable(NotImplementedError):
    """The case does not apply here (no such device, a runtime that cannot take the model); asv
    shows a benchmark whose setup raises ``NotImplementedError`` as n/a."""


@dataclass(frozen=True)
class CaseMeasurement:
    """One case's record (see the module docstring) and per-op seconds by bucket; or why it has none."""

    record: dict[str, Any] = field(default_factory=dict)
    op_seconds: dict[str, float] = field(default_factory=dict)
    not_applicable: str | None = None
    failure: str | None = None  # the traceback of a case that could not be measured


def prepare(spec: CaseSpec) -> Any:
    """``srbench.measure.prepare_case`` under the case's thread count (set for the process: an asv
    benchmark process runs one case). Raises :class:`NotApplicable` with the reason."""
    import torch

    from srbench.graph import CaptureError
    from srbench.measure import prepare_case
    from srbench.runtimes import UnsupportedRuntime
    from srbench.zoo import ProviderUnavailable

    if spec.options.device.startswith("cuda") and not torch.cuda.is_available():
        raise NotApplicable(f"case {spec.id} needs {spec.options.device}, and no CUDA device is available")
    torch.set_num_threads(spec.options.threads)
    try:
        return prepare_case(spec)
    except (UnsupportedRuntime, CaptureError, ProviderUnavailable) as error:
        raise NotApplicable(f"{type(error).__name__}: {error}") from error


def measure(spec: CaseSpec) -> CaseMeasurement:
    """Prepare ``spec`` and measure its memory and per-op profile; an error is the case's failure."""
    try:
        prepared = prepare(spec)
        record = prepared.measure_memory().to_json()
        milliseconds = prepared.op_profile(iterations=PROFILE_ITERATIONS)
    except NotApplicable as reason:
        return CaseMeasurement(not_applicable=str(reason))
    except Exception:  # this case's failure, reported by asv for this case only
        return CaseMeasurement(failure=traceback.format_exc(limit=8))
    return CaseMeasurement(record, op_time_buckets({kind: ms / 1000.0 for kind, ms in milliseconds.items()}))


def measure_all(cases: Iterable[CaseSpec]) -> dict[str, CaseMeasurement]:
    return {case.id: measure(case) for case in cases}
