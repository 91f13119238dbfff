"""Convolutions as one oneDNN call each: batch norm folded in, the activation and the residual add
fused, the weight packed once.

What TorchScript's ``freeze`` and Inductor's freezing passes do at prepare time, as a pass over a
captured graph. A 2-D convolution with a constant weight, followed by an inference batch norm
with constant statistics, becomes a convolution with the batch norm folded into its weight and
bias (``w * gamma / sqrt(var + eps)``, ``(b - mean) * gamma / sqrt(var + eps) + beta``). It runs
as ``mkldnn._convolution_pointwise`` on the weight reordered once into oneDNN's blocked layout
(``mkldnn._reorder_convolution_weight``), with a following ReLU or hardtanh fused into the
kernel, or, where the result is added to another tensor of its shape (a residual), as
``mkldnn._convolution_pointwise.binary`` (``act(conv(x) + other)``). Results come out channels
last, the layout oneDNN computes in without reordering; graph outputs are given back in their
original layout. Both ops get out variants here (see :mod:`srbench.static.passes.mkldnn_out`),
so their results live in the planned slab.

Only float32 on the CPU with oneDNN available; other convolutions are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.fx
from torch.fx.operator_schemas import normalize_function

from srbench.static.passes.apply import Candidate, PassContext

PASS_NAME = "fused_convolution"
_CONV = torch.ops.aten.conv2d.default
_BATCH_NORM = torch.ops.aten.batch_norm.default
_ADD = torch.ops.aten.add.Tensor
_UNARY = {
    torch.ops.aten.relu.default: ("relu", ()),
    torch.ops.aten.relu_.default: ("relu", ()),
}
_HARDTANH = (torch.ops.aten.hardtanh.default, torch.ops.aten.hardtanh_.default)
_POINTWISE = torch.ops.mkldnn._convolution_pointwise


def _arguments(node: torch.fx.Node) -> dict[str, Any]:
    """Every argument of an op node by its schema name, defaults filled in."""
    normalized = normalize_function(node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True)  # type: ignore[arg-type]
    return dict(normalized.kwargs) if normalized is not None else {}


def _pair(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def _only_user(node: torch.fx.Node) -> torch.fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _unary(node: torch.fx.Node | None) -> tuple[str, list[float]] | None:
    """The oneDNN name and scalars of an activation it can fuse, if ``node`` is one."""
    if node is None or node.op != "call_function":
        return None
    if node.target in _UNARY:
        name, scalars = _UNARY[node.target]
        return name, list(scalars)
    if node.target in _HARDTANH:
        arguments = _arguments(node)
        low, high = arguments.get("min_val"), arguments.get("max_val")
        if isinstance(low, (int, float)) and isinstance(high, (int, float)):
            return "hardtanh", [float(low), float(high)]
    return None


def _residual(add: torch.fx.Node | None, result: torch.fx.Node) -> torch.fx.Node | None:
    """The other operand of ``add(result, other)`` (either order) when it has ``result``'s shape
    and dtype (no broadcasting) and the add scales nothing."""
    if add is None or add.op != "call_function" or add.target != _ADD or len(add.args) != 2:
        return None
    if add.kwargs.get("alpha", 1) != 1:
        return None
    first, second = add.args
    other = second if first is result else first if second is result else None
    if not isinstance(other, torch.fx.Node) or other is result:
        return None
    mine, theirs = result.meta.get("val"), other.meta.get("val")
    if not isinstance(theirs, torch.Tensor) or not isinstance(mine, torch.Tensor):
        return None
    return other if (theirs.shape == mine.shape and theirs.dtype == mine.dtype) else None


def _folded(
    weight: torch.Tensor, bias: torch.Tensor | None, norm: Mapping[str, Any] | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The convolution's weight and bias with an inference batch norm folded in."""
    if norm is None:
        return weight.detach().clone(), None if bias is None else bias.detach().clone()
    scale = norm["weight"] / torch.sqrt(norm["var"] + norm["eps"])
    folded_bias = (bias if bias is not None else torch.zeros_like(norm["mean"])) - norm["mean"]
    return (weight * scale.reshape(-1, 1, 1, 1)).detach(), (folded_bias * scale + norm["bias"]).detach()


def _batch_norm(node: torch.fx.Node | None, constants: Mapping[str, Any]) -> dict[str, Any] | None:
    """An inference-mode batch norm whose affine parameters and statistics are all constants."""
    if node is None or node.op != "call_function" or node.target != _BATCH_NORM:
        return None
    arguments = _arguments(node)
    if arguments.get("training") is not False:
        return None
    values: dict[str, Any] = {}
    for key, name in (("weight", "weight"), ("bias", "bias"), ("mean", "running_mean"), ("var", "running_var")):
        value = arguments.get(name)
        if not isinstance(value, torch.fx.Node) or value.name not in constants:
            return None
        values[key] = constants[value.name]
    values["eps"] = float(arguments["eps"])
    return values


