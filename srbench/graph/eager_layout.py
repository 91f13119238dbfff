"""Give the captured program's outputs the strides eager gives them.

A caller sees an output's layout (``out.view(...)`` works on a contiguous output and fails on a
transposed one; ``is_contiguous(memory_format=...)`` picks later code's path), so eager's answer
is its values *and* its strides. The captured graph's outputs are laid out otherwise in three
ways found so far:

- eager takes another path than the one ``torch.export`` traced: ``nn.MultiheadAttention``'s
  fast path (``torch._native_multi_head_attention``, taken by eager in inference when the batch
  has more than one sequence, never under export's fake tensors) returns a contiguous result, the
  traced Python path a transposed view;
- a lowering changes the layout: ``decompose`` turns ``scaled_dot_product_attention`` into
  matmuls whose result is a permuted one (pytorch/pytorch#136543);
- an op's fake kernel gives other strides than its CPU kernel: ``batch_norm`` on a transposed
  input, and ``conv2d`` on an input laid out channels-last by a permute (SegFormer's decode
  head), are contiguous in eager and strided like the input in their fake results, so outputs
  written into buffers planned from the fake result (out variants) came back so laid out.

So the strides of eager's outputs are taken from the eager call preparing makes anyway
(:func:`srbench.graph.attribute_state.refuse_carried_state`), and each graph output laid out
otherwise is given eager's layout by one copy at the end of the graph (``permute``, contiguous
``clone``, the inverse ``permute``: ops every option runs, ``decompose`` included). Only a dense
output that shares memory with no input, no parameter or buffer and no other output is
restrided: a view of an input must stay one (:mod:`srbench.measure.aliasing` compares that too),
and a non-dense one has no layout of its own to copy into. Eager's layout is taken at the
example inputs: one prepared program per input shape, so a layout that depends on the shape
(the fast path, at a batch of more than one) is taken at each. A rewrite gives the outputs back in
the layout captured (:mod:`srbench.static.passes.apply`), which is eager's from here on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch.export.graph_signature import OutputKind, TensorArgument
from torch.utils import _pytree as pytree

from srbench.graph.capture import CapturedGraph
from srbench.memory.lifetimes import has_static_geometry

aten = torch.ops.aten

# eager's strides of each flat output leaf where the program must give them, else None
OutputLayouts = tuple[tuple[int, ...] | None, ...]


def _pointer(tensor: torch.Tensor) -> int | None:
    if tensor.layout != torch.strided or tensor.device.type == "meta":
        return None
    return tensor.untyped_storage().data_ptr()


def eager_layouts(outputs: Any, others: Iterable[torch.Tensor]) -> OutputLayouts:
    """The strides of each of eager's flat ``outputs`` that a copy can give the program's: a
    dense strided tensor sharing storage with none of ``others`` (the call's inputs, the model's
    parameters and buffers) and no other output. ``None`` for every other leaf."""
    leaves = pytree.tree_leaves(outputs)
    pointers = [_pointer(leaf) if isinstance(leaf, torch.Tensor) else None for leaf in leaves]
    taken = {pointer for pointer in map(_pointer, others) if pointer is not None}
    layouts: list[tuple[int, ...] | None] = []
    for leaf, pointer in zip(leaves, pointers):
        own = pointer is not None and pointer not in taken and pointers.count(pointer) == 1
        dense = isinstance(leaf, torch.Tensor) and leaf.numel() > 1 and is_non_overlapping_and_dense_or_false(leaf)
        layouts.append(tuple(leaf.stride()) if own and dense else None)
    return tuple(layouts)


def same_layout(shape: Sequence[int], stride: Sequence[int], wanted: Sequence[int]) -> bool:
    """Whether ``stride`` and ``wanted`` lay a tensor of ``shape`` out alike (the stride of a
    dimension of size 1 means nothing)."""
    return all(size == 1 or a == b for size, a, b in zip(shape, stride, wanted))


def _order(shape: Sequence[int], stride: Sequence[int]) -> list[int]:
    """The dimensions from outermost to innermost in a dense layout with ``stride`` (a dimension
    of size 1, whose stride means nothing, where it stands)."""
    return sorted(range(len(shape)), key=lambda dim: (-stride[dim] if shape[dim] > 1 else 0, dim))


def _copy_in_layout(graph: torch.fx.Graph, node: torch.fx.Node, stride: tuple[int, ...]) -> torch.fx.Node | None:
    """Nodes computing ``node``'s value laid out with ``stride``, or ``None`` where a permuted
    contiguous copy cannot give that layout."""
    meta = node.meta["val"]
    order = _order(meta.shape, stride)
    inverse = sorted(range(len(order)), key=order.__getitem__)
    result = meta.permute(order).clone(memory_format=torch.contiguous_format).permute(inverse)
    if not same_layout(meta.shape, result.stride(), stride):
        return None
    output = next(n for n in graph.nodes if n.op == "output")
    with graph.inserting_before(output):
        permuted = graph.call_function(aten.permute.default, (node, order))
        copy = graph.call_function(aten.clone.default, (permuted,), {"memory_format": torch.contiguous_format})
        restrided = graph.call_function(aten.permute.default, (copy, inverse))
    permuted.meta["val"] = meta.permute(order)
    copy.meta["val"] = permuted.meta["val"].clone(memory_format=torch.contiguous_format)
    restrided.meta["val"] = result
    return restrided


def give_eager_layouts(captured: CapturedGraph, layouts: OutputLayouts | None) -> None:
    """Copy each user output of ``captured`` laid out otherwise than ``layouts`` says eager's is
    into eager's layout (see the module docstring). Nothing is done where eager's outputs do not
    match the graph's user outputs one to one."""
    specs = captured.exported.graph_signature.output_specs
    user = [index for index, spec in enumerate(specs) if spec.kind == OutputKind.USER_OUTPUT]
    if layouts is None or len(user) != len(layouts):
        return
    graph = captured.graph
    output = next(node for node in graph.nodes if node.op == "output")
    results = list(output.args[0])
    for index, stride in zip(user, layouts):
        node = results[index]
        meta = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if (
            stride is None
            or not isinstance(meta, torch.Tensor)
            or not has_static_geometry(meta)
            or len(stride) != meta.dim()
        ):
            continue  # eager's is not to be copied, or a size depends on the data (no layout to tell)
        if same_layout(meta.shape, meta.stride(), stride):
            continue
        copy = _copy_in_layout(graph, node, stride)
        if copy is not None:
            results[index] = copy
            specs[index] = replace(specs[index], arg=TensorArgument(name=copy.name))
    output.args = (type(output.args[0])(results), *output.args[1:])
