"""What the one-call-at-a-time check of srbench's static runtime costs on an overhead-bound model.

Every call of a :class:`~srbench.static.StaticRuntime` takes the runtime's call token (an atomic
``list.pop``) and gives it back after (a second thread gets ``ConcurrentUseError`` instead of
sharing the slab). This script times one runtime's program two ways in interleaved rounds in one
process: as it runs, and compiled from the same source minus the token's lines, in the same
globals, and reports the medians and their ratio. Not a timed test: run it as a script.

    .venv/bin/python benchmarks/runtime_call_check.py                   # MLPs of width 32 and 512, batch 1
    .venv/bin/python benchmarks/runtime_call_check.py --widths 32 --rounds 20000

This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import statistics
import time
import types
from collections.abc import Callable, Sequence
from typing import Any


def _mlp(width: int) -> Any:
    import torch

    torch.manual_seed(0)
    layers = [torch.nn.Linear(width, width), torch.nn.ReLU()] * 3
    return torch.nn.Sequential(*layers[:-1]).eval()


def _without_claim(source: str, forward: Callable[..., Any]) -> Callable[..., Any]:
    """``forward`` compiled from ``source`` minus the lines that take and give back the call
    token, in the same globals."""
    from srbench.static.codegen import Entry, Hook

    claim = ["try:", f"{Hook.CLAIM}()", "except IndexError:", f"raise {Hook.BUSY}() from None"]
    lines = source.splitlines()
    kept, index = [], 0
    while index < len(lines):
        if [line.strip() for line in lines[index : index + 4]] == claim:
            index += 4
            continue
        if lines[index].strip() != f"{Hook.UNCLAIM}(True)":
            kept.append(lines[index])
        index += 1
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(kept), "<srbench static, no call token>", "exec"), namespace)
    code = namespace[Entry.FORWARD.value].__code__
    return types.FunctionType(code, forward.__globals__, Entry.FORWARD.value)


def measure(width: int, rounds: int, calls: int = 20) -> tuple[float, float]:
    """Median microseconds per call with and without the check, ``calls`` calls per sample."""
    import torch

    from srbench.runtimes import intra_op_threads
    from srbench.static import StaticModule

    with intra_op_threads(1):
        x = torch.randn(1, width)
        module = StaticModule(_mlp(width), (x,))
        checked = module.runtime().bind((x,)).forward
        unchecked = _without_claim(module.prepared.program.source, checked)
        samples: dict[str, list[float]] = {"checked": [], "unchecked": []}
        contenders = [("checked", checked), ("unchecked", unchecked)]
        for round_index in range(rounds):
            for label, forward in contenders[round_index % 2 :] + contenders[: round_index % 2]:
                start = time.perf_counter()
                for _ in range(calls):
                    forward(x)
                samples[label].append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples["checked"]), statistics.median(samples["unchecked"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--rounds", type=int, default=3000)
    args = parser.parse_args(argv)
    print("| MLP (3 layers) | with the check µs | without µs | ratio | check ns per call |")
    print("|---|---|---|---|---|")
    for width in args.widths:
        checked, unchecked = measure(width, args.rounds)
        print(
            f"| width {width} | {checked:.2f} | {unchecked:.2f} | {checked / unchecked:.3f} | "
            f"{(checked - unchecked) * 1e3:.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
