"""Self-attention as a memory-lean program: one projection, ``scaled_dot_product_attention`` on
views of it, one output projection.

``torch.export`` records ``nn.MultiheadAttention``'s Python path, which lays the projected query,
key and value out again before attention (``unflatten``, ``transpose``, ``contiguous``: a copy of
all three beside the projection itself) and, batch first, transposes the input and the result.
Eager's fused ``nn.TransformerEncoderLayer`` kernel (``aten._transformer_encoder_layer_fwd``,
:mod:`~srbench.static.passes.fused_transformer`) avoids those copies but computes attention the
plain way on CPU: the scores of every head (8x128x128 floats, 512 KiB, in the zoo's
``transformer_encoder``) are held beside the layer's input, query, key and value, which is that
model's peak (1,024 KiB, eager's too). This pass keeps the projection's result as the only
intermediate of the attention: query, key and value are views of it, and
``scaled_dot_product_attention`` on CPU runs the flash kernel, which never materialises the
scores; its result, laid out as the heads' concatenation, is read by the output projection as it
lies. What the layer holds at most is then its feed-forward hidden state beside its input and
output (768 KiB in the zoo's model, 0.75x eager's peak).

Any self-attention call of an ``nn.MultiheadAttention`` that reaches
``scaled_dot_product_attention`` (``need_weights=False``, as ``nn.TransformerEncoderLayer`` calls
it) is rewritten, batch first or not, with or without masks: the mask's own computation (the
merged padding and attention masks) stays in the graph and is passed to the same attention call
with the same arguments. Calls that cannot be rewritten so are refused with the reason. Whether
this program or eager's fused layer kernel runs where both apply is measured at prepare time
(:func:`srbench.static.rewrite_choice.prefer_lean_attention`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch import nn

from srbench.static.passes.apply import Candidate, PassContext, module_regions, sequence_input

PASS_NAME = "lean_attention"
REPLACEMENT = "linear, scaled_dot_product_attention on its views, linear"
aten = torch.ops.aten
_ATTENTION = aten.scaled_dot_product_attention.default
# One op with its positional and keyword arguments; the same sequence builds the graph's nodes
# and, on real tensors, checks them (:func:`_lean_attention`).
Emit = Callable[[Any, tuple, dict], Any]


def _lean_attention(
    emit: Emit,
    x: Any,
    shape: Sequence[int],
    heads: int,
    batch_first: bool,
    weights: Sequence[Any],
    attention_args: tuple,
    attention_kwargs: dict,
) -> Any:
    """The ops of the lean program, each made by ``emit``: ``x`` (``shape``, batch first or
    sequence first) projected once; query, key and value views of that projection in the
    ``(batch, heads, length, head width)`` layout attention takes; attention's result read as the
    heads' concatenation in sequence-first row order, as ``nn.MultiheadAttention`` computes its
    output projection, so that the result has eager's layout (batch first, a transpose of the
    sequence-first projection). The CPU kernels lay attention's result out as ``(batch, length,
    heads, head width)``: at batch 1, as the zoo's models run, that read is a view; at larger
    batches a copy, as eager's own."""
    first, second, width = shape
    rows = first * second
    length, batch = (second, first) if batch_first else (first, second)
    in_weight, in_bias, out_weight, out_bias = weights
    flat = emit(aten.reshape.default, (x, [rows, width]), {})
    projected = emit(aten.linear.default, (flat, in_weight, in_bias), {})
    split = emit(aten.view.default, (projected, [first, second, 3, heads, width // heads]), {})
    order = [2, 0, 3, 1, 4] if batch_first else [2, 1, 3, 0, 4]
    per_head = emit(aten.permute.default, (split, order), {})
    query, key, value = (emit(aten.select.int, (per_head, 0, index), {}) for index in range(3))
    attended = emit(_ATTENTION, (query, key, value, *attention_args), attention_kwargs)
    back = emit(aten.permute.default, (attended, [2, 0, 1, 3]), {})
    merged = emit(aten.reshape.default, (back, [rows, width]), {})
    out = emit(aten.linear.default, (merged, out_weight, out_bias), {})
    sequence_first = emit(aten.view.default, (out, [length, batch, width]), {})
    return emit(aten.transpose.int, (sequence_first, 0, 1), {}) if batch_first else sequence_first


def _why_not(attention: nn.Module) -> str | None:
    """Why the module's attention cannot be rewritten here, judged on its configuration."""
    if type(attention) is not nn.MultiheadAttention:
        return f"{type(attention).__name__} is not nn.MultiheadAttention: its forward may differ"
    checks = (
        (attention.training, "the module is in training mode (attention dropout)"),
        (not attention._qkv_same_embed_dim, "query, key and value have different widths"),
        (attention.bias_k is not None, "it adds a bias to the key and value sequences (add_bias_kv)"),
        (attention.add_zero_attn, "it appends a zero position (add_zero_attn)"),
        (
            len(attention._forward_hooks) + len(attention._forward_pre_hooks) > 0,
            "forward hooks are attached",
        ),
    )
    return next((reason for failed, reason in checks if failed), None)


def _ancestors(node: torch.fx.Node, within: set[torch.fx.Node]) -> set[torch.fx.Node]:
    found: set[torch.fx.Node] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current in within and current not in found:
            found.add(current)
            stack.extend(current.all_input_nodes)
    return found


def _candidate(context: PassContext, path: str, region: list[torch.fx.Node]) -> Candidate:
    calls = [node for node in region if node.target is _ATTENTION]
    output = region[-1]
    refuse = lambda reason: Candidate(PASS_NAME, output, REPLACEMENT, refused=f"attention {path!r}: {reason}")  # noqa: E731
    try:
        attention = context.model.get_submodule(path)
    except AttributeError:
        return refuse("no such submodule of the model")
    reason = _why_not(attention)
    if reason is not None or not isinstance(attention, nn.MultiheadAttention):
        return refuse(str(reason))
    if len(calls) != 1:
        return refuse(f"{len(calls)} scaled_dot_product_attention calls, expected 1 (need_weights=True computes them)")
    (call,) = calls
    inside = set(region)
    mask_reads: list[torch.fx.Node] = []  # what the call reads besides query, key and value
    torch.fx.node.map_arg((call.args[3:], call.kwargs), mask_reads.append)
    # the mask's computation (merged padding and attention masks) stays: the new call reads it
    mask_nodes = set().union(*(_ancestors(arg, inside) for arg in mask_reads))
    body = [node for node in region if node not in mask_nodes]
    in_body = set(body)
    if any(arg in in_body for node in mask_nodes for arg in node.all_input_nodes):
        return refuse("its mask is computed from the projections")
    leaving = [node for node in body if any(user not in in_body for user in node.users)]
    if len(leaving) != 1:
        return refuse(f"{len(leaving)} of its values are used outside it, expected 1")
    (output,) = leaving
    parameters = context.parameter_nodes()
    names = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")
    weights = [parameters.get(f"{path}.{name}") for name in names]
    if weights[0] is None or weights[2] is None:
        return refuse("its projection weights are not graph inputs")
    kept_reads = [arg for arg in mask_reads if arg not in in_body]
    ignored = {node for node in weights if node is not None} | mask_nodes | set(kept_reads)
    src, why = sequence_input(body, ignored, "query, key and value are not one tensor (not self-attention)")
    if src is None:
        return refuse(why)
    value = src.meta["val"]
    shape, heads, batch_first = tuple(value.shape), int(attention.num_heads), bool(attention.batch_first)
    extra_args, extra_kwargs = call.args[3:], dict(call.kwargs)
    weight_nodes = [node for node in weights if node is not None]
    reads = (src, *weight_nodes, *kept_reads)

    def build(graph: torch.fx.Graph, current: Callable[[torch.fx.Node], torch.fx.Node]) -> torch.fx.Node:
        def emit(target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
            node = graph.call_function(target, *torch.fx.node.map_arg((args, kwargs), current))
            if "nn_module_stack" in output.meta:
                node.meta["nn_module_stack"] = output.meta["nn_module_stack"]
            return node

        return _lean_attention(emit, src, shape, heads, batch_first, weights, extra_args, extra_kwargs)

    def compute(values: Mapping[str, Any]) -> Any:
        real = lambda node: values[node.name] if isinstance(node, torch.fx.Node) else node  # noqa: E731
        args, kwargs = torch.fx.node.map_aggregate((extra_args, extra_kwargs), real)
        return _lean_attention(
            lambda target, a, k: target(*a, **k),
            values[src.name],
            shape,
            heads,
            batch_first,
            [real(node) for node in weights],
            args,
            kwargs,
        )

    return Candidate(PASS_NAME, output, REPLACEMENT, region=tuple(body), reads=reads, compute=compute, build=build)


def _activation(linear: torch.fx.Node) -> torch.fx.Node | None:
    """The elementwise op (ATen's ``pointwise`` tag) that alone reads ``linear``'s result and
    nothing else computed (the feed-forward's ReLU or GELU), if any."""
    if len(linear.users) != 1:
        return None
    (user,) = linear.users
    target = user.target
    pointwise = isinstance(target, torch._ops.OpOverload) and torch.Tag.pointwise in target.tags
    return user if pointwise and user.all_input_nodes == [linear] and user.args[0] is linear else None


def _flattened_linear(linear: torch.fx.Node) -> Candidate | None:
    """A ``linear`` of a 3-D input as one of its rows, 2-D, and the activation that alone reads
    it, viewed back: what eager's ``linear`` computes inside itself (its result the same, bit for
    bit), where a 3-D ``linear`` has no exact out variant (``linear.out`` multiplies, then adds
    the bias: other rounding) and allocates its result, the layer's largest (the feed-forward's
    hidden state). 2-D, it runs as ``addmm`` into the slab, and the activation writes over it
    (:mod:`srbench.static.reuse`; read through a view it took room of its own)."""
    value, result = linear.args[0], linear.meta.get("val")
    if not isinstance(value, torch.fx.Node):
        return None
    meta = value.meta.get("val")
    if not isinstance(meta, torch.Tensor) or meta.dim() != 3 or not isinstance(result, torch.Tensor):
        return None
    rows, shape = meta.shape[0] * meta.shape[1], list(result.shape)
    weights, activation = linear.args[1:], _activation(linear)
    output = activation if activation is not None else linear

    def flattened(emit: Emit, x: Any, rest: Sequence[Any]) -> Any:
        flat = emit(aten.reshape.default, (x, [rows, meta.shape[2]]), {})
        projected = emit(aten.linear.default, (flat, *rest), {})
        if activation is not None:
            projected = emit(activation.target, (projected, *activation.args[1:]), dict(activation.kwargs))
        return emit(aten.view.default, (projected, shape), {})

    def build(graph: torch.fx.Graph, current: Callable[[torch.fx.Node], torch.fx.Node]) -> torch.fx.Node:
        def emit(target: Any, args: tuple, kwargs: dict) -> torch.fx.Node:
            node = graph.call_function(target, torch.fx.node.map_arg(args, current), kwargs)
            node.meta["nn_module_stack"] = linear.meta.get("nn_module_stack", {})
            return node

        return flattened(emit, value, weights)

    def compute(values: Mapping[str, Any]) -> Any:
        real = [values[node.name] if isinstance(node, torch.fx.Node) else node for node in weights]
        return flattened(lambda target, a, k: target(*a, **k), values[value.name], real)

    reads = tuple(node for node in (value, *weights) if isinstance(node, torch.fx.Node))
    region = (linear,) if activation is None else (linear, activation)
    replacement = "linear of the rows, 2-D" + (f", then {activation.target}" if activation is not None else "")
    return Candidate(PASS_NAME, output, replacement, region=region, reads=reads, compute=compute, build=build)


def lean_attentions(context: PassContext) -> Iterator[Candidate]:
    """One candidate per ``nn.MultiheadAttention`` call in the graph (see the module docstring),
    and one per ``linear`` of a 3-D input in an ``nn.TransformerEncoderLayer`` outside its
    attention (its feed-forward: :func:`_flattened_linear`)."""
    attentions = module_regions(context.graph, nn.MultiheadAttention)
    for path, region in attentions.items():
        yield _candidate(context, path, region)
    in_attention = {node for region in attentions.values() for node in region}
    for region in module_regions(context.graph, nn.TransformerEncoderLayer).values():
        for node in region:
            if node.target is aten.linear.default and node not in in_attention:
                candidate = _flattened_linear(node)
                if candidate is not None:
                    yield candidate
