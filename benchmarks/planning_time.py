"""Planning time and plan quality of every planner on synthetic records of 100, 1,000 and 10,000 tensors.

The records come from :func:`srbench.memory.synthetic.synthetic_records` (seeded, shaped like
inference graphs: mostly short lifetimes, some residual ones, a few long). This is a benchmark,
not a test: the goal that greedy by size plans 10,000 tensors in under a second is checked here
and printed, never asserted in the unit tests.

As asv benchmarks (``benchmark_dir`` is this folder): ``PlanningTime.time_plan`` times one
planner call, ``PlanningTime.track_ratio_to_lower_bound`` records the plan's total over the lower
bound, for every planner x size. Run directly for an aligned table and the growth per 10x::

    .venv/bin/python benchmarks/planning_time.py [--planners a,b] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence

from srbench.memory.records import lower_bound
from srbench.memory.synthetic import synthetic_records
from srbench.planners import get_planner, planner_names

SIZES = [100, 1_000, 10_000]
# Searching planners stop at their time limit and return their best plan; keep that short here so
# the benchmark measures the heuristics' scale and the search's time-bounded quality.
OPTIONS: dict[str, dict] = {"exact": {"time_limit": 5.0}}
GOAL_PLANNER, GOAL_TENSORS, GOAL_SECONDS = "greedy_by_size", 10_000, 1.0


def plan_once(planner: str, records) -> tuple[float, int]:
    """Seconds one call of ``planner`` takes, and the total of its plan."""
    plan = get_planner(planner)
    start = time.perf_counter()
    result = plan(records, **OPTIONS.get(planner, {}))
    return time.perf_counter() - start, result.total_bytes


class PlanningTime:
    params = [planner_names(), SIZES]
    param_names = ["planner", "tensors"]
    number = 1  # one plan per sample: the large sizes take long enough to time alone
    repeat = (1, 5, 20.0)
    timeout = 300.0

    def setup(self, planner: str, tensors: int) -> None:
        self.records = synthetic_records(tensors)
        self.plan = get_planner(planner)
        self.options = OPTIONS.get(planner, {})

    def time_plan(self, planner: str, tensors: int) -> None:
        self.plan(self.records, **self.options)

    def track_ratio_to_lower_bound(self, planner: str, tensors: int) -> float:
        return self.plan(self.records, **self.options).total_bytes / lower_bound(self.records)

    track_ratio_to_lower_bound.unit = "total / lower bound"


def measure(planners: Sequence[str], sizes: Sequence[int], repeat: int) -> dict[tuple[str, int], tuple[float, float]]:
    """(planner, size) -> (best seconds of ``repeat`` calls, total / lower bound)."""
    results = {}
    for size in sizes:
        records = synthetic_records(size)
        bound = lower_bound(records)
        for planner in planners:
            runs = [plan_once(planner, records) for _ in range(repeat if size < 10_000 else max(1, repeat // 2))]
            results[planner, size] = (min(seconds for seconds, _ in runs), runs[0][1] / bound)
    return results


def format_report(results, planners: Sequence[str], sizes: Sequence[int]) -> str:
    header = [
        "PLANNER",
        *(f"n={size:,}" for size in sizes),
        *(f"TIME {a:,}->{b:,}" for a, b in itertools.pairwise(sizes)),
    ]
    header += [f"RATIO n={size:,}" for size in sizes]
    rows = []
    for planner in planners:
        times = [results[planner, size][0] for size in sizes]
        growth = [f"{later / earlier:.1f}x" if earlier > 0 else "-" for earlier, later in itertools.pairwise(times)]
        ratios = [f"{results[planner, size][1]:.3f}" for size in sizes]
        rows.append([planner, *(_seconds(t) for t in times), *growth, *ratios])
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
        for row in [header, *rows]
    ]
    lines.append(
        "time: best of several calls; TIME a->b: how time grows from a to b tensors (b/a for linear "
        "growth, (b/a)^2 for quadratic); RATIO: total / lower bound"
    )
    if (GOAL_PLANNER, GOAL_TENSORS) in results:
        seconds = results[GOAL_PLANNER, GOAL_TENSORS][0]
        verdict = "met" if seconds < GOAL_SECONDS else "MISSED"
        lines.append(
            f"goal: {GOAL_PLANNER} plans {GOAL_TENSORS:,} tensors in under {GOAL_SECONDS:g} s: "
            f"{_seconds(seconds)} ({verdict})"
        )
    return "\n".join(lines)


def _seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--planners", default=",".join(planner_names()), help="comma-separated planners (default: all)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated record counts")
    parser.add_argument("--repeat", type=int, default=5, help="calls per measurement; the best is kept")
    args = parser.parse_args(argv)
    planners = [name for name in args.planners.split(",") if name]
    sizes = sorted(int(size) for size in args.sizes.split(",") if size)
    results = measure(planners, sizes, max(1, args.repeat))
    print(format_report(results, planners, sizes))
    goal = results.get((GOAL_PLANNER, GOAL_TENSORS))
    return 1 if goal is not None and goal[0] >= GOAL_SECONDS else 0


if __name__ == "__main__":
    raise SystemExit(main())
