"""Latency and peak memory of eager PyTorch, srbench's static runtime and PyTorch's C++ Static
Runtime, side by side, on the built-in models at batch 1 and one thread.

Not a timed test: run it as a script and read the table.

    .venv/bin/python benchmarks/runtime_latency.py                     # every built-in model
    .venv/bin/python benchmarks/runtime_latency.py --models mlp dlrm --repeats 500 --json out.json

The three runtimes are timed in interleaved rounds (one call of each per round, in rotating
order) so that load from other processes hits them alike; the figure is the median over rounds.
Eager runs under ``torch.inference_mode``; PyTorch's Static Runtime runs a frozen TorchScript
module through ``torch._C._jit_to_static_module`` (the ``static_runtime`` runtime plugin). Peak
memory of one forward is observed with ``torch.profiler`` (``profile_memory=True``): for srbench
it is the slab plus every unmanaged allocation, since the slab is taken at the start of a run
(``cleanup_activations``). Minor page faults per call come from ``resource.getrusage``.

This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

RUNTIMES = ("eager", "srbench", "static_runtime")


@dataclass(frozen=True)
class LatencyRow:
    model: str
    eager_us: float
    srbench_us: float
    static_runtime_us: float | None
    srbench_ratio: float  # srbench / eager (below 1 is faster than eager)
    static_runtime_ratio: float | None
    srbench_to_static_runtime: float | None
    eager_peak_bytes: int
    srbench_peak_bytes: int
    srbench_slab_bytes: int
    eager_faults: float
    srbench_faults: float
    static_runtime_note: str = ""


def _runners(name: str) -> tuple[dict[str, Callable[[], Any]], Any, str]:
    import torch

    from srbench.runtimes import RuntimeOptions, UnsupportedRuntime, get_runtime
    from srbench.static import StaticModule, StaticOptions
    from srbench.zoo import load_zoo

    case = load_zoo().get(name)
    model = case.model()
    inputs = case.example_inputs(0, batch=1)

    def eager() -> Any:
        with torch.inference_mode():
            return model(*inputs)

    static = StaticModule(model, inputs, StaticOptions(), name=name)
    runtime = static.runtime()
    runners: dict[str, Callable[[], Any]] = {"eager": eager, "srbench": lambda: runtime(*inputs)}
    note = ""
    try:
        cxx = get_runtime("static_runtime")(model, inputs, RuntimeOptions())
        runners["static_runtime"] = lambda: cxx(*inputs)
    except (UnsupportedRuntime, RuntimeError) as error:
        note = str(error).splitlines()[0][:80]
    return runners, static, note


def _interleaved_medians(runners: dict[str, Callable[[], Any]], repeats: int, warmup: int) -> dict[str, float]:
    for run in runners.values():
        for _ in range(warmup):
            run()
    samples: dict[str, list[float]] = {name: [] for name in runners}
    order = list(runners)
    clock = time.perf_counter
    for round_ in range(repeats):
        shift = round_ % len(order)
        for name in order[shift:] + order[:shift]:
            run = runners[name]
            start = clock()
            run()
            samples[name].append(clock() - start)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


def measure_model(name: str, repeats: int = 300, warmup: int = 20) -> LatencyRow:
    """Latency (µs, median), peak memory (bytes) and page faults of one built-in model."""
    import torch

    from srbench.measure.memory import observe_allocations, page_faults_per_run

    torch.set_num_threads(1)
    runners, static, note = _runners(name)
    medians = _interleaved_medians(runners, repeats, warmup)
    eager_memory = observe_allocations(runners["eager"])
    srbench_memory = observe_allocations(runners["srbench"])
    cxx = medians.get("static_runtime")
    return LatencyRow(
        model=name,
        eager_us=medians["eager"],
        srbench_us=medians["srbench"],
        static_runtime_us=cxx,
        srbench_ratio=medians["srbench"] / medians["eager"],
        static_runtime_ratio=cxx / medians["eager"] if cxx else None,
        srbench_to_static_runtime=medians["srbench"] / cxx if cxx else None,
        eager_peak_bytes=eager_memory.peak_bytes,
        srbench_peak_bytes=srbench_memory.peak_bytes,
        srbench_slab_bytes=static.prepared.slab_bytes,
        eager_faults=page_faults_per_run(runners["eager"]),
        srbench_faults=page_faults_per_run(runners["srbench"]),
        static_runtime_note=note,
    )


def builtin_models() -> list[str]:
    from srbench.zoo import load_zoo

    return [case.name for case in load_zoo().select(providers=["builtin"])]


def _format(value: float | None, pattern: str) -> str:
    return "n/a" if value is None else format(value, pattern)


def table(rows: Sequence[LatencyRow]) -> str:
    header = (
        "model",
        "eager µs",
        "srbench µs",
        "C++ SR µs",
        "srbench/eager",
        "C++ SR/eager",
        "srbench/C++ SR",
        "eager peak KiB",
        "srbench peak KiB",
        "slab KiB",
        "faults e/s",
    )
    body = [
        (
            row.model,
            f"{row.eager_us:.1f}",
            f"{row.srbench_us:.1f}",
            _format(row.static_runtime_us, ".1f"),
            f"{row.srbench_ratio:.2f}x",
            _format(row.static_runtime_ratio, ".2f") + ("x" if row.static_runtime_ratio else ""),
            _format(row.srbench_to_static_runtime, ".2f") + ("x" if row.srbench_to_static_runtime else ""),
            f"{row.eager_peak_bytes / 1024:.0f}",
            f"{row.srbench_peak_bytes / 1024:.0f}",
            f"{row.srbench_slab_bytes / 1024:.0f}",
            f"{row.eager_faults:.0f}/{row.srbench_faults:.0f}",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths)))
        for line in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [
        f"  {row.model}: C++ Static Runtime unavailable ({row.static_runtime_note})"
        for row in rows
        if row.static_runtime_note
    ]
    return "\n".join(lines + notes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", help="zoo model names (default: every built-in model)")
    parser.add_argument("--repeats", type=int, default=300, help="timed rounds per model (default 300)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    args = parser.parse_args(argv)
    rows = []
    for name in args.models or builtin_models():
        rows.append(measure_model(name, repeats=args.repeats, warmup=args.warmup))
        print(f"measured {name}", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([asdict(row) for row in rows], handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
