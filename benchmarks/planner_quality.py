"""Solution quality and planning time of every planner on published and synthetic instances.

* MiniMalloc's eleven challenging instances A-K (``benchmarks/data/minimalloc``, see its README):
  each planner's total against the capacity the instance was built for (1,048,576 bytes; a
  packing within it exists) and against the lower bound, and its planning time; for ``exact``
  whether it proved its answer optimal and the gap to the best proven bound.
* Seeded synthetic record sets of 100 to 100,000 tensors (:mod:`srbench.memory.synthetic`): how
  close ``exact`` gets to the lower bound within its time limit, beside greedy by size and best.
  (Every planner's time and ratio on these sets is in ``planning_time.py``, generated instances
  of MiniMalloc's family in ``hard_instances.py``; the zoo's figures come from ``srbench compare``.)

Times are CPU seconds of this process (exact's limit is one of CPU time here): on a shared
machine, wall time measures the neighbours as much as the planners. This is a benchmark, not a
test: goals (exact fits every instance within its capacity, within the time limit) are printed
as met or missed, never asserted. MiniMalloc's sizes are not multiples of 64, so these instances
are planned at alignment 1.

As asv benchmarks (``benchmark_dir`` is this folder), every figure is a ``track_`` value computed
once in ``setup_cache``, and ``MiniMallocTime.time_plan`` times the fast heuristics. Run directly
for aligned tables (``--json FILE`` also writes the figures)::

    .venv/bin/python benchmarks/planner_quality.py [--time-limit 60] [--sizes 100,1000,10000,100000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from srbench.asv_tracking.attributes import asv_attributes
from srbench.cli._args import positive_float
from srbench.memory.minimalloc_csv import read_records
from srbench.memory.records import lower_bound
from srbench.memory.synthetic import synthetic_records
from srbench.planners import exact, get_planner, planner_names
from srbench.planners.exact import seconds_to_reach

DATA = Path(__file__).resolve().parent / "data" / "minimalloc"
INSTANCES = sorted(path.name.split(".")[0] for path in DATA.glob("*.csv"))
ALIGNMENT = 1
EXACT_TIME_LIMIT = 60.0
SIZES = [100, 1_000, 10_000, 100_000]
SYNTHETIC_PLANNERS = ["greedy_by_size", "best", "exact"]
# Times are this process's CPU seconds, and exact's limit one of CPU time: on a machine shared with
# other work, wall time measures the neighbours as much as the planners.
CLOCK = time.process_time


@dataclass(frozen=True)
class Outcome:
    """One planner on one instance."""

    instance: str
    planner: str
    tensors: int
    capacity: int | None  # the capacity a published instance was built for
    lower_bound: int
    total: int
    seconds: float
    proven_optimal: bool
    gap: float | None  # exact only: total / best proven bound - 1
    seconds_to_capacity: float | None  # exact only: when its best plan first fit the capacity

    @property
    def ratio_to_capacity(self) -> float:
        return self.total / self.capacity if self.capacity else math.nan

    @property
    def ratio_to_lower_bound(self) -> float:
        return self.total / self.lower_bound if self.lower_bound else 1.0


def instance_path(name: str) -> Path:
    (path,) = DATA.glob(f"{name}.*.csv")
    return path


def plan(planner: str, records, instance: str, capacity: int | None, alignment: int, time_limit: float) -> Outcome:
    started = CLOCK()
    if planner == exact.NAME:
        result = exact.plan(records, alignment=alignment, time_limit=time_limit, clock=CLOCK)
    else:
        result = get_planner(planner)(records, alignment=alignment)
    seconds = CLOCK() - started
    gap = result.notes.get("gap")
    return Outcome(
        instance=instance,
        planner=planner,
        tensors=len(records),
        capacity=capacity,
        lower_bound=lower_bound(records),
        total=result.total_bytes,
        seconds=seconds,
        proven_optimal=result.proven_optimal,
        gap=float(gap) if isinstance(gap, (int, float)) else None,
        seconds_to_capacity=seconds_to_reach(result.notes, capacity) if planner == "exact" and capacity else None,
    )


def minimalloc_outcomes(planners: Sequence[str], time_limit: float = EXACT_TIME_LIMIT) -> list[Outcome]:
    outcomes = []
    for name in INSTANCES:
        path = instance_path(name)
        records = read_records(path)
        capacity = int(path.name.split(".")[1])
        outcomes += [plan(p, records, name, capacity, ALIGNMENT, time_limit) for p in planners]
    return outcomes


def synthetic_outcomes(sizes: Sequence[int], time_limit: float = EXACT_TIME_LIMIT) -> list[Outcome]:
    outcomes = []
    for size in sizes:
        records = synthetic_records(size)
        outcomes += [plan(p, records, f"synthetic-{size}", None, 64, time_limit) for p in SYNTHETIC_PLANNERS]
    return outcomes


def _warm_up() -> None:
    """Compile (or load) the exact planner's numba cores, its heuristics' included, outside every
    measurement."""
    exact.compile_search()


# --- asv --------------------------------------------------------------------------------------


class MiniMalloc:
    """Every planner on every MiniMalloc instance; exact with its full time limit."""

    params = [planner_names(), INSTANCES]
    param_names = ["planner", "instance"]
    timeout = 900.0

    def setup_cache(self) -> dict:
        _warm_up()
        return {(o.planner, o.instance): o for o in minimalloc_outcomes(planner_names())}

    @asv_attributes(unit="total / capacity")
    def track_ratio_to_capacity(self, outcomes, planner, instance) -> float:
        return outcomes[planner, instance].ratio_to_capacity

    @asv_attributes(unit="total / lower bound")
    @asv_attributes(unit="total / lower bound")
    def track_ratio_to_lower_bound(self, outcomes, planner, instance) -> float:
        return outcomes[planner, instance].ratio_to_lower_bound

    @asv_attributes(unit="seconds")
    @asv_attributes(unit="seconds")
    def track_seconds(self, outcomes, planner, instance) -> float:
        return outcomes[planner, instance].seconds

    @asv_attributes(unit="total / proven bound - 1")
    def track_exact_gap(self, outcomes, planner, instance) -> float:
        gap = outcomes[planner, instance].gap
        return math.nan if gap is None else gap


class MiniMallocTime:
    """asv's timer on the fast heuristics (exact runs to its time limit: see MiniMalloc)."""

    params = [[name for name in planner_names() if name != "exact"], INSTANCES]
    param_names = ["planner", "instance"]

    def setup(self, planner: str, instance: str) -> None:
        self.records = read_records(instance_path(instance))
        self.plan = get_planner(planner)

    def time_plan(self, planner: str, instance: str) -> None:
        self.plan(self.records, alignment=ALIGNMENT)


