"""Out variants that run the kernel eager runs, for export-level ops whose own ``.out`` overload
is missing or generated (a generated one runs the functional kernel, then copies into ``out``).

``torch.export`` records composite ops (``batch_norm``, ``adaptive_avg_pool2d``) that have no
``.out`` overload of their own, or one that runs another kernel than the op, so their results
were allocated at every run, outside the slab. Folding batch norm into the convolutions plans
them, but changes the values (see :mod:`srbench.static.passes`). The calls here change nothing:
each writes, into the buffer the runtime gives it, the result of the very kernel eager's
composite op ends in on this backend:

* ``batch_norm`` in inference (``training=False``, running statistics given): eager calls
  ``native_batch_norm``, whose ``.out`` overload is a CPU kernel of its own (the dispatcher's
  tables say so: :func:`has_backend_kernel`); in inference it writes only ``out``.
* ``adaptive_avg_pool2d`` to 1x1: eager takes the mean over the last two dimensions (the op's own
  ``.out`` kernel averages in another order and differs in the last bits).
* ``conv2d`` where eager runs ATen's own CPU convolution (``thnn_conv2d``, which has an out
  kernel): the 1x1, stride-1, ungrouped convolutions of a single thread (33 of ResNet-50's 53).
  Eager picks its kernel by the thread count too: a plan prepared on one thread and run on
  several gives oneDNN's rounding no more.

Every one is a candidate like any other: the resolver keeps it only where it gives the op's own
result bit for bit on the example inputs (:class:`srbench.static.resolve.ResultCheck` ``EXACT``).

The other convolutions are left allocating their results: eager's oneDNN convolution has no out
kernel, and writing one into a given tensor through oneDNN's in-place "sum" form (zero it, add the
convolution into it), although bit for bit eager's on all 53 of ResNet-50's, makes oneDNN reorder
the destination into a workspace of the result's size on top of eager's own reorders (ResNet-50:
6.1 MiB instead of 3.1 MiB for a 56x56x256 result) and adds a zero fill, so it saves no memory
and costs time.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from srbench.static.calls import Call, Const

_BATCH_NORM = torch.ops.aten.batch_norm.default
_CONV2D = torch.ops.aten.conv2d.default
_ADAPTIVE_AVG_POOL2D = torch.ops.aten.adaptive_avg_pool2d.default
_NATIVE_BATCH_NORM_OUT = torch.ops.aten.native_batch_norm.out
_native_batch_norm = torch._C._VariableFunctions.native_batch_norm  # its C binding: takes out= for all three
_THNN_CONV2D = getattr(torch._C._nn, "thnn_conv2d")  # noqa: B009 - not in torch's type stubs


def has_backend_kernel(op: torch._ops.OpOverload, device: torch.device) -> bool:
    """Whether ``op`` has a kernel of its own for ``device``'s backend in the dispatcher's tables
    (for an ``.out`` overload: not only the generated, backend-independent one that allocates
    and copies)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), device.type.upper())
    except RuntimeError:  # a dispatch key this build does not know
        return False


def batch_norm_into(
    input: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor,
    running_var: torch.Tensor,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool,
    *,
    out: torch.Tensor,
    unused: torch.Tensor,
) -> torch.Tensor:
    """Inference ``batch_norm`` through ``native_batch_norm``'s out kernel. ``unused`` stands for
    the saved mean and inverse deviation, which inference neither computes nor writes (an empty
    tensor, shared: the kernel leaves it as it is)."""
    _native_batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps, out=(out, unused, unused))
    return out


def _value(node: Any, env: dict[str, Any]) -> Any:
    return env.get(node.name) if isinstance(node, torch.fx.Node) else node


def eager_out_call(node: torch.fx.Node, op: torch._ops.OpOverload, env: dict[str, Any]) -> Call | None:
    """An out variant of ``node`` that runs eager's own kernel (see the module docstring), or
    ``None``; ``env`` holds the example values of the node's arguments."""
    if node.kwargs:
        return None
    first = _value(node.args[0], env) if node.args else None
    if not isinstance(first, torch.Tensor):
        return None
    if op == _BATCH_NORM:
        arguments = list(node.args)
        training = arguments[5] if len(arguments) > 5 else None
        statistics = [_value(arg, env) for arg in arguments[3:5]]
        if (
            training is False
            and all(isinstance(s, torch.Tensor) for s in statistics)
            and has_backend_kernel(_NATIVE_BATCH_NORM_OUT, first.device)
        ):
            unused = Const(torch.empty(0, dtype=first.dtype, device=first.device))
            return Call("torch.native_batch_norm", batch_norm_into, node.args, {"unused": unused}, out="out")
        return None
    if op == _CONV2D and first.device.type == "cpu":
        return _thnn_conv2d(node, env)
    if op == _ADAPTIVE_AVG_POOL2D and len(node.args) == 2 and node.args[1] in ([1, 1], (1, 1)):
        return Call("torch.mean", torch._C._VariableFunctions.mean, (node.args[0], [-1, -2], True), out="out")
    return None


def _pair(value: Any) -> tuple[int, int] | None:
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (value[0], value[1])
    return None


def _thnn_conv2d(node: torch.fx.Node, env: dict[str, Any]) -> Call | None:
    """``conv2d`` through ATen's own CPU convolution (``thnn_conv2d``: im2col and a matrix
    product, no im2col at all for a 1x1 kernel), which has an out kernel. Eager takes it for the
    1x1, stride-1, ungrouped convolutions of a single thread (``ConvUtils.h``: oneDNN is not
    faster there); for other convolutions eager runs oneDNN, which rounds differently, and the
    resolver's bitwise check turns this candidate down."""
    schema = _CONV2D._schema.arguments
    arguments = list(node.args) + [a.default_value for a in schema[len(node.args) :]]
    weight, bias, stride, padding, dilation, groups = arguments[1:7]
    weight_value = _value(weight, env)
    strides, paddings = _pair(stride), _pair(padding)
    if (
        not isinstance(weight_value, torch.Tensor)
        or weight_value.dim() != 4
        or groups != 1
        or _pair(dilation) != (1, 1)
        or strides is None
        or paddings is None
    ):
        return None
    kernel = tuple(weight_value.shape[2:])
    return Call(
        "torch._C._nn.thnn_conv2d",
        _THNN_CONV2D,
        (node.args[0], weight, kernel, bias, strides, paddings),
        out="out",
    )
