"""The exact planner on generated hard instances: the share it fits within capacity, and how fast.

The instances come from :func:`srbench.memory.instances.hard_instance` (a time x capacity
rectangle cut into 150-500 buffers, some left out, so a packing within the capacity is known to
exist: MiniMalloc's family of challenging instances, one per seed). For each, ``exact`` runs with
its time limit (10 s by default, the issue's goal) and the benchmark records whether and when its
plan first fit within the capacity; greedy by size and ``best`` are planned beside it, for the
quality of the heuristics on the same family. ``--minimalloc`` adds MiniMalloc's published
instances A-K (``benchmarks/data/minimalloc``) to the same table.

Times are CPU seconds of this process by default (``exact``'s limit is then one of CPU time, and
it records when each improvement came on that clock): on a machine shared with other work, wall
time measures the neighbours as much as the search. ``--wall`` measures wall-clock time instead.
This is a benchmark, not a test: the goal (every instance fits within 10 s) is printed as met or
missed, never asserted.

As asv benchmarks (``benchmark_dir`` is this folder) every figure is a ``track_`` value computed
once in ``setup_cache``. Run directly for the table (50 instances x up to 10 s: up to 9 minutes)::

    .venv/bin/python benchmarks/hard_instances.py [--count 50] [--first-seed 0] [--time-limit 10]
        [--buffers N] [--minimalloc] [--minimise] [--wall] [--json out.json]
"""

from __future__ import annotations

import argparse
import enum
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from srbench.asv_tracking.attributes import asv_attributes
from srbench.cli._args import positive_float
from srbench.memory.instances import HardInstance, hard_instance
from srbench.memory.minimalloc_csv import read_records
from srbench.memory.records import MemoryPlan, lower_bound
from srbench.planners import best as best_heuristic
from srbench.planners import exact, greedy_by_size

DATA = Path(__file__).resolve().parent / "data" / "minimalloc"
COUNT = 50
TIME_LIMIT = 10.0
ALIGNMENT = 1  # the instances' sizes are multiples of 1,024, MiniMalloc's are not aligned at all


class Clock(enum.Enum):
    """What the times (and exact's limit) are measured on."""

    CPU = "cpu"  # this process's CPU time: fair on a shared machine
    WALL = "wall"

    @property
    def read(self) -> Callable[[], float]:
        return time.process_time if self is Clock.CPU else time.perf_counter


@dataclass(frozen=True)
class Outcome:
    """Exact, greedy by size and best on one instance."""

    instance: str
    buffers: int
    capacity: int
    lower_bound: int
    greedy_total: int
    best_total: int
    exact_total: int
    greedy_seconds: float
    best_seconds: float
    exact_seconds: float  # the whole call (it goes on proving or improving after it fits)
    seconds_to_capacity: float | None  # when exact's plan first fit the capacity; None: never

    @property
    def solved(self) -> bool:
        return self.seconds_to_capacity is not None


def generated(count: int, first_seed: int = 0, buffers: int | None = None) -> list[HardInstance]:
    """The instances of seeds ``first_seed`` on, of ``buffers`` each (default: drawn, 150-500)."""
    return [hard_instance(seed, buffers=buffers) for seed in range(first_seed, first_seed + count)]


def published() -> list[HardInstance]:
    """MiniMalloc's instances A-K with their capacity (no witness: they ship without one)."""
    instances = []
    for path in sorted(DATA.glob("*.csv")):
        name, capacity = path.name.split(".")[:2]
        instances.append(HardInstance(name, tuple(read_records(path)), int(capacity), {}))
    return instances


def _timed(clock: Clock, plan: Callable[[], MemoryPlan]) -> tuple[MemoryPlan, float]:
    started = clock.read()
    result = plan()
    return result, clock.read() - started


def solve(
    instance: HardInstance, time_limit: float = TIME_LIMIT, clock: Clock = Clock.CPU, told_capacity: bool = True
) -> Outcome:
    """Plan ``instance``; ``told_capacity``: exact is asked its capacity (else it minimises)."""
    records = list(instance.records)
    greedy, greedy_seconds = _timed(clock, lambda: greedy_by_size.plan(records, alignment=ALIGNMENT))
    best, best_seconds = _timed(clock, lambda: best_heuristic.plan(records, alignment=ALIGNMENT))
    capacity = instance.capacity if told_capacity else None
    searched, exact_seconds = _timed(
        clock,
        lambda: exact.plan(records, alignment=ALIGNMENT, time_limit=time_limit, capacity=capacity, clock=clock.read),
    )
    return Outcome(
        instance=instance.name,
        buffers=len(records),
        capacity=instance.capacity,
        lower_bound=lower_bound(records),
        greedy_total=greedy.total_bytes,
        best_total=best.total_bytes,
        exact_total=searched.total_bytes,
        greedy_seconds=greedy_seconds,
        best_seconds=best_seconds,
        exact_seconds=exact_seconds,
        seconds_to_capacity=exact.seconds_to_reach(searched.notes, instance.capacity),
    )


def _warm_up() -> None:
    """Compile (or load) the exact planner's numba cores, its heuristics' included, outside every
    measurement."""
    exact.compile_search()


