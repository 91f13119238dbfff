"""Move a captured graph's metadata to another device without running anything there.

When ``torch.export`` cannot trace a model on a fake device (on a CPU-only build, Python indexing
of a fake CUDA tensor needs the CUDA device guard; see :mod:`srbench.estimate.fake`), the graph is
captured on fake CPU tensors and propagated here: a copy of the graph whose burnt-in devices
(``device=`` keywords of factory ops, ``aten.to.device``) name the target, run node by node on
fake tensors of the target device by ``torch.fx``'s ``FakeTensorProp``. Every node's
``meta["val"]`` then holds what the target device's meta kernels give: the same shapes, and that
device's strides and extra outputs where its kernels differ. What this cannot see are branches of
the model's own Python that depend on the device (``if x.is_cuda:``): the CPU branch was traced.
(``torch.export.passes.move_to_device_pass`` does the rewriting but calls ``.to(device)`` on every
value, which a CPU-only build cannot do for CUDA.)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.node import map_aggregate
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from srbench.estimate.fake import fake_like
from srbench.graph import CapturedGraph


def _on(device: torch.device) -> Any:
    def move(value: Any) -> Any:
        if isinstance(value, torch.device) and value.type == "cpu":
            return device
        return value

    return move


def retarget(captured: CapturedGraph, device: torch.device, mode: FakeTensorMode) -> CapturedGraph:
    """A copy of ``captured`` whose graph computes on ``device`` and whose metadata says so;
    ``mode`` is the fake mode the graph was captured under. The original is left unchanged."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(captured.graph, {})
    graph.output(output)
    move = _on(device)
    for node in graph.nodes:
        node.args = map_aggregate(node.args, move)
        node.kwargs = map_aggregate(node.kwargs, move)
    module = torch.fx.GraphModule(captured.graph_module, graph)
    with mode:
        placeholders = [
            fake_like(node.meta["val"], device)
            if isinstance(node.meta.get("val"), torch.Tensor)
            else node.meta.get("val")
            for node in graph.nodes
            if node.op == "placeholder"
        ]
    with torch.no_grad():
        FakeTensorProp(module, mode).propagate_dont_convert_inputs(*placeholders)
    return dataclasses.replace(captured, graph_module=module)