class ExactSynthetic:
    """Exact beside greedy by size and best on synthetic sets of 100 to 10,000 tensors."""

    params = [SYNTHETIC_PLANNERS, SIZES]
    param_names = ["planner", "tensors"]
    timeout = 900.0

    def setup_cache(self) -> dict:
        _warm_up()
        return {(o.planner, o.tensors): o for o in synthetic_outcomes(SIZES)}

    def track_ratio_to_lower_bound(self, outcomes, planner, tensors) -> float:
        return outcomes[planner, tensors].ratio_to_lower_bound

    def track_seconds(self, outcomes, planner, tensors) -> float:
        return outcomes[planner, tensors].seconds


# --- command line -----------------------------------------------------------------------------


def _seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _exact_cells(outcome: Outcome) -> tuple[str, str]:
    if outcome.planner != "exact":
        return "", ""
    return ("yes" if outcome.proven_optimal else "no"), f"{outcome.gap:.2%}"


def _fit_after(outcome: Outcome) -> str:
    if outcome.planner != "exact":
        return ""
    return "-" if outcome.seconds_to_capacity is None else _seconds(outcome.seconds_to_capacity)


def minimalloc_report(outcomes: Sequence[Outcome], planners: Sequence[str]) -> str:
    from srbench.compare.tables import aligned

    header = ("PLANNER", *(f"{name} /CAP" for name in INSTANCES), "MEAN /LB", "MAX TIME")
    rows = []
    for planner in planners:
        mine = [o for o in outcomes if o.planner == planner]
        mean = math.exp(sum(math.log(o.ratio_to_lower_bound) for o in mine) / len(mine))
        rows.append(
            (
                planner,
                *(f"{o.ratio_to_capacity:.3f}" for o in mine),
                f"{mean:.3f}",
                _seconds(max(o.seconds for o in mine)),
            )
        )
    detail_header = (
        "INSTANCE",
        "PLANNER",
        "TENSORS",
        "LOWER BOUND",
        "TOTAL",
        "/CAPACITY",
        "/LB",
        "TIME",
        "PROVEN",
        "GAP",
        "FIT AFTER",
    )
    detail = [
        (
            o.instance,
            o.planner,
            str(o.tensors),
            f"{o.lower_bound:,}",
            f"{o.total:,}",
            f"{o.ratio_to_capacity:.3f}",
            f"{o.ratio_to_lower_bound:.3f}",
            _seconds(o.seconds),
            *_exact_cells(o),
            _fit_after(o),
        )
        for o in outcomes
        if o.planner in ("exact", "best", "greedy_by_size")
    ]
    searched = [o for o in outcomes if o.planner == exact.NAME]
    lines = [aligned((header, rows), 1), "", aligned((detail_header, detail), 2)]
    if searched:
        fits = sum(o.seconds_to_capacity is not None for o in searched)
        slowest = max(o.seconds_to_capacity or 0.0 for o in searched)
        verdict = "met" if fits == len(searched) and slowest <= EXACT_TIME_LIMIT else "MISSED"
        lines.append(
            f"goal: exact fits every instance within its capacity, each within {EXACT_TIME_LIMIT:g} s: "
            f"{fits}/{len(searched)} fit, the slowest to fit after {_seconds(slowest)} ({verdict}); "
            "FIT AFTER: when its plan first fit the capacity (it then goes on to prove or improve)"
        )
    return "\n".join(lines)


