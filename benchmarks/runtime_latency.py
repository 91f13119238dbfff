"""Latency and memory of every runtime side by side, one table per model (batch 1, one thread
unless asked): eager, srbench's static runtime, PyTorch's C++ Static Runtime, TorchScript,
torch.compile and ONNX Runtime.

Not a timed test: run it as a script and read the tables.

    .venv/bin/python benchmarks/runtime_latency.py            # every built-in model, dlrm also at batch 32
    .venv/bin/python benchmarks/runtime_latency.py --models mlp dlrm@32 --repeats 500 --json out.json
    .venv/bin/python benchmarks/runtime_latency.py --runtimes eager srbench static_runtime
    .venv/bin/python benchmarks/runtime_latency.py --models dlrm dlrm@32 deep_and_wide mlp \
        --runtimes eager srbench static_runtime --repeats 2000 --clock cpu   # overhead, on a shared machine
    .venv/bin/python benchmarks/runtime_latency.py --models bert_encoder dlrm \
        --runtimes eager srbench srbench_unserved static_runtime --clock cpu   # fallbacks served or not

Every runtime is prepared through its plugin (``srbench.runtimes``); one that cannot take the
model (or cannot work on this machine: torch.compile without a C++ compiler, ONNX Runtime without
the ``onnx`` extra) gets a line with the reason instead of a row. All runtimes of a model are
timed in interleaved rounds (one call of each per round, in rotating order) so that load from
other processes hits them alike; the figure is the median over rounds, and ratios to eager (and to
the C++ Static Runtime, where it ran) are taken from the same rounds. ``--clock cpu`` times each
call by the CPU time of the calling thread (``time.thread_time``) instead of the wall clock: on a
shared machine a call that loses its core to another process is not charged for the wait (the
kernels here run on the calling thread: one intra-op thread). Each table notes the load average
before and after its timing. Per runtime, after timing:

* **peak**: the most bytes one call holds, counted from torch's allocator by ``torch.profiler``
  (``profile_memory=True``) from zero at the call's start, outputs included, plus memory the
  runtime holds across calls for its activations (srbench's slab when it is kept between runs).
  ONNX Runtime allocates through its own arena, which the profiler does not see: "n/a".
* **allocs**: allocations of torch's allocator during one call.
* **faults**: minor page faults per call (``resource.getrusage``), the cost of giving memory back
  to the OS and taking it again.
* **managed**: for srbench, the share of the bytes of the graph's intermediate results (counted per op
  result) its plan writes into the slab or into an output's bytes (hosted intermediates,
  ``srbench.memory.hosting``: planned by srbench like the slab's).

Each runtime's outputs are checked against eager's under the model's tolerance (looser for the
runtimes that fold batch norm, as in ``suites/full.yaml``); a mismatch is reported under the table.

This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from srbench.formatting import error_summary

RUNTIMES = ("eager", "srbench", "static_runtime", "torchscript", "compile", "onnxruntime")
# Variants of a runtime plugin under other options, measured beside it when asked for by name:
# srbench with fallback results allocated by their ops (issue 10's figures before the slab served
# them), for the cost and the gain of serving side by side.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {"srbench_unserved": ("srbench", {"serve_fallbacks": False})}
LABELS = {
    "eager": "eager",
    "srbench": "srbench",
    "srbench_unserved": "srbench, fallbacks unserved",
    "static_runtime": "C++ Static Runtime",
    "torchscript": "TorchScript",
    "compile": "torch.compile",
    "onnxruntime": "ONNX Runtime",
}
# Runtimes whose graph optimisers fold batch norm into convolutions (see suites/full.yaml).
_FOLDING = ("static_runtime", "torchscript", "onnxruntime", "compile")
_FOLDED_ATOL = 1e-3


@dataclass(frozen=True)
class RuntimeRow:
    runtime: str
    median_us: float
    ratio_to_eager: float
    peak_bytes: int | None
    allocations: int | None
    page_faults: float
    managed_share: float | None = None  # srbench: the share of intermediate results' bytes it plans
    slab_bytes: int | None = None
    matches_eager: bool = True


@dataclass(frozen=True)
class ModelTable:
    model: str
    batch: int
    rows: tuple[RuntimeRow, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    timing: str = ""  # the clock, the rounds and the machine's load average around them

    def row(self, runtime: str) -> RuntimeRow | None:
        return next((row for row in self.rows if row.runtime == runtime), None)


def _prepare(names: Sequence[str], model: Any, inputs: Any, threads: int) -> tuple[dict[str, Any], list[str]]:
    from srbench.graph import CaptureError
    from srbench.runtimes import RuntimeOptions, UnsupportedRuntime, get_runtime

    prepared, notes = {}, []
    for name in names:
        plugin, options = VARIANTS.get(name, (name, {}))
        try:
            prepared[name] = get_runtime(plugin)(model, inputs, RuntimeOptions(threads=threads, **options))
        except (UnsupportedRuntime, CaptureError, RuntimeError) as error:
            notes.append(f"{LABELS[name]} unavailable: {error_summary(error)[:200]}")
    return prepared, notes


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _interleaved_medians(
    runners: dict[str, Callable[[], Any]], repeats: int, warmup: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    for run in runners.values():
        for _ in range(warmup):
            run()
    samples: dict[str, list[float]] = {name: [] for name in runners}
    order = list(runners)
    for round_ in range(repeats):
        shift = round_ % len(order)
        for name in order[shift:] + order[:shift]:
            run = runners[name]
            start = clock()
            run()
            samples[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def _matches(got: Any, want: Any, rtol: float, atol: float) -> bool:
    import torch
    from torch.utils import _pytree as pytree

    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    if got_spec != want_spec:
        return False
    return all(
        torch.allclose(g, w, rtol=rtol, atol=atol) if isinstance(w, torch.Tensor) else g == w
        for g, w in zip(got_leaves, want_leaves)
    )


def _held_bytes(runtime: Any) -> int:
    """Activation memory a runtime holds between calls, outside what one call allocates."""
    inner = getattr(runtime, "runtime", None)
    return int(getattr(inner, "slab_bytes", 0) or 0)


def _srbench_plan(runtime: Any) -> tuple[float | None, int | None]:
    prepared = getattr(getattr(runtime, "module", None), "prepared", None)
    if prepared is None:
        return None, None
    return prepared.managed_share, prepared.slab_bytes


def measure_model(
    name: str,
    *,
    batch: int | None = None,
    runtimes: Sequence[str] = RUNTIMES,
    repeats: int = 300,
    warmup: int = 20,
    threads: int = 1,
    clock: str = "wall",
) -> ModelTable:
    """One model's table; see the module docstring (``clock``: a key of :data:`CLOCKS`)."""
    import torch

    from srbench.measure.memory import observe_allocations, page_faults_per_run
    from srbench.zoo import load_zoo

    torch.set_num_threads(threads)
    case = load_zoo().get(name)
    model = case.model()
    inputs = case.example_inputs(0, batch=batch if batch is not None else 1)
    with torch.inference_mode():
        expected = inputs.call(model)
    prepared, notes = _prepare(runtimes, model, inputs, threads)
    runners: dict[str, Callable[[], Any]] = {
        runtime: functools.partial(inputs.call, runner) for runtime, runner in prepared.items()
    }
    load_before = os.getloadavg()[0]
    medians = _interleaved_medians(runners, repeats, warmup, CLOCKS[clock])
    timing = (
        f"{clock} clock, {repeats} rounds, load average {load_before:.2f} before and {os.getloadavg()[0]:.2f} after"
    )
    eager = medians.get("eager")
    rows = []
    for runtime, run in runners.items():
        atol = max(case.atol, _FOLDED_ATOL) if runtime in _FOLDING and case.family == "vision" else case.atol
        matches = _matches(run(), expected, case.rtol, atol)
        if not matches:
            notes.append(f"{LABELS[runtime]}: outputs differ from eager's beyond rtol={case.rtol}, atol={atol}")
        observable = runtime != "onnxruntime"
        observed = observe_allocations(run) if observable else None
        planned = runtime == "srbench" or VARIANTS.get(runtime, ("",))[0] == "srbench"
        share, slab = _srbench_plan(prepared[runtime]) if planned else (None, None)
        rows.append(
            RuntimeRow(
                runtime=runtime,
                median_us=medians[runtime] * 1e6,
                ratio_to_eager=medians[runtime] / eager if eager else float("nan"),
                peak_bytes=observed.peak_bytes + _held_bytes(prepared[runtime]) if observed else None,
                allocations=observed.allocations if observed else None,
                page_faults=page_faults_per_run(run),
                managed_share=share,
                slab_bytes=slab,
                matches_eager=matches,
            )
        )
    tensors = inputs.tensors()
    batch_size = tensors[0].shape[0] if tensors else 1
    return ModelTable(model=name, batch=batch_size, rows=tuple(rows), notes=tuple(notes), timing=timing)


