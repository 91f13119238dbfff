"""Trace a model that ``torch.export`` cannot capture as far as it goes, and say where it stops.

A Python branch on a tensor's value (``if x.sum() > 0:``) or a size read from one
(``torch.zeros(int(x.max()))``) cannot be traced on fake tensors: the value is an unbacked symbol
and Python needs a bool or an int. ``torch.export`` then gives nothing. Here the model runs once
more on fake tensors under a dispatch mode that records every ATen op it reaches into a
``torch.fx`` graph (with each result's FakeTensor as ``meta["val"]``, as export's graphs have), up
to the point of failure. The estimate of that graph is the estimate of the model's first part;
the node that produced the data-dependent value, the model's source line that needed it, and the
reason are reported as a :class:`~srbench.estimate.graph.NodeProblem`.

The recorded graph is at dispatch level (composite ops already decomposed: ``conv2d`` appears as
``convolution``), which is what eager runs; its node names are not those of an exported graph.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from srbench.estimate.fake import _device_present, build_fake
from srbench.estimate.graph import NodeProblem
from srbench.graph.capture import model_source_line
from srbench.inputs import Inputs


@dataclass(frozen=True)
class PartialTrace:
    graph: torch.fx.Graph
    user_inputs: frozenset[str]
    problems: tuple[NodeProblem, ...]


class _Recorder(TorchDispatchMode):
    """Appends one graph node per ATen op, with the op's fake result as its metadata."""

    def __init__(self, graph: torch.fx.Graph, nodes: dict[int, torch.fx.Node]):
        super().__init__()
        self.graph = graph
        self.nodes = nodes
        self.keep: list[Any] = []  # ids index ``nodes``: keep every recorded value alive
        self.constants = 0

    def node_of(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        node = self.nodes.get(id(value))
        if node is None:  # a tensor made outside any op we saw (a constant): a placeholder
            node = self.graph.placeholder(f"constant_{self.constants}")
            self.constants += 1
            self.record(node, value)
        return node

    def record(self, node: torch.fx.Node, value: Any) -> None:
        node.meta["val"] = value
        self.keep.append(value)
        if isinstance(value, torch.Tensor):
            self.nodes[id(value)] = node

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        node = self.graph.call_function(func, tree_map(self.node_of, args), tree_map(self.node_of, kwargs))
        self.record(node, result)
        if isinstance(result, (tuple, list)):
            for index, element in enumerate(result):
                if isinstance(element, torch.Tensor):
                    self.record(self.graph.call_function(operator.getitem, (node, index)), element)
        return result


def _producer(graph: torch.fx.Graph, error: BaseException) -> torch.fx.Node | None:
    """The node whose result holds a symbol the failed guard is about (the ``item`` that made it)."""
    condition = getattr(error, "cond", None)
    symbols = {str(s) for s in getattr(condition, "free_symbols", ())}
    for node in graph.nodes:
        value = node.meta.get("val")
        held: set[str] = set()
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            held = {str(s) for s in value.node.expr.free_symbols}
        elif isinstance(value, torch.Tensor):
            held = {str(s) for s in free_unbacked_symbols(value)}
        if held & symbols:
            return node
    return None


def trace_partially(
    build: Callable[[], torch.nn.Module],
    make_inputs: Callable[[], Inputs | tuple],
    device: torch.device,
    *,
    capture_error: str,
) -> PartialTrace:
    """Record the ATen ops the model runs on fake tensors until it fails; see the module docstring.

    A device that is not present is traced on the CPU (Python indexing of a fake CUDA tensor
    fails on a CPU-only build): shapes are the same; strides of device-specific kernels may differ.
    """
    traced_device = device if device.type == "cpu" or _device_present(device) else torch.device("cpu")
    fake = build_fake(build, make_inputs, traced_device)
    graph = torch.fx.Graph()
    nodes: dict[int, torch.fx.Node] = {}
    recorder = _Recorder(graph, nodes)
    names: dict[int, str] = {}
    for name, value in [*fake.module.named_parameters(), *fake.module.named_buffers()]:
        names.setdefault(id(value), name.replace(".", "_"))
    user_inputs = set()
    for index, value in enumerate(fake.inputs.tensors()):
        names.setdefault(id(value), f"input_{index}")
        user_inputs.add(names[id(value)])
    for value in [*fake.module.parameters(), *fake.module.buffers(), *fake.inputs.tensors()]:
        if isinstance(value, torch.Tensor) and id(value) not in nodes:
            recorder.record(graph.placeholder(names[id(value)]), value)
    problem = None
    returned: tuple = ()
    try:
        with fake.mode, recorder, torch.no_grad():
            result = fake.inputs.call(fake.module)
        returned = tuple(recorder.node_of(leaf) for leaf in tree_flatten(result)[0] if isinstance(leaf, torch.Tensor))
    except Exception as error:  # whatever stopped the trace is the finding
        producer = _producer(graph, error)
        last = producer or next((n for n in reversed(graph.nodes) if n.op == "call_function"), None)
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        problem = NodeProblem(
            node=last.name if last is not None else "(before the first op)",
            op=str(last.target) if last is not None else "",
            reason=f"tracing stopped at {model_source_line(error) or 'a line inside torch'}: "
            f"{type(error).__name__}: {reason}; "
            f"what follows is not estimated",
        )
    if problem is None:  # it ran through: whatever stopped torch.export is not about values
        problem = NodeProblem("(model)", "", f"torch.export failed ({capture_error}); traced op by op instead")
    graph.output(returned)
    return PartialTrace(graph, frozenset(user_inputs), (problem,))
