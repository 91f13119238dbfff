"""Observe eager mode: a captured graph run node by node, as eager runs it.

Each node runs as ``torch.fx``'s ``Interpreter`` runs it (the ATen op called as is, on real
tensors, through the same dispatcher and kernels as the model's own Python), inside a
``record_function`` range naming the node, and every value is dropped after its last use, as
eager drops what nothing references any more. So the allocations are eager's, node by node, and
each one is attributed to the node whose op made it. (What this does not show is a model whose
Python keeps references longer than needed: its eager peak can be higher than this run's.)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.profiler import record_function

from srbench.graph import CapturedGraph
from srbench.inputs import Inputs
from srbench.observe.observation import Observation, observe_run
from srbench.observe.record import node_label, record


class _LabelledInterpreter(torch.fx.Interpreter):
    def run_node(self, node: torch.fx.Node) -> Any:
        if node.op in ("placeholder", "output"):
            return super().run_node(node)
        with record_function(node_label(node.name)):
            return super().run_node(node)


def graph_arguments(captured: CapturedGraph, inputs: Inputs | tuple) -> list[Any]:
    """What the captured graph module takes: lifted parameters, buffers and constants, then the
    leaves of the call ``inputs`` (flattened as ``torch.export`` flattened it)."""
    exported = captured.exported
    lifted = []
    for spec in exported.graph_signature.input_specs:
        if spec.kind.name == "USER_INPUT":
            continue
        source = exported.state_dict if spec.target in exported.state_dict else exported.constants
        lifted.append(source[spec.target])
    return [*lifted, *Inputs.coerce(inputs).leaves()]


def observe_eager(
    captured: CapturedGraph, inputs: Inputs | tuple, *, device: str = "cpu", warmup: int = 1
) -> Observation:
    """Run ``captured`` on ``inputs`` node by node ``warmup`` times, then once observed."""
    arguments = graph_arguments(captured, inputs)
    interpreter = _LabelledInterpreter(captured.graph_module)
    with torch.no_grad():
        for _ in range(warmup):
            interpreter.run(*arguments)
        run = record(lambda: interpreter.run(*arguments), device)
    return observe_run(run, runtime="eager", model=captured.name)
