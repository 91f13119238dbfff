"""Out variants of the oneDNN convolutions the fused-convolution pass emits.

``mkldnn._convolution_pointwise`` has no ``.out`` overload, but its in-place binary form adds the
convolution into a given tensor (oneDNN's "sum" post-op) and applies the activation there. So
writing into a buffer the runtime owns is: fill the buffer with zeros (unary form) or with the
residual (binary form), then add the convolution into it in place. The zero fill is one pass
over memory the planner already placed, far cheaper than allocating and faulting in a new
result at every run. Registered in srbench's default out-variant registry on import; the
resolver checks them like any candidate and keeps them only where they give the op's result.
"""

from __future__ import annotations

from typing import Any

import torch

from srbench.static.out_variants import register_out_variant

_INPLACE = torch.ops.mkldnn._convolution_pointwise_.binary


def convolution_pointwise_out(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    padding: list[int],
    stride: list[int],
    dilation: list[int],
    groups: int,
    attr: str,
    scalars: list[Any],
    algorithm: str | None,
    *,
    out: torch.Tensor,
) -> torch.Tensor:
    """``act(conv(x))`` into ``out``. oneDNN's in-place form fuses only a ReLU after the add, so a
    hardtanh (ReLU6) is applied in place after it."""
    out.zero_()
    fused = attr if attr == "relu" else None
    _INPLACE(out, x, weight, bias, padding, stride, dilation, groups, "add", 1.0, fused, [], algorithm)
    if attr == "hardtanh":
        out.clamp_(*scalars)
    elif attr not in ("none", "relu"):
        raise NotImplementedError(f"no in-place form of the {attr!r} activation")
    return out


def convolution_pointwise_binary_out(
    x: torch.Tensor,
    other: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    padding: list[int],
    stride: list[int],
    dilation: list[int],
    groups: int,
    binary_attr: str,
    alpha: float | None,
    unary_attr: str | None,
    unary_scalars: list[Any],
    unary_algorithm: str | None,
    *,
    out: torch.Tensor,
) -> torch.Tensor:
    """``act(conv(x) <binary> other)`` into ``out`` (oneDNN's in-place form needs ``add``)."""
    if binary_attr != "add":
        raise NotImplementedError(f"only the add binary form writes into a given tensor, not {binary_attr!r}")
    out.copy_(other)
    return _INPLACE(
        out,
        x,
        weight,
        bias,
        padding,
        stride,
        dilation,
        groups,
        "add",
        alpha,
        unary_attr,
        unary_scalars,
        unary_algorithm,
    )


register_out_variant(torch.ops.mkldnn._convolution_pointwise.default, convolution_pointwise_out)
register_out_variant(torch.ops.mkldnn._convolution_pointwise.binary, convolution_pointwise_binary_out)
