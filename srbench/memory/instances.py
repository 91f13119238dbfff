"""Hard memory-planning instances with a known perfect packing, in the manner of MiniMalloc's.

MiniMalloc's challenging instances (``benchmarks/data/minimalloc``) are time x capacity squares
(1,048,576 x 1,048,576, in units of 1,024) cut into a few hundred buffers, some left out: a
packing within the capacity is known to exist, greedy planners need 1.2-1.4 times it, and a
search that is merely tuned to them fails on others of the same kind. This module makes as many
others as wanted, each from a seed, so a planner can be measured on the family rather than on
eleven members of it.

The rectangle is dissected the way a guillotine cuts paper, so every instance comes with its
packing (:attr:`HardInstance.witness`):

* Repeatedly, a piece is picked and cut in two, across time (two buffers one after the other in
  the same bytes) or across bytes (two buffers side by side over the same lifetime), at a random
  multiple of the granularity away from its edges. How much larger pieces are favoured is drawn
  per instance: favoured strongly, the buffers come out of even sizes (like MiniMalloc's F, G
  and H); not at all, a few long or tall buffers stay beside many small ones (like A, I and K).
* Which way a piece is cut depends on its shape (the longer side, relative to the rectangle, is
  cut more often) and on a bias drawn per instance, so some instances are mostly long thin
  buffers (like MiniMalloc's A, D and J) and others short tall ones (like K): the shapes of the
  published instances span both.
* A share of the pieces (drawn per instance, up to ``max_removed``) is left out after the last
  cut, so the lower bound may fall below the capacity while the witness still fits within it
  (MiniMalloc's C, D and J are like that). The rectangle is cut into enough pieces that exactly
  ``buffers`` remain.

The same ``(seed, ...)`` always gives the same instance. Lifetimes are half-open in the sweep and
inclusive in the records (``last = end - 1``), as :mod:`srbench.memory.minimalloc_csv` reads
MiniMalloc's files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from srbench.memory.minimalloc_csv import write_records
from srbench.memory.records import TensorUsageRecord

CAPACITY = 1 << 20
HORIZON = 1 << 20
GRANULARITY = 1 << 10
MIN_BUFFERS, MAX_BUFFERS = 150, 500  # the default range, as MiniMalloc's instances
LARGEST = 5_000  # beyond this, cutting (quadratic in the pieces) takes long, and no search would finish


@dataclass(frozen=True)
class HardInstance:
    """Records that fit within ``capacity``, and the packing that proves it."""

    name: str
    records: tuple[TensorUsageRecord, ...]
    capacity: int
    witness: dict[str, int]  # record id -> offset; every record ends within the capacity


def hard_instance(
    seed: int,
    *,
    buffers: int | None = None,
    capacity: int = CAPACITY,
    horizon: int = HORIZON,
    granularity: int = GRANULARITY,
    max_removed: float = 0.25,
) -> HardInstance:
    """The instance of ``seed``: ``buffers`` records (default: drawn from 150-500) cut from a
    ``horizon`` x ``capacity`` rectangle in units of ``granularity``."""
    if capacity % granularity or horizon % granularity or capacity < 4 * granularity:
        raise ValueError(
            f"capacity ({capacity}) and horizon ({horizon}) must be multiples of the granularity "
            f"({granularity}), the capacity at least 4 of them"
        )
    if not 0 <= max_removed < 1:
        raise ValueError(f"max_removed must be in [0, 1), got {max_removed}")
    rng = np.random.default_rng(seed)
    kept_count = int(rng.integers(MIN_BUFFERS, MAX_BUFFERS + 1)) if buffers is None else buffers
    removed = rng.uniform(0, max_removed)
    target = int(np.ceil(kept_count / (1 - removed)))
    if not 1 <= kept_count <= LARGEST or target > (capacity // granularity) * (horizon // granularity):
        raise ValueError(
            f"buffers must be 1 to {LARGEST:,} and the rectangle ({horizon // granularity} x "
            f"{capacity // granularity} units) must hold {target} pieces, got buffers={kept_count}"
        )
    across_time = rng.uniform(0.3, 0.7)  # this instance's bias towards cutting lifetimes
    evenness = rng.uniform(0.0, 1.0)  # 1: large pieces are cut first (even sizes); 0: any piece
    # Pieces as (first step, end step, offset unit, size units), in units of the granularity.
    pieces = [(0, horizon // granularity, 0, capacity // granularity)]
    while len(pieces) < target:
        area = np.array([(end - start) * size for start, end, _, size in pieces], dtype=np.float64)
        weight = np.where(area > 1, area**evenness, 0.0)  # one unit by one step cannot be cut
        start, end, offset, size = pieces.pop(int(rng.choice(len(pieces), p=weight / weight.sum())))
        width, height = (end - start) / (horizon // granularity), size / (capacity // granularity)
        if end - start > 1 and (size == 1 or rng.random() < across_time * width / (width + height) * 2):
            at = _cut_point(rng, start, end)
            pieces += [(start, at, offset, size), (at, end, offset, size)]
        else:
            at = _cut_point(rng, offset, offset + size)
            pieces += [(start, end, offset, at - offset), (start, end, at, offset + size - at)]
    # In the drawn order, not sorted: sorted pieces list same-lifetime buffers by their offset in
    # the witness, and a solver breaking ties by input order (CP-SAT's lowest-min branching did)
    # was handed the packing.
    kept = [pieces[index] for index in rng.choice(len(pieces), size=kept_count, replace=False)]
    records = []
    witness = {}
    for index, (start, end, offset, size) in enumerate(kept):
        name = str(index)
        records.append(TensorUsageRecord(name, start * granularity, end * granularity - 1, size * granularity))
        witness[name] = offset * granularity
    return HardInstance(name=f"cut-{seed}", records=tuple(records), capacity=capacity, witness=witness)


def _cut_point(rng: np.random.Generator, low: int, high: int) -> int:
    """A cut strictly inside ``[low, high)``, mostly away from its ends (20%-80%)."""
    inner_low, inner_high = low + max(1, (high - low) // 5), high - max(1, (high - low) // 5)
    if inner_low >= inner_high:
        return low + (high - low) // 2
    return int(rng.integers(inner_low, inner_high + 1))


def write_instance(instance: HardInstance, folder: str | os.PathLike[str]) -> Path:
    """Write ``instance`` as ``folder/<name>.<capacity>.csv`` in MiniMalloc's CSV format, named
    as the published instances are (the capacity in the name), with the witness as the
    ``offset`` column of MiniMalloc's solution files; the planners read only the records."""
    path = Path(folder) / f"{instance.name}.{instance.capacity}.csv"
    write_records(instance.records, path, offsets=instance.witness)
    return path
