"""Restore ``nn.TransformerEncoderLayer``'s fused inference kernel in a captured graph.

In eval mode without autograd, eager PyTorch runs each ``nn.TransformerEncoderLayer`` whose
configuration allows it as one call of ``aten._transformer_encoder_layer_fwd`` (its "fast path":
fused QKV projection, attention, feed-forward and layer norms, no intermediate tensors handed
back to Python). ``torch.export`` traces the layer's Python path instead and records some forty
ops per layer. This pass finds each layer's ops by the ``nn_module_stack`` metadata export keeps
on every node, checks the conditions under which eager would take the fast path, and proposes the
fused call on the layer's own parameters. Regions that take other inputs than the layer's input
and parameters (a mask, say) are refused with the reason: the fused call would ignore them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.fx
from torch import nn

from srbench.static.passes.apply import Candidate, PassContext, module_regions, sequence_input

PASS_NAME = "fused_transformer_layer"
_FUSED = torch.ops.aten._transformer_encoder_layer_fwd.default
# The layer's parameters in the order the fused call takes them (after src, embed dim and heads).
_ATTENTION_PARAMETERS = (
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
)
_NORM_AND_FEED_FORWARD_PARAMETERS = (
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
)


def why_not_fast_path(layer: nn.Module) -> str | None:
    """Why eager would not run ``layer`` fused, judged on its configuration (the input's part,
    three dimensions and no masks, is checked on the graph); ``None`` when it would."""
    if type(layer) is not nn.TransformerEncoderLayer:
        return f"{type(layer).__name__} is a subclass of TransformerEncoderLayer: its forward may differ"
    attention = layer.self_attn
    checks = (
        (not torch.backends.mha.get_fastpath_enabled(), "torch.backends.mha.get_fastpath_enabled() is False"),
        (layer.training, "the layer is in training mode"),
        (not attention.batch_first, "self_attn.batch_first is False"),
        (attention.in_proj_bias is None, "self_attn has no bias"),
        (not attention._qkv_same_embed_dim, "query, key and value have different widths"),
        (not layer.activation_relu_or_gelu, "the activation is neither relu nor gelu"),
        (layer.norm1.eps != layer.norm2.eps, "norm1.eps differs from norm2.eps"),
        (attention.num_heads % 2 == 1, "the number of heads is odd"),
        (
            any(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in layer.modules()),
            "forward hooks are attached",
        ),
    )
    return next((reason for failed, reason in checks if failed), None)


def _candidate(context: PassContext, path: str, region: list[torch.fx.Node]) -> Candidate:
    inside = set(region)
    leaving = [node for node in region if any(user not in inside for user in node.users)]
    output = leaving[-1] if leaving else region[-1]
    refuse = lambda reason: Candidate(PASS_NAME, output, "aten::_transformer_encoder_layer_fwd", refused=reason)  # noqa: E731
    try:
        module = context.model.get_submodule(path)
    except AttributeError:
        return refuse(f"layer {path!r}: no such submodule of the model")
    reason = why_not_fast_path(module)
    if reason is not None or not isinstance(module, nn.TransformerEncoderLayer):
        return refuse(f"layer {path!r}: {reason}")
    layer = module
    if len(leaving) != 1:
        return refuse(f"layer {path!r}: {len(leaving)} of its values are used outside it, expected 1")
    parameters = context.parameter_nodes()
    names = [f"{path}.{name}" for name in (*_ATTENTION_PARAMETERS, *_NORM_AND_FEED_FORWARD_PARAMETERS)]
    missing = [name for name in names if name not in parameters]
    if missing:
        return refuse(f"layer {path!r}: parameters {missing} are not graph inputs")
    ignored = {parameters[name] for name in names}
    src, why = sequence_input(region, ignored, "a mask or other input the fused kernel would ignore")
    if src is None:
        return refuse(f"layer {path!r}: {why}")
    attention: nn.MultiheadAttention = layer.self_attn
    norm: nn.LayerNorm = layer.norm1
    head: tuple[int, int] = (attention.embed_dim, attention.num_heads)
    tail: tuple[bool, bool, float] = (layer.activation_relu_or_gelu == 2, bool(layer.norm_first), float(norm.eps))
    parameter_nodes = [parameters[name] for name in names]
    attention_nodes, rest_nodes = parameter_nodes[:4], parameter_nodes[4:]

    def build(graph: torch.fx.Graph, current: Callable[[torch.fx.Node], torch.fx.Node]) -> torch.fx.Node:
        node = graph.call_function(_FUSED, (current(src), *head, *attention_nodes, *tail, *rest_nodes, None, None))
        node.meta.update({key: output.meta[key] for key in ("val", "nn_module_stack") if key in output.meta})
        return node

    def compute(values: Mapping[str, Any]) -> Any:
        weights = [values[node.name] for node in parameter_nodes]
        return _FUSED(values[src.name], *head, *weights[:4], *tail, *weights[4:], None, None)

    return Candidate(
        PASS_NAME,
        output,
        "aten::_transformer_encoder_layer_fwd",
        region=tuple(region),
        reads=(src, *parameter_nodes),
        compute=compute,
        build=build,
    )


def fused_transformer_layers(context: PassContext) -> Iterator[Candidate]:
    """One candidate per ``nn.TransformerEncoderLayer`` call in the graph (see the module docstring)."""
    for path, region in module_regions(context.graph, nn.TransformerEncoderLayer).items():
        yield _candidate(context, path, region)
