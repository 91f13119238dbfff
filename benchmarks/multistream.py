"""Independent branches run at once: srbench on 1, 2 and 4 streams against PyTorch's own ways.

Not a timed test: run it as a script and read the tables.

    .venv/bin/python benchmarks/multistream.py                  # the anchors, the GIL line, planned bytes
    .venv/bin/python benchmarks/multistream.py --only anchors --rounds 300
    .venv/bin/python benchmarks/multistream.py --only loops      # each runtime alone in a loop
    .venv/bin/python benchmarks/multistream.py --only bytes --zoo builtin,transformers --json out.json

**Anchors** (issue 11): an 8-tower MLP (towers 256-512-256 on one input, summed) at batch 32 and
at batch 1, and an inception-style block (four convolution branches on a 64x56x56 input). Each
is run by: eager with one intra-op thread (the baseline) and with two; TorchScript with
``torch.jit.fork`` per tower or branch (PyTorch's own inter-op parallelism, what the C++ Static
Runtime offers); a Python thread pool of two over the towers or branches; srbench's static
runtime with 1, 2 and 4 streams (critical-path scheduler, whose schedule is kept only where it
measured faster than one stream at prepare time) and with AITemplate's parallel steps on 2
streams (always kept). All contenders of an anchor are timed in interleaved rounds (one call
each per round, in rotating order) in one process; the figure is the median over rounds, the
speed-up is eager's median over the contender's. Outputs are checked against eager's.

**The GIL line**: ATen kernels release the GIL, their Python dispatch does not. Two independent
chains of ``addmm`` of growing size, on one stream and on two, show from which kernel time on a
second stream pays, and what the serial dispatch leaves of the ideal 2x at each size. For every
anchor, the share of a one-stream run spent dispatching (ops x the dispatch cost measured here)
gives the ceiling the GIL puts on two streams (Amdahl: 1 / (d + (1 - d) / 2)).

**Planned bytes**: for every zoo model, the slab planned for 1, 2 and 4 streams by each
scheduler (:func:`srbench.compare.streams.stream_bytes`, as ``srbench compare --streams 2,4``
shows them), with the streams a schedule really uses and the scheduler's estimated speed-up.

The machine this project runs on has two cores shared by several people: timings are noisy, so
read the ratios (taken side by side in one run), and rerun on a quiet machine for final figures.
This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

SRBENCH_STREAMS = (1, 2, 4)


# -- the anchors ---------------------------------------------------------------------------------


def _towers_model() -> Any:
    import torch

    class Towers(torch.nn.Module):
        """Eight MLP towers (256-512-256) on one input, summed."""

        def __init__(self) -> None:
            super().__init__()
            self.towers = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
                for _ in range(8)
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            total = self.towers[0](x)
            for tower in self.towers[1:]:
                total = total + tower(x)
            return total

    return Towers()


def _inception_model() -> Any:
    import torch
    from torch import nn

    class Inception(nn.Module):
        """Four branches on a 64-channel map, concatenated: 1x1; 1x1 then 3x3; 1x1 then 5x5;
        3x3 max pool then 1x1 (GoogLeNet's block)."""

        def __init__(self) -> None:
            super().__init__()
            self.branches = nn.ModuleList(
                [
                    nn.Conv2d(64, 64, 1),
                    nn.Sequential(nn.Conv2d(64, 64, 1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)),
                    nn.Sequential(nn.Conv2d(64, 32, 1), nn.ReLU(), nn.Conv2d(32, 32, 5, padding=2)),
                    nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(64, 32, 1)),
                ]
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([branch(x) for branch in self.branches], 1)

    return Inception()


def _forked(model: Any, combine: str) -> Any:
    """``model``'s branches forked with ``torch.jit.fork`` and scripted: one task per branch on
    PyTorch's inter-op thread pool."""
    import torch

    class Forked(torch.nn.Module):
        def __init__(self, branches: torch.nn.ModuleList):
            super().__init__()
            self.branches = branches

        def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
            futures = [torch.jit.fork(branch, x) for branch in self.branches]
            return [torch.jit.wait(future) for future in futures]

    branches = model.towers if hasattr(model, "towers") else model.branches
    scripted = torch.jit.script(Forked(branches).eval())
    if combine == "sum":
        return lambda x: torch.stack(scripted(x)).sum(0)
    return lambda x: torch.cat(scripted(x), 1)


def _thread_pool(model: Any, combine: str, workers: int = 2) -> Callable[[Any], Any]:
    import torch

    # each worker takes this thread's intra-op count: a new thread's OpenMP count is the machine's
    threads = torch.get_num_threads()
    pool = ThreadPoolExecutor(max_workers=workers, initializer=torch.set_num_threads, initargs=(threads,))
    branches = list(model.towers if hasattr(model, "towers") else model.branches)

    def run(x: Any) -> Any:
        results = [future.result() for future in [pool.submit(_no_grad_call, branch, x) for branch in branches]]
        return torch.stack(results).sum(0) if combine == "sum" else torch.cat(results, 1)

    return run


def _no_grad_call(module: Any, x: Any) -> Any:
    import torch

    with torch.inference_mode():  # grad mode is per thread
        return module(x)


@dataclass(frozen=True)
class Anchor:
    name: str
    build: Callable[[], Any]
    shape: tuple[int, ...]
    combine: str  # how branch results are combined by the fork and thread-pool contenders


ANCHORS = (
    Anchor("towers, batch 32", _towers_model, (32, 256), "sum"),
    Anchor("towers, batch 1", _towers_model, (1, 256), "sum"),
    Anchor("inception block", _inception_model, (1, 64, 56, 56), "cat"),
)


@dataclass(frozen=True)
class Contender:
    name: str
    run: Callable[[], Any]
    threads: int = 1  # intra-op threads while it runs


@dataclass(frozen=True)
class AnchorRow:
    anchor: str
    contender: str
    median_us: float
    speedup: float  # eager 1 thread / this
    streams_used: int | None  # srbench: the streams its program runs on
    slab_bytes: int | None
    matches_eager: bool


def _contenders(anchor: Anchor, device: str) -> tuple[list[Contender], dict[str, Any], Any]:
    import torch

    from srbench.static import StaticModule, StaticOptions

    torch.manual_seed(0)
    model = anchor.build().eval().to(device)
    x = torch.randn(anchor.shape, device=device)
    runtimes = {}
    for streams, scheduler in [(s, "critical_path") for s in SRBENCH_STREAMS] + [(2, "parallel_steps")]:
        label = f"srbench, {streams} stream{'s' if streams > 1 else ''}" + (
            " (parallel steps)" if scheduler == "parallel_steps" else ""
        )
        module = StaticModule(model, (x,), StaticOptions(streams=streams, scheduler=scheduler))
        runtimes[label] = module
    forked, pool = _forked(model, anchor.combine), _thread_pool(model, anchor.combine)

    def eager() -> Any:
        with torch.inference_mode():
            return model(x)

    def fork() -> Any:
        with torch.inference_mode():
            return forked(x)

    contenders = [
        Contender("eager, 1 thread", eager),
        # On CUDA the intra-op threads of the host do not run the kernels: the contender says nothing.
        *([Contender("eager, 2 intra-op threads", eager, threads=2)] if device == "cpu" else []),
        Contender("TorchScript fork per branch", fork),
        Contender("Python thread pool of 2", lambda: pool(x)),
    ]
    for label, module in runtimes.items():
        contenders.append(Contender(label, functools.partial(module.runtime(), x)))
    return contenders, runtimes, eager()


def interleaved(
    contenders: Sequence[Contender], rounds: int, warmup: int = 5, device: str = "cpu"
) -> dict[str, list[float]]:
    """Seconds per call of each contender, one call each per round in rotating order; on a CUDA
    ``device`` each call is timed from an idle device to the end of its kernels."""
    import torch

    from srbench.static.timing import device_barrier

    barrier = device_barrier(torch.device(device))
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    for round_ in range(-warmup, rounds):
        shift = round_ % len(contenders)
        for contender in [*contenders[shift:], *contenders[:shift]]:
            torch.set_num_threads(contender.threads)
            barrier()
            start = time.perf_counter()
            contender.run()
            barrier()
            elapsed = time.perf_counter() - start
            if round_ >= 0:
                samples[contender.name].append(elapsed)
    torch.set_num_threads(1)
    return samples


def measure_anchor(anchor: Anchor, rounds: int, device: str = "cpu") -> list[AnchorRow]:
    """Every contender's median and speed-up over eager with one thread, from interleaved rounds.

    A contender with several intra-op threads runs in rounds of its own beside eager: OpenMP's
    idle threads spin for a while after each parallel region (libgomp's default wait policy), so
    in the same rounds the contender after it found its second core taken. Measured on the
    project's 2-core machine, all in one round: srbench's two streams on the batch-32 towers ran
    1.16x eager with the default policy and 1.90x with ``OMP_WAIT_POLICY=PASSIVE`` (one stream
    1.10-1.11x either way), TorchScript's fork 1.06x against 1.87-2.18x in a loop of its own."""
    import torch

    contenders, modules, expected = _contenders(anchor, device)
    reference = contenders[0]
    spinning = [contender for contender in contenders if contender.threads > 1]
    groups = [[c for c in contenders if c not in spinning], *([reference, c] for c in spinning)]
    medians: dict[str, float] = {}
    speedups: dict[str, float] = {}
    for group in groups:
        samples = interleaved(group, rounds, device=device)
        base = statistics.median(samples[reference.name])
        for contender in group:
            if contender is not reference or reference.name not in medians:
                medians[contender.name] = statistics.median(samples[contender.name])
                speedups[contender.name] = base / medians[contender.name]
    rows = []
    for contender in contenders:
        median = medians[contender.name]
        module = modules.get(contender.name)
        output = contender.run()
        rows.append(
            AnchorRow(
                anchor.name,
                contender.name,
                median * 1e6,
                speedups[contender.name],
                module.prepared.streams_used if module else None,
                module.prepared.slab_bytes if module else None,
                bool(torch.allclose(output, expected, rtol=1e-4, atol=1e-4)),
            )
        )
    return rows


# -- isolated loops ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoopRow:
    anchor: str
    eager_us: float
    fork_us: float
    one_stream_us: float
    two_streams_us: float
    streams_kept: int

    @property
    def gain(self) -> float:
        """Two streams over one, the same way a user's loop of one runtime sees it."""
        return self.one_stream_us / self.two_streams_us


def isolated_loops(anchor: Anchor, calls: int = 300, repetitions: int = 3) -> list[LoopRow]:
    """Eager, TorchScript's fork, srbench on one stream and on two, each run alone in a loop of ``calls`` (after 30
    warm-up calls), medians per repetition: what a loop of one runtime sees, without the other
    contenders running between two calls as in :func:`interleaved`."""
    import torch

    from srbench.static import StaticModule, StaticOptions

    torch.manual_seed(0)
    model = anchor.build().eval()
    x = torch.randn(anchor.shape)
    one = StaticModule(model, (x,), StaticOptions()).runtime()
    two_module = StaticModule(model, (x,), StaticOptions(streams=2, scheduler="critical_path"))
    two = two_module.runtime()
    forked = _forked(model, anchor.combine)

    def fork() -> Any:
        with torch.inference_mode():
            return forked(x)

    runs = (functools.partial(_no_grad_call, model, x), fork, functools.partial(one, x), functools.partial(two, x))
    rows = []
    for _ in range(repetitions):
        medians = []
        for run in runs:
            for _ in range(30):
                run()
            seconds = []
            for _ in range(calls):
                start = time.perf_counter()
                run()
                seconds.append(time.perf_counter() - start)
            medians.append(statistics.median(seconds) * 1e6)
        eager_us, fork_us, one_us, two_us = medians
        rows.append(LoopRow(anchor.name, eager_us, fork_us, one_us, two_us, two_module.prepared.streams_used))
    return rows


def loop_table(rows: Sequence[LoopRow]) -> str:
    from srbench.formatting import aligned_table

    body = [
        (
            r.anchor,
            f"{r.eager_us:,.0f}",
            f"{r.fork_us:,.0f}",
            f"{r.one_stream_us:,.0f}",
            f"{r.two_streams_us:,.0f}",
            str(r.streams_kept),
            f"{r.gain:.2f}x",
            f"{r.eager_us / r.two_streams_us:.2f}x",
            f"{r.fork_us / r.two_streams_us:.2f}x",
        )
        for r in rows
    ]
    headers = (
        "anchor",
        "eager us",
        "fork us",
        "1 stream us",
        "2 streams us",
        "kept",
        "2 / 1 stream",
        "2 streams / eager",
        "2 streams / fork",
    )
    return aligned_table(headers, body)


# -- the GIL line --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineRow:
    rows: int  # of the addmm operands: [rows, 256] @ [256, 256]
    kernel_us: float  # one addmm, one thread, in a chain
    threads_speedup: float  # two Python threads, one chain each, against both chains in one thread
    srbench_speedup: float  # srbench on 2 streams against 1, the two chains as two branches
    srbench_streams: int


def _two_chains(rows: int, depth: int = 8) -> Any:
    import torch

    class TwoChains(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.left = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(depth)])
            self.right = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(depth)])

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return self.left(x), self.right(x)

    return TwoChains().eval(), torch.randn(rows, 256)


