"""Seeded synthetic tensor usage records shaped like inference graphs, for benchmarks and tests.

Real graphs are a chain of operators, each producing roughly one tensor that the next one or two
operators read; residual connections keep some tensors alive for a block of operators, and a
few (masks, encoder outputs, early skip connections) live for a large part of the graph. Sizes
come from a handful of feature-map sizes per stage, so equal sizes (and the greedy planners'
tie-breaks) are common, as they are in real networks. The same ``(n, seed)`` always gives the same
records, so timings and ratios are comparable between runs and between planners.
"""

from __future__ import annotations

import numpy as np

from srbench.memory.records import DEFAULT_ALIGNMENT, TensorUsageRecord, align_up

# Share of tensors by lifetime kind, and how many steps each kind lives after its producer.
SHORT, RESIDUAL, LONG = 0.85, 0.13, 0.02
SHORT_SPAN = (1, 3)  # read by the next one to three operators
RESIDUAL_SPAN = (3, 12)  # a residual block
LONG_FRACTION = 0.25  # up to a quarter of the graph


def synthetic_records(
    n: int,
    *,
    seed: int = 0,
    stages: int = 5,
    alignment: int = DEFAULT_ALIGNMENT,
) -> list[TensorUsageRecord]:
    """``n`` records ``t0 .. t{n-1}``, tensor i produced at step i.

    The graph is cut into ``stages`` stages; each stage has a base feature-map size (shrinking
    spatially while channels grow, so sizes vary by a few times across stages), and each tensor
    is its stage's base times 1/4, 1/2, 1, 2 or 4 (mostly 1), rounded up to the alignment.
    """
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    rng = np.random.default_rng(seed)
    stage_base = [align_up(int(2**17 * 0.7**stage), alignment) for stage in range(max(stages, 1))]
    multipliers = np.array([0.25, 0.5, 1.0, 2.0, 4.0])
    multiplier_p = np.array([0.1, 0.15, 0.5, 0.15, 0.1])
    kind = rng.choice(3, size=n, p=[SHORT, RESIDUAL, LONG])
    short = rng.integers(SHORT_SPAN[0], SHORT_SPAN[1] + 1, size=n)
    residual = rng.integers(RESIDUAL_SPAN[0], RESIDUAL_SPAN[1] + 1, size=n)
    long = rng.integers(1, max(2, int(n * LONG_FRACTION)) + 1, size=n)
    span = np.choose(kind, [short, residual, long])
    scale = rng.choice(multipliers, size=n, p=multiplier_p)
    records = []
    for i in range(n):
        base = stage_base[min(i * len(stage_base) // max(n, 1), len(stage_base) - 1)]
        records.append(
            TensorUsageRecord(
                id=f"t{i}",
                first=i,
                last=min(i + int(span[i]), n),
                size=align_up(int(base * scale[i]), alignment),
            )
        )
    return records
