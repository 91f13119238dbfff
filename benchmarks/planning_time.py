"""Planning time and plan quality of every planner on synthetic records of 100 to 100,000 tensors.

The records come from :func:`srbench.memory.synthetic.synthetic_records` (seeded, shaped like
inference graphs: mostly short lifetimes, some residual ones, a few long; graphs of large
language models and batched training steps reach 10^5 tensors). Times are CPU seconds of this
process (``--wall`` for wall-clock time): on a machine shared with other work, wall time measures
the neighbours as much as the planner. This is a benchmark, not a test: the goals (below, from
issue 15) are checked here and printed, never asserted in the unit tests.

As asv benchmarks (``benchmark_dir`` is this folder): ``PlanningTime.time_plan`` times one
planner call, ``PlanningTime.track_ratio_to_lower_bound`` records the plan's total over the lower
bound, for every planner x size. Run directly for an aligned table and the growth per 10x::

    .venv/bin/python benchmarks/planning_time.py [--planners a,b] [--sizes 100,1000,10000,100000] [--wall]
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Sequence
from typing import Any

from srbench.asv_tracking.attributes import asv_attributes
from srbench.memory.records import lower_bound
from srbench.memory.synthetic import synthetic_records
from srbench.planners import exact, get_planner, planner_names

SIZES = [100, 1_000, 10_000, 100_000]
# Searching planners stop at their time limit and return their best plan; keep that short here so
# the benchmark measures the heuristics' scale and the search's time-bounded quality.
EXACT_TIME_LIMIT = 5.0
# (planner, tensors, seconds): each plans that many tensors within that time.
GOALS = [
    ("greedy_by_size", 10_000, 1.0),
    ("greedy_by_size", 100_000, 2.0),
    ("greedy_by_breadth", 100_000, 2.0),
    ("best", 100_000, 10.0),
    ("exact", 100_000, EXACT_TIME_LIMIT * 1.05),  # its limit, starting plan included
]
CLOCK = time.process_time  # main() switches to time.perf_counter with --wall


def options(planner: str) -> dict[str, Any]:
    """What ``planner`` is given besides the records: exact's limit, kept on the clock measured."""
    return {"time_limit": EXACT_TIME_LIMIT, "clock": CLOCK} if planner == "exact" else {}


def plan_once(planner: str, records) -> tuple[float, int]:
    """Seconds one call of ``planner`` takes, and the total of its plan."""
    plan = get_planner(planner)
    start = CLOCK()
    result = plan(records, **options(planner))
    return CLOCK() - start, result.total_bytes


class PlanningTime:
    params = [planner_names(), SIZES]
    param_names = ["planner", "tensors"]
    number = 1  # one plan per sample: the large sizes take long enough to time alone
    repeat = (1, 5, 20.0)
    timeout = 300.0

    def setup(self, planner: str, tensors: int) -> None:
        self.records = synthetic_records(tensors)
        self.plan = get_planner(planner)
        self.options = options(planner)

    def time_plan(self, planner: str, tensors: int) -> None:
        self.plan(self.records, **self.options)

    @asv_attributes(unit="total / lower bound")
    def track_ratio_to_lower_bound(self, planner: str, tensors: int) -> float:
        return self.plan(self.records, **self.options).total_bytes / lower_bound(self.records)


def measure(planners: Sequence[str], sizes: Sequence[int], repeat: int) -> dict[tuple[str, int], tuple[float, float]]:
    """(planner, size) -> (best seconds of ``repeat`` calls, total / lower bound)."""
    if "exact" in planners:
        # numba's cores compile (or load from the cache) on first use: outside every measurement,
        # which once charged a second of it to exact's first call at 10,000 tensors.
        exact.compile_search()
    results = {}
    for size in sizes:
        records = synthetic_records(size)
        bound = lower_bound(records)
        for planner in planners:
            calls = repeat if size < 10_000 else max(1, repeat // 2) if size < 100_000 else 1
            runs = [plan_once(planner, records) for _ in range(calls)]
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
        f"time: {'CPU' if CLOCK is time.process_time else 'wall'} seconds, best of several calls (one at "
        "100,000); TIME a->b: how time grows from a to b tensors (b/a for linear growth, (b/a)^2 for "
        "quadratic); RATIO: total / lower bound"
    )
    for planner, tensors, seconds in missed_goals(results, report_all=True):
        verdict = "met" if results[planner, tensors][0] <= seconds else "MISSED"
        lines.append(
            f"goal: {planner} plans {tensors:,} tensors in at most {seconds:g} s: "
            f"{_seconds(results[planner, tensors][0])} ({verdict})"
        )
    return "\n".join(lines)


def missed_goals(results, report_all: bool = False) -> list[tuple[str, int, float]]:
    """The goals measured in ``results`` that were missed (every measured one with ``report_all``)."""
    return [
        (planner, tensors, seconds)
        for planner, tensors, seconds in GOALS
        if (planner, tensors) in results and (report_all or results[planner, tensors][0] > seconds)
    ]


def _seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--planners", default=",".join(planner_names()), help="comma-separated planners (default: all)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated record counts")
    parser.add_argument("--repeat", type=int, default=5, help="calls per measurement; the best is kept")
    parser.add_argument("--wall", action="store_true", help="wall-clock time instead of this process's CPU time")
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if args.wall else time.process_time
    planners = [name for name in args.planners.split(",") if name]
    sizes = sorted(int(size) for size in args.sizes.split(",") if size)
    results = measure(planners, sizes, max(1, args.repeat))
    print(format_report(results, planners, sizes))
    return 1 if missed_goals(results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
