"""Sub-graphs of a captured program (a ``torch.cond`` branch, a ``while_loop`` body) as captured
graphs of their own, without tracing them again.

A control-flow op's sub-graph is already an ATen-level graph: capturing it again with
``torch.export`` would trace every op once more (about a second per sub-graph here) only to find
the same graph. :func:`capture_subgraph` instead copies the graph, gives its nodes the metadata of
the call at hand (``torch.fx``'s ``FakeTensorProp``: the same fake kernels ``torch.export`` runs,
so shapes, dtypes and strides come out as export's would) and wraps it in an
:class:`~torch.export.ExportedProgram` whose inputs are all user inputs, so that everything
downstream reads it as it reads a model's capture.
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import torch
import torch.fx
from torch._export.verifier import TrainingIRVerifier
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export.exported_program import ExportedProgram, ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.utils import _pytree as pytree

from srbench.graph.capture import CapturedGraph, CaptureError
from srbench.inputs import Inputs


class Subgraph(torch.nn.Module):
    """A sub-graph of a captured program, called with its inputs as positional arguments (as the
    control-flow op calls it). As a module it runs the graph as is (eager's answer)."""

    def __init__(self, graph_module: torch.fx.GraphModule):
        super().__init__()
        self.graph_module = graph_module

    def forward(self, *args: Any) -> Any:
        return self.graph_module(*args)


def _argument(value: Any) -> TensorArgument | ConstantArgument:
    if isinstance(value, torch.fx.Node):
        return TensorArgument(value.name)
    return ConstantArgument(name="", value=value)


def _lift_tensor_constants(graph_module: torch.fx.GraphModule) -> dict[str, tuple[torch.fx.Node, torch.Tensor]]:
    """Tensor attributes the graph reads (``torch.tensor(0)`` in a branch: a ``while_loop``'s
    counter) made constant inputs placed first, as ``torch.export`` lifts a model's: its verifier
    takes no ``get_attr`` of a tensor. By attribute name: the placeholder and the tensor."""
    graph = graph_module.graph
    first = next(iter(graph.nodes))
    lifted: dict[str, tuple[torch.fx.Node, torch.Tensor]] = {}
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = operator.attrgetter(str(node.target))(graph_module)
        if not isinstance(value, torch.Tensor):
            continue
        with graph.inserting_before(first):
            placeholder = graph.placeholder(f"c_{node.name}")
        placeholder.meta = dict(node.meta)
        node.replace_all_uses_with(placeholder)
        graph.erase_node(node)
        lifted[str(node.target)] = (placeholder, value)
    return lifted


def capture_subgraph(subgraph: Subgraph, inputs: Inputs, *, name: str) -> CapturedGraph:
    """``subgraph``'s graph, copied, with metadata for ``inputs`` (positional only), as a capture."""
    if inputs.kwargs:
        raise CaptureError(name, f"a sub-graph takes positional inputs only, got keywords {sorted(inputs.kwargs)}")
    source = subgraph.graph_module
    graph_module = torch.fx.GraphModule(source, copy.deepcopy(source.graph))
    try:
        # a shape environment of its own (static shapes): a while_loop's fake kernel needs one
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv(), static_shapes=True)
        FakeTensorProp(graph_module, fake_mode).propagate(*inputs.args)
    except Exception as error:  # FakeTensorProp raises what the op's fake kernel raises
        raise CaptureError(
            name, f"the sub-graph cannot run on these inputs: {type(error).__name__}: {error}"
        ) from error
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    if len(placeholders) != len(inputs.args):
        raise CaptureError(name, f"the sub-graph takes {len(placeholders)} inputs, got {len(inputs.args)}")
    constants = _lift_tensor_constants(graph_module)
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    results, out_spec = pytree.tree_flatten(output.args[0])
    output.args = (tuple(results),)  # flat, as export's graphs return; out_spec rebuilds the structure
    signature = ExportGraphSignature(
        input_specs=[
            InputSpec(InputKind.CONSTANT_TENSOR, _argument(node), target) for target, (node, _) in constants.items()
        ]
        + [InputSpec(InputKind.USER_INPUT, _argument(node), None) for node in placeholders],
        output_specs=[OutputSpec(OutputKind.USER_OUTPUT, _argument(result), None) for result in results],
    )
    _, in_spec = pytree.tree_flatten((inputs.args, {}))
    call = ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec)
    exported = ExportedProgram(
        root=graph_module,
        graph=graph_module.graph,
        graph_signature=signature,
        state_dict={},
        range_constraints={},
        module_call_graph=[ModuleCallEntry("", call)],
        constants={target: value for target, (_, value) in constants.items()},
        verifiers=[TrainingIRVerifier],  # export's own IR: in-place ops (a counter's detach_) allowed
    )
    return CapturedGraph(name=name, exported=exported, graph_module=exported.graph_module, example_inputs=inputs)
