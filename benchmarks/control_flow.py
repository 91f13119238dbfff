"""Control flow under srbench's static runtime: time per call against eager, and the bytes each
sub-block plans.

``torch.cond``, ``torch.while_loop`` and ``torch.map`` run their sub-graphs as sub-blocks, each a
prepared module with its own slab (see ``srbench/static/blocks.py``). This script prepares three
small models with control flow and times, in interleaved rounds in one process (one intra-op
thread): eager (where ``torch.cond`` and friends go through their eager dispatch), the exported
graph module (the higher-order ops called as they are, their sub-graphs run op by op: what srbench
ran before sub-blocks) and srbench. It prints the medians, srbench's ratios to both and the slab
bytes of the outer graph and of every sub-block. Not a timed test: run it as a script.

    .venv/bin/python benchmarks/control_flow.py
    .venv/bin/python benchmarks/control_flow.py --width 512 --rounds 400

This file sits in asv's benchmark directory, so importing it does nothing heavy.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any


def _models(width: int) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """Each model with its example call: a branch between two MLPs, an RNN-like cell iterated
    eight times, and an MLP mapped over the rows of a batch."""
    import torch
    from torch._higher_order_ops.map import map as torch_map

    def mlp() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU()
        )

    class Branches(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.left, self.right = mlp(), mlp()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.mean() > 0, lambda a: self.left(a), lambda a: self.right(a), (x,))

    class Cell(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = torch.nn.Linear(width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            def body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                return i + 1, torch.tanh(self.hidden(h) + x)

            start = torch.zeros((), dtype=torch.int64)
            return torch.while_loop(lambda i, h: i < 8, body, (start, torch.zeros_like(x)))[1]

    class Rows(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mlp = mlp()

        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            mapped: Any = torch_map  # typed for bodies with extra arguments
            return mapped(self.mlp, xs)

    torch.manual_seed(0)
    return {
        "cond": (Branches().eval(), (torch.randn(8, width),)),
        "while_loop": (Cell().eval(), (torch.randn(8, width),)),
        "map": (Rows().eval(), (torch.randn(16, width),)),
    }


def _median_seconds(calls: Mapping[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for round_ in range(rounds):
        for name in names if round_ % 2 else reversed(names):
            start = time.perf_counter()
            calls[name]()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def _exported_graph(model: Any, inputs: tuple[Any, ...]) -> tuple[Any, list[Any]]:
    """The exported graph module and its flat arguments: the higher-order ops called as they are,
    their sub-graphs run op by op (what srbench ran before control flow had sub-blocks)."""
    import torch
    from torch.export.graph_signature import InputKind

    exported = torch.export.export(model, inputs, strict=False)
    user = iter(inputs)
    arguments = [
        next(user) if spec.kind == InputKind.USER_INPUT else exported.state_dict[spec.target]
        for spec in exported.graph_signature.input_specs
    ]
    return exported.graph_module, arguments


def _row(name: str, model: Any, inputs: tuple[Any, ...], rounds: int) -> str:
    """One model's line: eager and srbench medians, their ratio and the slab bytes."""
    import torch

    from srbench.static import StaticModule, StaticOptions
    from srbench.static.blocks import ControlFlowOp

    module = StaticModule(model, inputs, StaticOptions(cleanup_activations=False), name=name)
    runtime = module.runtime()
    torch.testing.assert_close(runtime(*inputs), model(*inputs))
    graph_module, arguments = _exported_graph(model, inputs)
    calls = {
        "eager": partial(model, *inputs),
        "graph": partial(graph_module, *arguments),
        "srbench": partial(runtime, *inputs),
    }
    medians = _median_seconds(calls, rounds)
    ops = [op for op in module.prepared.program.per_runtime.values() if isinstance(op, ControlFlowOp)]
    blocks = ", ".join(
        f"{block.name.rsplit('.', 1)[1]} {block.module.prepared.slab_bytes if block.module else 0}"
        for op in ops
        for block in op.blocks
    )
    eager, graph, static = (medians[name] * 1e6 for name in ("eager", "graph", "srbench"))
    times = f"{eager:>9.1f} {graph:>9.1f} {static:>10.1f} {static / eager:>6.2f} {static / graph:>6.2f}"
    return f"{name:<11} {times}  {module.prepared.slab_bytes}; {blocks}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--width", type=int, default=256, help="feature width of every model (default 256)")
    parser.add_argument("--rounds", type=int, default=200, help="interleaved rounds per model (default 200)")
    options = parser.parse_args(argv)

    import torch

    from srbench.runtimes import intra_op_threads

    header = f"{'eager us':>9} {'graph us':>9} {'srbench us':>10} {'/eager':>6} {'/graph':>6}"
    print(f"{'model':<11} {header}  slab bytes (outer; sub-blocks)")
    with intra_op_threads(1), torch.no_grad():
        for name, (model, inputs) in _models(options.width).items():
            print(_row(name, model, inputs, options.rounds))


if __name__ == "__main__":
    main()
