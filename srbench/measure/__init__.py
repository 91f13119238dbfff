"""Measuring one case: equivalence with eager, memory (planned, lower bound, observed), and the
per-op profile. Usable outside pytest (the asv benchmarks call the same functions)."""

from srbench.measure.case import PreparedCase, prepare_case
from srbench.measure.equivalence import (
    EquivalenceError,
    EquivalenceReport,
    Expected,
    check_equivalence,
    eager_answer,
)
from srbench.measure.memory import MemoryReport, measure_memory
from srbench.measure.profile import op_profile

__all__ = [
    "EquivalenceError",
    "EquivalenceReport",
    "Expected",
    "MemoryReport",
    "PreparedCase",
    "check_equivalence",
    "eager_answer",
    "measure_memory",
    "op_profile",
    "prepare_case",
]