def _line_row(rows: int, rounds: int) -> LineRow:
    import torch

    from srbench.static import StaticModule, StaticOptions

    torch.manual_seed(0)
    model, x = _two_chains(rows)
    one = StaticModule(model, (x,), StaticOptions()).runtime()
    two_module = StaticModule(model, (x,), StaticOptions(streams=2, scheduler="parallel_steps"))
    two = two_module.runtime()
    chains = [model.left, model.right]
    barrier = threading.Barrier(2)

    threads = torch.get_num_threads()

    def chain(module: Any) -> None:
        torch.set_num_threads(threads)  # a new thread's OpenMP count is the machine's
        barrier.wait()
        _no_grad_call(module, x)

    def serial() -> None:
        for module in chains:
            _no_grad_call(module, x)

    def threaded() -> None:
        workers = [threading.Thread(target=chain, args=(module,)) for module in chains]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    samples = interleaved(
        [
            Contender("one chain", lambda: _no_grad_call(model.left, x)),
            Contender("serial", serial),
            Contender("threads", threaded),
            Contender("srbench 1", lambda: one(x)),
            Contender("srbench 2", lambda: two(x)),
        ],
        rounds,
    )
    median = {name: statistics.median(values) for name, values in samples.items()}
    return LineRow(
        rows,
        median["one chain"] / 8 * 1e6,
        median["serial"] / median["threads"],
        median["srbench 1"] / median["srbench 2"],
        two_module.prepared.streams_used,
    )


