"""What a call written in another form than its program's costs on srbench's static runtime.

A ``Linear(4, 4)`` with an optional mask, prepared at ``model(x)``: the mask's program takes it
as ``attention_mask=mask`` (the example's form, the mask by keyword). This script times, in
interleaved rounds in one process and one thread, four runtimes of the module: one called by
keyword (the program's own form), one called positionally ``model(x, mask)`` (moved to the
program's form: by the slow path at every call before the per-form adapters of
``srbench/static/forms.py``), one called both ways in turn, and one called in turn positionally
and with every argument by keyword, neither the program's form (by the slow path at each switch
before each form kept its adapter); it checks each against eager
first, and reports the median microseconds per call. Then it times three calls that 8 layers of
Linear, LayerNorm and GELU do not take, each refused at its first call and at each repeat: a
dict without the key the model reads (captured again at every repeat before capture failures
were cached by signature), float64 inputs on float32 weights (failing after the capture, at the
resolver's run of ``linear``), and a width the first layer cannot take (a capture failure of a
call that differs from the example's in a size only; both prepared again at every repeat before
failures of the signature were cached whatever the difference). Not a timed test: run it as a
script.

    .venv/bin/python benchmarks/call_forms_check.py
    .venv/bin/python benchmarks/call_forms_check.py --rounds 1000

This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any


def measure(rounds: int, calls: int = 50) -> dict[str, float]:
    """Median microseconds per call of each way of calling, ``calls`` calls per sample."""
    import torch

    from srbench.inputs import Inputs
    from srbench.options import StaticOptions
    from srbench.runtimes import intra_op_threads
    from srbench.static import StaticModule

    class Masked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
            h = self.linear(x)
            return h if attention_mask is None else h * attention_mask.unsqueeze(-1)

    torch.manual_seed(0)
    model = Masked().eval()
    x, mask = torch.randn(2, 5, 4), (torch.randn(2, 5) > 0).float()
    with intra_op_threads(1), torch.no_grad():
        module = StaticModule(model, Inputs.of(x), StaticOptions(measure_choices=False), name="masked")
        by_keyword, positional, mixed, others = (module.runtime() for _ in range(4))

        def both() -> Any:
            mixed(x, attention_mask=mask)
            return mixed(x, mask)

        def neither() -> Any:
            others(x=x, attention_mask=mask)
            return others(x, mask)

        ways: dict[str, tuple[Callable[[], Any], int]] = {
            "by keyword (the program's form)": (lambda: by_keyword(x, attention_mask=mask), calls),
            "positionally": (lambda: positional(x, mask), calls),
            "both in turn": (both, calls // 2),
            "positionally and all by keyword in turn": (neither, calls // 2),
        }
        expected = model(x, mask)
        for call, _ in ways.values():
            torch.testing.assert_close(call(), expected)
        samples: dict[str, list[float]] = {label: [] for label in ways}
        order = list(ways.items())
        for round_index in range(rounds):
            shift = round_index % len(order)
            for label, (call, repeats) in order[shift:] + order[:shift]:
                start = time.perf_counter()
                for _ in range(repeats):
                    call()
                samples[label].append((time.perf_counter() - start) / calls * 1e6)
    return {label: statistics.median(values) for label, values in samples.items()}


def refusals(repeats: int) -> dict[str, list[float]]:
    """Milliseconds of the first refusal of each call the model does not take, then of each repeat."""
    import torch

    from srbench.inputs import Inputs
    from srbench.options import StaticOptions
    from srbench.runtimes import intra_op_threads
    from srbench.static import StaticModule

    class Deep(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            block = [torch.nn.Linear(64, 64), torch.nn.LayerNorm(64), torch.nn.GELU()]
            self.layers = torch.nn.Sequential(*[torch.nn.Sequential(*block) for _ in range(8)])

        def forward(self, x: torch.Tensor, pair: dict[str, torch.Tensor]) -> torch.Tensor:
            return self.layers(x) * pair["scale"] + pair["shift"]

    torch.manual_seed(0)
    x, scale = torch.randn(4, 64), torch.randn(64)
    good = Inputs.of(x, {"scale": scale, "shift": scale})
    bad = {
        "a dict without the key the model reads": Inputs.of(x, {"scale": scale, "offset": scale}),
        "float64 where the weights are float32 (fails after the capture)": Inputs.of(
            x.double(), {"scale": scale.double(), "shift": scale.double()}
        ),
        "a width the first layer cannot take": Inputs.of(torch.randn(4, 32), {"scale": scale, "shift": scale}),
    }
    times: dict[str, list[float]] = {label: [] for label in bad}
    with intra_op_threads(1), torch.no_grad():
        runtime = StaticModule(Deep().eval(), good, StaticOptions(measure_choices=False)).runtime()
        for label, call in bad.items():
            for _ in range(repeats + 1):
                start = time.perf_counter()
                try:
                    call.call(runtime)
                except Exception:
                    times[label].append((time.perf_counter() - start) * 1e3)
                else:
                    raise AssertionError(f"{label}: not refused")
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the refused call")
    args = parser.parse_args(argv)
    print("| Linear(4, 4) with a mask, called | µs a call (median) |")
    print("|---|---|")
    for label, median in measure(args.rounds).items():
        print(f"| {label} | {median:.2f} |")
    print()
    for label, (first, *again) in refusals(args.repeats).items():
        print(f"{label}: refused in {first:.1f} ms, then in", ", ".join(f"{ms:.2f}" for ms in again), "ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