class _Fusions:
    """Proposes one candidate per fusable convolution of a graph."""

    def __init__(self, context: PassContext):
        self.context = context
        parameter_nodes = context.parameter_nodes()
        self.constants = {node.name: context.values[node.name] for node in parameter_nodes.values()}
        self.position = {node: index for index, node in enumerate(context.graph.nodes)}
        self.count = 0

    def _constant(self, node: torch.fx.Node | None) -> torch.Tensor | None:
        if node is None:
            return None
        value = self.constants.get(node.name)
        return value if isinstance(value, torch.Tensor) else None

    def candidate(self, conv_node: torch.fx.Node) -> Candidate | None:
        arguments = _arguments(conv_node)
        source, weight_node, bias_node = arguments.get("input"), arguments.get("weight"), arguments.get("bias")
        geometry_values = [_pair(arguments.get(key)) for key in ("padding", "stride", "dilation")]
        groups = arguments.get("groups")
        if not isinstance(source, torch.fx.Node) or not isinstance(groups, int) or None in geometry_values:
            return None
        x = source.meta.get("val")
        weight = self._constant(weight_node)
        bias = self._constant(bias_node)
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.dtype != torch.float32 or x.device.type != "cpu":
            return None
        if weight is None or weight.dtype != torch.float32 or (bias_node is not None and bias is None):
            return None
        padding, stride, dilation = geometry_values
        region = [conv_node]
        result: torch.fx.Node = conv_node
        norm_node = _only_user(conv_node)
        norm = _batch_norm(norm_node, self.constants)
        if norm is not None and norm_node is not None:
            result = norm_node
            region.append(result)
        other = _residual(_only_user(result), result)
        if other is not None and self.position[other] > self.position[conv_node]:
            # the other operand is computed after this convolution (a residual's projection
            # shortcut before the block's last convolution): fuse the add into that one instead
            other = None
        if other is not None:
            add = _only_user(result)
            assert add is not None
            region.append(add)
            result = add
        activation = _unary(_only_user(result))
        if activation is not None:
            activation_node = _only_user(result)
            assert activation_node is not None
            region.append(activation_node)
            result = activation_node
        folded_weight, folded_bias = _folded(weight, bias, norm)
        packed = torch.ops.mkldnn._reorder_convolution_weight(
            folded_weight, padding, stride, dilation, groups, list(x.shape)
        )
        self.count += 1
        stem = f"_srbench_conv{self.count}"
        constants = {f"{stem}_weight": packed}
        if folded_bias is not None:
            constants[f"{stem}_bias"] = folded_bias
        attr, scalars = activation if activation is not None else ("none", [])
        geometry = (padding, stride, dilation, groups)
        reads = (source,) if other is None else (source, other)
        label = "mkldnn::_convolution_pointwise" + (".binary" if other is not None else "")

        def run(x_value: torch.Tensor, other_value: torch.Tensor | None) -> torch.Tensor:
            w, b = constants[f"{stem}_weight"], constants.get(f"{stem}_bias")
            if other_value is None:
                return _POINTWISE.default(x_value, w, b, *geometry, attr, scalars, "")
            unary = None if attr == "none" else attr
            return _POINTWISE.binary(x_value, other_value, w, b, *geometry, "add", 1.0, unary, scalars, "")

        def compute(values: Mapping[str, Any]) -> Any:
            return run(values[source.name], values[other.name] if other is not None else None)

        def build(graph: torch.fx.Graph, current: Callable[[torch.fx.Node], torch.fx.Node]) -> torch.fx.Node:
            w_node = graph.get_attr(f"{stem}_weight")
            b_node = graph.get_attr(f"{stem}_bias") if folded_bias is not None else None
            if other is None:
                args: tuple = (current(source), w_node, b_node, *geometry, attr, scalars, "")
                return graph.call_function(_POINTWISE.default, args)
            unary = None if attr == "none" else attr
            args = (current(source), current(other), w_node, b_node, *geometry, "add", 1.0, unary, scalars, "")
            return graph.call_function(_POINTWISE.binary, args)

        return Candidate(
            PASS_NAME,
            result,
            label,
            region=tuple(region),
            reads=reads,
            compute=compute,
            build=build,
            new_constants=constants,
            # oneDNN computes these channels-last on packed weights: a plain convolution after one
            # would reorder its weight and its input at every call (ResNet-50 with its first 9 of
            # 53 fused: 1.95x eager's peak), while plain ones before the first cost nothing extra
            tail_only=True,
        )


def fused_convolutions(context: PassContext) -> Iterator[Candidate]:
    """One candidate per 2-D convolution with something to fold or fuse (see the module docstring)."""
    if not torch.backends.mkldnn.is_available():
        return
    fusions = _Fusions(context)
    for node in list(context.graph.nodes):
        if node.op == "call_function" and node.target == _CONV:
            candidate = fusions.candidate(node)
            if candidate is not None:
                yield candidate