def gil_line(rounds: int, sizes: Sequence[int] = (1, 4, 16, 64, 256, 1024)) -> list[LineRow]:
    """Per operand size: one addmm's time, and the speed-up of two chains run side by side."""
    return [_line_row(rows, rounds) for rows in sizes]


def dispatch_seconds() -> float:
    """The cost of calling one op of generated code: a tiny ``add`` with ``out=`` (best of many)."""
    import torch

    a, out = torch.randn(4), torch.empty(4)
    best = float("inf")
    for _ in range(50):
        start = time.perf_counter()
        for _ in range(200):
            torch.add(a, 1, out=out)
        best = min(best, (time.perf_counter() - start) / 200)
    return best


def gil_ceiling(rows: Sequence[AnchorRow], ops: dict[str, int], dispatch: float) -> dict[str, tuple[float, float]]:
    """Per anchor: the share of a one-stream srbench run spent dispatching, and the speed-up two
    streams can reach at most with that share serial (Amdahl)."""
    ceilings = {}
    for anchor, count in ops.items():
        one = next(r for r in rows if r.anchor == anchor and r.contender == "srbench, 1 stream")
        share = min(1.0, count * dispatch / (one.median_us * 1e-6))
        ceilings[anchor] = (share, 1 / (share + (1 - share) / 2))
    return ceilings