@dataclass(frozen=True)
class Summary:
    """The share solved within the limit, and the time to fit (unsolved ones count as never)."""

    instances: int
    solved: int
    median: float  # seconds; math.inf when more than half were not solved
    p90: float
    max: float

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> Summary:
        times = sorted(math.inf if o.seconds_to_capacity is None else o.seconds_to_capacity for o in outcomes)
        return cls(
            instances=len(outcomes),
            solved=sum(o.solved for o in outcomes),
            median=_nearest_rank(times, 0.5),
            p90=_nearest_rank(times, 0.9),
            max=times[-1],
        )


def _nearest_rank(ordered: Sequence[float], share: float) -> float:
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


# --- asv --------------------------------------------------------------------------------------


class HardInstances:
    """Exact on COUNT generated instances with TIME_LIMIT each (about 10 minutes at most)."""

    timeout = COUNT * (TIME_LIMIT + 5) + 60

    def setup_cache(self) -> Summary:
        _warm_up()
        return Summary.of([solve(instance) for instance in generated(COUNT)])

    @asv_attributes(unit="share of instances")
    def track_share_solved(self, summary: Summary) -> float:
        return summary.solved / summary.instances

    @asv_attributes(unit="seconds")
    def track_median_seconds_to_capacity(self, summary: Summary) -> float:
        return summary.median

    @asv_attributes(unit="seconds")
    def track_p90_seconds_to_capacity(self, summary: Summary) -> float:
        return summary.p90

    @asv_attributes(unit="seconds")
    def track_max_seconds_to_capacity(self, summary: Summary) -> float:
        return summary.max


# --- command line -----------------------------------------------------------------------------


def _seconds(seconds: float | None, limit: float) -> str:
    if seconds is None or math.isinf(seconds):
        return f"> {limit:g} s"
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def report(outcomes: Sequence[Outcome], time_limit: float, clock: Clock) -> str:
    from srbench.compare.tables import aligned

    header = ("INSTANCE", "BUFFERS", "LB /CAP", "GREEDY /CAP", "BEST /CAP", "EXACT /CAP", "FIT AFTER")
    rows = [
        (
            o.instance,
            str(o.buffers),
            f"{o.lower_bound / o.capacity:.3f}",
            f"{o.greedy_total / o.capacity:.3f}",
            f"{o.best_total / o.capacity:.3f}",
            f"{o.exact_total / o.capacity:.3f}",
            _seconds(o.seconds_to_capacity, time_limit),
        )
        for o in outcomes
    ]
    lines = [aligned((header, rows), 2), ""]
    for label, group in (
        ("generated", [o for o in outcomes if o.instance.startswith("cut-")]),
        ("MiniMalloc A-K", [o for o in outcomes if not o.instance.startswith("cut-")]),
    ):
        if not group:
            continue
        summary = Summary.of(group)
        verdict = "met" if summary.solved == summary.instances else "MISSED"
        lines.append(
            f"{label}: {summary.solved}/{summary.instances} fit within capacity in {time_limit:g} s "
            f"(goal: all, {verdict}); time to fit ({clock.value} seconds from the call): median "
            f"{_seconds(summary.median, time_limit)}, p90 {_seconds(summary.p90, time_limit)}, max "
            f"{_seconds(summary.max, time_limit)}; "
            f"greedy by size / capacity: mean {statistics.mean(o.greedy_total / o.capacity for o in group):.3f}, "
            f"best {statistics.mean(o.best_total / o.capacity for o in group):.3f}; "
            f"heuristics' time: greedy by size max {_seconds(max(o.greedy_seconds for o in group), 0)}, "
            f"best max {_seconds(max(o.best_seconds for o in group), 0)}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=COUNT, help="generated instances (seeds first-seed, ...)")
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first generated instance")
    parser.add_argument("--buffers", type=int, help="buffers per generated instance (default: drawn, 150-500)")
    parser.add_argument("--time-limit", type=positive_float, default=TIME_LIMIT, help="exact's limit per instance (s)")
    parser.add_argument("--minimalloc", action="store_true", help="also MiniMalloc's published A-K")
    parser.add_argument("--minimise", action="store_true", help="exact minimises, not told the capacity")
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of this process's CPU time")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE")
    args = parser.parse_args(argv)
    clock = Clock.WALL if args.wall else Clock.CPU
    _warm_up()
    instances = (published() if args.minimalloc else []) + generated(args.count, args.first_seed, args.buffers)
    outcomes = []
    for instance in instances:
        outcomes.append(solve(instance, args.time_limit, clock, told_capacity=not args.minimise))
        o = outcomes[-1]
        print(f"{o.instance}: {_seconds(o.seconds_to_capacity, args.time_limit)}", flush=True)
    print(report(outcomes, args.time_limit, clock))
    if args.json:
        from srbench.fileio import atomic_write_text

        document = {
            "time_limit": args.time_limit,
            "clock": clock.value,
            "told_capacity": not args.minimise,
            "outcomes": [asdict(o) for o in outcomes],
        }
        atomic_write_text(args.json, json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
