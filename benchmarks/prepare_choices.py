"""How steady srbench's prepare-time measured choices are: prepare the same model again and again
and count which program each prepare keeps, with the prepare's time.

Not a timed test: run it as a script and read the counts.

    .venv/bin/python benchmarks/prepare_choices.py --prepares 20                 # as the machine is
    .venv/bin/python benchmarks/prepare_choices.py --prepares 20 --busy 2        # two busy loops beside
    .venv/bin/python benchmarks/prepare_choices.py --prepares 20 --cpu 1         # on core 1 alone
    PYTHONPATH=/path/to/other/checkout .venv/bin/python benchmarks/prepare_choices.py  # another version

The cases: the zoo's ``transformer_encoder`` (the lean attention against eager's fused layers,
then the rewrites against none), ``small_cnn`` (fused convolutions against none), ``dlrm`` (no
rewrite applies: nothing is timed, the control) and the batch-32 towers of
``benchmarks/multistream.py`` on two streams (several streams against one). They are prepared in
turn, ``--prepares`` times each, under ``--threads`` intra-op threads. ``--busy N`` runs N
busy-loop processes beside the prepares (the script's own priority), ``--cpu C`` pins the script
(and the busy loops) to core C. A kept program is named by the rewrite passes it applies (or "no
rewrites") and, where several streams were measured against one, the streams it runs on. The
load average before and after is printed. ``--cases`` also takes ``bert_encoder`` and
``resnet18``, for the prepare's time.

Only the public API is used, so the same script measures another checkout of srbench (put it
first on ``PYTHONPATH``) side by side.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

CASES = ("transformer_encoder", "small_cnn", "dlrm", "towers@32")
# more of the zoo, for the prepare's time (every program of one capture: see srbench.static.module)
MORE_CASES = ("bert_encoder", "resnet18")


@dataclass(frozen=True)
class CaseResult:
    case: str
    kept: dict[str, int]  # the kept program's name -> in how many prepares
    prepare_seconds: tuple[float, ...]  # each prepare's wall-clock seconds
    prepare_cpu_seconds: tuple[float, ...]  # and the process's CPU seconds (load adds less to them)


def kept_program(prepared: Any) -> str:
    """The passes a prepared program applies, and the streams it runs on where they were measured
    at prepare time (a schedule the cost model did not find worth several streams is not)."""
    applied = sorted({rewrite.pass_name for rewrite in prepared.rewrites if rewrite.outcome.name == "APPLIED"})
    name = "+".join(applied) or "no rewrites"
    measured = prepared.schedule is not None and "measured_seconds" in prepared.schedule.notes
    return f"{name}, {prepared.streams_used} stream(s) measured" if measured else name


def _builders() -> dict[str, Callable[[], Any]]:
    """Each case's preparation, as a call making a fresh ``StaticModule``."""
    import torch

    from benchmarks.multistream import _towers_model
    from srbench.static import StaticModule, StaticOptions
    from srbench.zoo import load_zoo

    zoo = load_zoo()
    builders: dict[str, Callable[[], Any]] = {}
    for name in ("transformer_encoder", "small_cnn", "dlrm", *MORE_CASES):
        case = zoo.get(name)
        model, inputs = case.model().eval(), case.example_inputs(0, batch=1)
        builders[name] = functools.partial(StaticModule, model, inputs, StaticOptions())
    torch.manual_seed(0)
    towers, x = _towers_model().eval(), torch.randn(32, 256)
    builders["towers@32"] = lambda: StaticModule(towers, (x,), StaticOptions(streams=2, scheduler="critical_path"))
    return builders


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """``count`` processes spinning in Python (inheriting this one's priority and cores) while
    the body runs."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def measure(cases: Sequence[str], prepares: int, threads: int) -> list[CaseResult]:
    """Each of ``cases`` prepared ``prepares`` times, in turn (after one unrecorded warm-up each)."""
    import torch

    torch.set_num_threads(threads)
    builders = _builders()
    for case in cases:
        builders[case]()
    kept: dict[str, collections.Counter[str]] = {case: collections.Counter() for case in cases}
    seconds: dict[str, list[float]] = {case: [] for case in cases}
    cpu_seconds: dict[str, list[float]] = {case: [] for case in cases}
    for _ in range(prepares):
        for case in cases:
            start, cpu_start = time.perf_counter(), time.process_time()
            module = builders[case]()
            seconds[case].append(time.perf_counter() - start)
            cpu_seconds[case].append(time.process_time() - cpu_start)
            kept[case][kept_program(module.prepared)] += 1
    return [CaseResult(case, dict(kept[case]), tuple(seconds[case]), tuple(cpu_seconds[case])) for case in cases]


def report(results: Sequence[CaseResult]) -> str:
    lines = []
    for result in results:
        counts = ", ".join(f"{name}: {count}" for name, count in sorted(result.kept.items(), key=lambda kv: -kv[1]))
        spreads = [
            f"{statistics.median(times):.2f} s median ({min(times):.2f}-{max(times):.2f})"
            for times in (result.prepare_seconds, result.prepare_cpu_seconds)
        ]
        lines.append(f"{result.case}: {counts}; prepare {spreads[0]}, CPU {spreads[1]}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", nargs="*", choices=CASES + MORE_CASES, default=list(CASES))
    parser.add_argument("--prepares", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", type=int, default=0, help="busy-loop processes beside the prepares")
    parser.add_argument("--cpu", type=int, help="pin to this core")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    load_before = os.getloadavg()[0]
    with busy_loops(args.busy):
        results = measure(args.cases, args.prepares, args.threads)
    print(report(results))
    print(f"load average {load_before:.2f} before and {os.getloadavg()[0]:.2f} after", flush=True)
    if args.json:
        from srbench.fileio import atomic_write_text

        atomic_write_text(args.json, json.dumps([asdict(result) for result in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