# -- tables --------------------------------------------------------------------------------------


def _bytes(value: int | None) -> str:
    from srbench.formatting import format_bytes

    return "" if value is None else format_bytes(value)


def anchor_table(rows: Sequence[AnchorRow], ceilings: dict[str, tuple[float, float]]) -> str:
    from srbench.formatting import aligned_table

    lines = []
    for anchor in dict.fromkeys(row.anchor for row in rows):
        if anchor in ceilings:
            share, ceiling = ceilings[anchor]
            lines.append(
                f"{anchor}: dispatch {share:.0%} of a one-stream run: two streams reach {ceiling:.2f}x at most"
            )
        else:
            lines.append(f"{anchor}:")
        body = [
            (
                row.contender,
                f"{row.median_us:,.0f}",
                f"{row.speedup:.2f}x",
                "" if row.streams_used is None else str(row.streams_used),
                _bytes(row.slab_bytes),
                "yes" if row.matches_eager else "NO",
            )
            for row in rows
            if row.anchor == anchor
        ]
        lines.append(aligned_table(("contender", "median us", "speed-up", "streams", "slab", "= eager"), body))
        lines.append("")
    return "\n".join(lines)


def line_table(rows: Sequence[LineRow]) -> str:
    from srbench.formatting import aligned_table

    body = [
        (
            str(r.rows),
            f"{r.kernel_us:,.1f}",
            f"{r.threads_speedup:.2f}x",
            f"{r.srbench_speedup:.2f}x",
            str(r.srbench_streams),
        )
        for r in rows
    ]
    return aligned_table(("rows", "addmm us", "2 threads / 1", "srbench 2 / 1 streams", "streams"), body)


