"""The exact planner on families of records it was not developed on: how often it proves, how fast.

``hard_instances.py`` measures ``exact`` on MiniMalloc's family (cut rectangles with a known
packing), the family its search was tuned on. Here each instance is drawn from another family,
with no packing known in advance, so the question is the lower bound's (the most bytes alive at
one step, or the aligned bound where sizes are not multiples of the alignment: see
:func:`srbench.planners._placement.aligned_peak`): ``exact`` minimises and the benchmark
records whether it proved its plan optimal and when; then, told the lower bound as its
capacity (MiniMalloc's decision question at the tightest capacity there is), whether it fits it
and when. The families:

- ``inference``: :func:`srbench.memory.synthetic.synthetic_records`, chains of operators with
  residual and a few long-lived tensors, sizes from a few feature-map sizes;
- ``long_buffers``: the same with four buffers as large as the largest alive over nearly all
  of the graph (caches, encoder outputs), which every placement must work around;
- ``equal_sizes``: random lifetimes (spans of 1 to 40 steps over 300) with sizes of 1 or 2 units
  only, so orders tie everywhere and the search meets its symmetries;
- ``random_intervals``: random lifetimes and sizes drawn uniformly (1 to 64 units);
- ``odd_sizes``: random lifetimes with sizes of 1 to 4,096 bytes, at ``--alignment 64`` not
  multiples of it, so the bytes alive cannot be reached and proofs start from the aligned bound.

Times are CPU seconds of this process (``exact``'s limit is one of CPU time too): the machine is
shared. A benchmark, not a test: nothing is asserted. Run::

    .venv/bin/python benchmarks/exact_families.py [--count 10] [--buffers 300] [--time-limit 5]
"""

from __future__ import annotations

import argparse
import enum
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from srbench.cli._args import positive_float
from srbench.memory.records import TensorUsageRecord
from srbench.memory.synthetic import synthetic_records
from srbench.planners import best as best_heuristic
from srbench.planners import exact, greedy_by_size
from srbench.planners._placement import aligned_peak, as_table

UNIT = 1024
LONG_BUFFERS = 4


def _inference(rng: np.random.Generator, n: int, seed: int) -> list[TensorUsageRecord]:
    return synthetic_records(n, seed=seed, alignment=1)


