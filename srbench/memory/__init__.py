"""Memory records, plans, their validation, and the lifetime analysis that produces records."""

from srbench.memory.records import (
    MemoryPlan,
    PlanError,
    RecordError,
    TensorUsageRecord,
    align_up,
    check_records,
    lower_bound,
    validate_plan,
)

__all__ = [
    "MemoryPlan",
    "PlanError",
    "RecordError",
    "TensorUsageRecord",
    "align_up",
    "check_records",
    "lower_bound",
    "validate_plan",
]