def bytes_table(rows: Sequence[Any]) -> str:
    from srbench.compare.streams import streams_table

    return streams_table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["anchors", "loops", "line", "bytes"], action="append", help="parts to run")
    parser.add_argument("--rounds", type=int, default=200, help="interleaved rounds per anchor (default 200)")
    parser.add_argument("--line-rounds", type=int, default=50, help="rounds per size of the GIL line (default 50)")
    parser.add_argument("--zoo", default="builtin", help="model providers for the planned bytes (default builtin)")
    parser.add_argument("--planner", default="greedy_by_size", help="planner of the planned bytes")
    parser.add_argument("--json", help="also write every figure to this JSON file")
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the anchors run (default cpu); on cuda srbench's streams are CUDA streams, calls are "
        "timed to the end of their kernels, and the GIL ceiling (a CPU figure) is left out",
    )
    args = parser.parse_args(argv)
    parts = set(args.only or ["anchors", "loops", "line", "bytes"])

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda needs a CUDA GPU; torch.cuda.is_available() is False here")
    torch.set_num_threads(1)
    report: dict[str, Any] = {"torch": torch.__version__}
    if "anchors" in parts:
        rows: list[AnchorRow] = []
        ops = {}
        for anchor in ANCHORS:
            rows += measure_anchor(anchor, args.rounds, args.device)
            ops[anchor.name] = _ops_run(anchor)
        report["device"] = args.device
        if args.device == "cpu":
            dispatch = dispatch_seconds()
            ceilings = gil_ceiling(rows, ops, dispatch)
            print(
                f"anchors: medians of {args.rounds} interleaved rounds (contenders with several intra-op threads "
                f"in rounds of their own beside eager); one op dispatched in {dispatch * 1e6:.1f} us"
            )
            report["gil"] = {"dispatch_seconds": dispatch, "ceilings": ceilings}
        else:
            device_name = torch.cuda.get_device_name()
            ceilings = {}
            print(f"anchors on {device_name}: medians of {args.rounds} interleaved rounds, each timed to its end")
            report["device_name"] = device_name
        print("\n" + anchor_table(rows, ceilings))
        report["anchors"] = [asdict(row) for row in rows]
    if "loops" in parts:
        loops = [row for anchor in ANCHORS for row in isolated_loops(anchor)]
        print("isolated loops: 300 calls of one runtime at a time, medians, three repetitions\n")
        print(loop_table(loops) + "\n")
        report["loops"] = [asdict(row) for row in loops]
    if "line" in parts:
        line = gil_line(args.line_rounds)
        print("the GIL line: two chains of 8 addmm [rows, 256] x [256, 256], medians\n")
        print(line_table(line) + "\n")
        report["line"] = [asdict(row) for row in line]
    if "bytes" in parts:
        from srbench.compare.streams import stream_bytes_of_models
        from srbench.zoo import load_zoo

        names = [case.name for case in load_zoo().select(providers=args.zoo.split(","))]
        found, failures = stream_bytes_of_models(names, [args.planner], SRBENCH_STREAMS)
        print(f"planned bytes ({args.planner}) with 1, 2 and 4 streams\n")
        print(bytes_table(found))
        for failure in failures:
            print(f"  {failure}")
        report["bytes"] = [asdict(row) for row in found]
    if args.json:
        from srbench.fileio import atomic_write_text

        atomic_write_text(args.json, json.dumps(report, indent=1) + "\n")
    return 0


def _ops_run(anchor: Anchor) -> int:
    """Ops a one-stream srbench run of the anchor dispatches."""
    import torch

    from srbench.static import StaticModule

    module = StaticModule(anchor.build().eval(), (torch.randn(anchor.shape),))
    return len(module.prepared.program.timed)


if __name__ == "__main__":
    sys.exit(main())