def synthetic_report(outcomes: Sequence[Outcome]) -> str:
    from srbench.compare.tables import aligned

    header = ("SET", "PLANNER", "TENSORS", "LOWER BOUND", "TOTAL", "/LB", "TIME", "PROVEN", "GAP")
    rows = [
        (
            o.instance,
            o.planner,
            str(o.tensors),
            f"{o.lower_bound:,}",
            f"{o.total:,}",
            f"{o.ratio_to_lower_bound:.4f}",
            _seconds(o.seconds),
            *_exact_cells(o),
        )
        for o in outcomes
    ]
    return aligned((header, rows), 2)


def main(argv: Sequence[str] | None = None) -> int:
    global EXACT_TIME_LIMIT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--planners", default=",".join(planner_names()), help="comma-separated planners (default: all)")
    parser.add_argument(
        "--time-limit", type=positive_float, default=EXACT_TIME_LIMIT, help="exact's limit per instance (s)"
    )
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="synthetic set sizes ('' for none)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE")
    args = parser.parse_args(argv)
    EXACT_TIME_LIMIT = args.time_limit
    planners = [name for name in args.planners.split(",") if name]
    sizes = [int(size) for size in args.sizes.split(",") if size]
    import torch

    torch.set_num_threads(1)
    _warm_up()
    published = minimalloc_outcomes(planners, args.time_limit)
    print(minimalloc_report(published, planners), flush=True)
    synthetic = synthetic_outcomes(sizes, args.time_limit) if sizes else []
    if synthetic:
        print()
        print(synthetic_report(synthetic))
    if args.json:
        from srbench.fileio import atomic_write_text

        document = {
            "alignment_minimalloc": ALIGNMENT,
            "exact_time_limit": args.time_limit,
            "minimalloc": [asdict(o) for o in published],
            "synthetic": [asdict(o) for o in synthetic],
        }
        atomic_write_text(args.json, json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
