"""Typed access to the parts of ``torch.fx`` nodes that srbench reads.

``node.args`` holds any fx ``Argument``; the few shapes srbench relies on (a ``getitem`` of a
multi-output op, an ATen op's schema) are checked here once, so a graph that breaks them fails
with the node's name instead of an ``AttributeError`` deep in the runtime.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
import torch.fx


def getitem_parts(node: torch.fx.Node) -> tuple[torch.fx.Node, int]:
    """The node a ``getitem`` reads and the index it takes."""
    parent, index = node.args
    if node.target is not operator.getitem or not isinstance(parent, torch.fx.Node) or not isinstance(index, int):
        raise TypeError(f"node {node.name!r} is not a getitem of a node by index: {node.format_node()}")
    return parent, index


def op_schema(node: torch.fx.Node) -> torch.FunctionSchema:
    """The schema of the ATen op a node calls."""
    if not isinstance(node.target, torch._ops.OpOverload):
        raise TypeError(f"node {node.name!r} does not call an ATen op: {node.format_node()}")
    return node.target._schema


# Ops whose schema marks no argument written, though they update running statistics in place
# when their flag says so (``training``, ``use_input_stats``): op -> (the flag's index, the
# written arguments' indices). A model left in training mode keeps them in its export graph, and
# a model may call the native op itself (``torch.native_batch_norm``: the OpInfo sweep found its
# statistics, passed as inputs, written by the prepare-time probe of a second program).
_aten = torch.ops.aten
_UNMARKED_WRITES: dict[torch._ops.OpOverload, tuple[int, tuple[int, ...]]] = {
    op: (5, (3, 4))
    for op in (
        _aten.batch_norm.default,
        _aten.instance_norm.default,
        _aten._batch_norm_impl_index.default,
        _aten.native_batch_norm.default,
        _aten.native_batch_norm.out,
        _aten.cudnn_batch_norm.default,
        _aten.miopen_batch_norm.default,
    )
}


def written_arguments(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The argument nodes an ATen op writes in place, per its schema (``Tensor(a!)``), lists of
    tensors included, and the running statistics a batch or instance norm updates while training
    (:data:`_UNMARKED_WRITES`); none for a node that does not call an ATen op."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return []
    unmarked = _UNMARKED_WRITES.get(target)
    if unmarked is not None and len(node.args) > unmarked[0] and node.args[unmarked[0]] is True:
        return [arg for arg in (node.args[index] for index in unmarked[1]) if isinstance(arg, torch.fx.Node)]
    written: list[torch.fx.Node] = []
    for index, argument in enumerate(target._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = (
            node.args[index] if index < len(node.args) and not argument.kwarg_only else node.kwargs.get(argument.name)
        )
        written += [
            item for item in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(item, torch.fx.Node)
        ]
    return written


def _calls_anywhere(graph_module: torch.nn.Module, found: Callable[[torch.fx.Node], bool]) -> bool:
    """Whether a node of the graph, or of a graph within it (a control-flow branch's), is ``found``."""
    return any(
        node.op == "call_function" and found(node)
        for module in graph_module.modules()
        if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes
    )


def enables_grad(graph_module: torch.nn.Module) -> bool:
    """Whether a graph, or a graph within it, turns grad mode on: an ``enable_grad`` block of the
    model's forward, which ``torch.export`` keeps as a ``wrap_with_set_grad_enabled(True, ...)``
    sub-module, or a ``_set_grad_enabled(True)`` call."""
    turns_on = (torch.ops.higher_order.wrap_with_set_grad_enabled, torch._C._set_grad_enabled)
    return _calls_anywhere(
        graph_module, lambda node: node.target in turns_on and bool(node.args) and node.args[0] is True
    )


def enters_autocast(graph_module: torch.nn.Module) -> bool:
    """Whether a graph, or a graph within it, enters an autocast region by a call of its own
    (``_enter_autocast``, its ``_exit_autocast`` another): an error between the two leaves the
    region open, for the runtime to close (:func:`srbench.graph.ambient_autocast.leave_autocast`)."""
    return _calls_anywhere(graph_module, lambda node: node.target is torch.amp.autocast_mode._enter_autocast)