def builtin_models() -> list[str]:
    from srbench.zoo import load_zoo

    return [case.name for case in load_zoo().select(providers=["builtin"])]


def _kib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 1024:,.0f}"


def table(result: ModelTable) -> str:
    """One model's results as a Markdown table, the notes under it."""
    eager = result.row("eager")
    reference = result.row("static_runtime")
    header = ["runtime", "median µs", "/ eager", "/ C++ SR", "peak KiB", "/ eager peak", "allocs", "faults", "managed"]
    lines = [f"#### {result.model} (batch {result.batch})", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    for row in result.rows:
        peak_ratio = (
            f"{row.peak_bytes / eager.peak_bytes:.2f}x"
            if row.peak_bytes is not None and eager is not None and eager.peak_bytes
            else "n/a"
        )
        cells = [
            LABELS[row.runtime],
            f"{row.median_us:,.1f}",
            f"{row.ratio_to_eager:.2f}x",
            f"{row.median_us / reference.median_us:.3f}x" if reference is not None and reference.median_us else "",
            _kib(row.peak_bytes),
            peak_ratio,
            "n/a" if row.allocations is None else str(row.allocations),
            f"{row.page_faults:.0f}",
            "" if row.managed_share is None else f"{100 * row.managed_share:.0f}%",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [f"- {note}" for note in (*result.notes, result.timing) if note]
    return "\n".join(lines)


def _model_spec(text: str) -> tuple[str, int | None]:
    name, _, batch = text.partition("@")
    if batch and (not batch.isdigit() or int(batch) < 1):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAME@BATCH with a positive batch")
    return name, int(batch) if batch else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--models", nargs="*", type=_model_spec, help="NAME or NAME@BATCH (default: every built-in model, and dlrm@32)"
    )
    parser.add_argument("--runtimes", nargs="*", choices=[*RUNTIMES, *VARIANTS], default=list(RUNTIMES))
    parser.add_argument("--repeats", type=int, default=300, help="timed rounds per model (default 300)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--clock", choices=sorted(CLOCKS), default="wall", help="what a call is timed by (default wall)"
    )
    parser.add_argument("--json", metavar="PATH", help="also write the tables as JSON to PATH")
    args = parser.parse_args(argv)
    runtimes = ["eager", *[r for r in args.runtimes if r != "eager"]]
    models = args.models or [*((name, None) for name in builtin_models()), ("dlrm", 32)]
    results = []
    for name, batch in models:
        result = measure_model(
            name,
            batch=batch,
            runtimes=runtimes,
            repeats=args.repeats,
            warmup=args.warmup,
            threads=args.threads,
            clock=args.clock,
        )
        results.append(result)
        print(table(result) + "\n", flush=True)
    if args.json:
        from srbench.fileio import atomic_write_text

        atomic_write_text(args.json, json.dumps([asdict(result) for result in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