def _long_buffers(rng: np.random.Generator, n: int, seed: int) -> list[TensorUsageRecord]:
    records = synthetic_records(n - LONG_BUFFERS, seed=seed, alignment=1)
    largest = max(record.size for record in records)
    for index in range(LONG_BUFFERS):
        first = int(rng.integers(0, max(n // 20, 1)))
        last = n - int(rng.integers(1, max(n // 20, 2)))
        records.append(
            TensorUsageRecord(f"long{index}", first, max(last, first), int(rng.integers(largest // 2, largest + 1)))
        )
    return records


def _random_lifetimes(rng: np.random.Generator, n: int, sizes: np.ndarray) -> list[TensorUsageRecord]:
    first = rng.integers(0, 300, size=n)
    span = rng.integers(0, 40, size=n)
    return [TensorUsageRecord(f"t{i}", int(first[i]), int(first[i] + span[i]), int(sizes[i])) for i in range(n)]


def _equal_sizes(rng: np.random.Generator, n: int, seed: int) -> list[TensorUsageRecord]:
    return _random_lifetimes(rng, n, UNIT * rng.choice([1, 2], size=n, p=[0.7, 0.3]))


def _random_intervals(rng: np.random.Generator, n: int, seed: int) -> list[TensorUsageRecord]:
    return _random_lifetimes(rng, n, UNIT * rng.integers(1, 65, size=n))


def _odd_sizes(rng: np.random.Generator, n: int, seed: int) -> list[TensorUsageRecord]:
    return _random_lifetimes(rng, n, rng.integers(1, 4097, size=n))


class Family(enum.Enum):
    """The families of records, each a generator of ``(rng, buffers, seed)``."""

    INFERENCE = "inference"
    LONG_BUFFERS = "long_buffers"
    EQUAL_SIZES = "equal_sizes"
    RANDOM_INTERVALS = "random_intervals"
    ODD_SIZES = "odd_sizes"

    @property
    def make(self) -> Callable[[np.random.Generator, int, int], list[TensorUsageRecord]]:
        return {
            Family.INFERENCE: _inference,
            Family.LONG_BUFFERS: _long_buffers,
            Family.EQUAL_SIZES: _equal_sizes,
            Family.RANDOM_INTERVALS: _random_intervals,
            Family.ODD_SIZES: _odd_sizes,
        }[self]

    def instance(self, buffers: int, seed: int) -> list[TensorUsageRecord]:
        return self.make(np.random.default_rng([seed, list(Family).index(self)]), buffers, seed)


@dataclass(frozen=True)
class Outcome:
    """Exact on one instance, minimising and then told the lower bound."""

    family: Family
    seed: int
    lower_bound: int
    greedy_total: int
    best_total: int
    exact_total: int
    proven: bool
    seconds: float  # the minimising call, CPU seconds
    stopped: str
    fits_bound: bool  # told capacity = lower bound
    seconds_to_bound: float


def solve(family: Family, seed: int, buffers: int, time_limit: float, alignment: int) -> Outcome:
    records = family.instance(buffers, seed)
    bound = aligned_peak(as_table(records), alignment)
    started = time.process_time()
    minimised = exact.plan(records, alignment=alignment, time_limit=time_limit, clock=time.process_time)
    seconds = time.process_time() - started
    started = time.process_time()
    told = exact.plan(records, alignment=alignment, time_limit=time_limit, capacity=bound, clock=time.process_time)
    return Outcome(
        family=family,
        seed=seed,
        lower_bound=bound,
        greedy_total=greedy_by_size.plan(records, alignment=alignment).total_bytes,
        best_total=best_heuristic.plan(records, alignment=alignment).total_bytes,
        exact_total=minimised.total_bytes,
        proven=minimised.proven_optimal,
        seconds=seconds,
        stopped=str(minimised.notes["stopped"]),
        fits_bound=bool(told.notes["capacity_met"]),
        seconds_to_bound=time.process_time() - started,
    )


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2] if ordered else math.nan


def report(outcomes: Sequence[Outcome], time_limit: float) -> str:
    lines = []
    for family in Family:
        group = [o for o in outcomes if o.family is family]
        if not group:
            continue
        proven = [o for o in group if o.proven]
        fits = [o for o in group if o.fits_bound]
        lines.append(
            f"{family.value}: proven optimal {len(proven)}/{len(group)} "
            f"(median {_median([o.seconds for o in proven]):.2f} s, "
            f"max {max((o.seconds for o in proven), default=math.nan):.2f} s), at the lower bound "
            f"{sum(o.exact_total == o.lower_bound for o in group)}/{len(group)}; told the lower bound: fits "
            f"{len(fits)}/{len(group)} (median {_median([o.seconds_to_bound for o in fits]):.2f} s); "
            f"exact / bound worst {max(o.exact_total / o.lower_bound for o in group):.3f}, best "
            f"{max(o.best_total / o.lower_bound for o in group):.3f}, greedy by size "
            f"{max(o.greedy_total / o.lower_bound for o in group):.3f}; stopped: "
            + ", ".join(f"{s} {sum(o.stopped == s for o in group)}" for s in sorted({o.stopped for o in group}))
        )
    return "\n".join(lines) + f"\n(CPU seconds, exact limited to {time_limit:g} CPU s per call)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10, help="instances per family (seeds 0, 1, ...)")
    parser.add_argument("--buffers", type=int, default=300, help="buffers per instance")
    parser.add_argument("--time-limit", type=positive_float, default=5.0, help="exact's CPU-second limit per call")
    parser.add_argument("--alignment", type=int, default=1, help="offset alignment the records are planned at")
    parser.add_argument("--families", default=",".join(f.value for f in Family), help="comma-separated families")
    args = parser.parse_args(argv)
    exact.compile_search()
    outcomes = []
    for family in (Family(name) for name in args.families.split(",")):
        for seed in range(args.count):
            outcome = solve(family, seed, args.buffers, args.time_limit, args.alignment)
            outcomes.append(outcome)
            print(
                f"{family.value} {seed}: lb {outcome.lower_bound} exact {outcome.exact_total} "
                f"{'proven' if outcome.proven else outcome.stopped} {outcome.seconds:.2f} s; told lb: "
                f"{'fits' if outcome.fits_bound else 'no'} {outcome.seconds_to_bound:.2f} s",
                flush=True,
            )
    print(report(outcomes, args.time_limit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
