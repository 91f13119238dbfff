"""How each output tensor is laid out in memory, compared with eager's: its strides, so its memory
format too. A caller observes the layout (``out.view(...)`` works on eager's output and fails on a
transposed one; ``is_contiguous(memory_format=torch.channels_last)`` decides the path later code
takes), so a runtime that gives eager's values in another layout is not eager's answer.

Strides along dimensions of size 1 say nothing (no two elements are a step apart there) and an
empty tensor has no layout to observe; both are left out of the comparison, as
``torch._prims_common.check_significant_strides`` leaves them out."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import flatten_with_paths


def significant_strides(tensor: torch.Tensor) -> tuple[tuple[int, int], ...] | None:
    """``(dimension, stride)`` for every dimension longer than 1, or ``None`` for a tensor with no
    strided layout to observe (sparse, empty)."""
    if tensor.layout != torch.strided or tensor.numel() == 0:
        return None
    return tuple(
        (dim, int(stride)) for dim, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())) if size > 1
    )


def layout_difference(actual: Any, expected: Any) -> str | None:
    """The first output tensor whose significant strides differ from eager's, said with both
    strides, or ``None``. Outputs are matched by their path (the structure is the equivalence
    check's to compare)."""
    got = dict(flatten_with_paths(actual)[0])
    for path, want in flatten_with_paths(expected)[0]:
        have = got.get(path)
        if not (isinstance(want, torch.Tensor) and isinstance(have, torch.Tensor)) or have.shape != want.shape:
            continue
        if significant_strides(have) != significant_strides(want):
            name = pytree.keystr(path)
            return (
                f"{f'output {name}' if name else 'the output'} of shape {tuple(want.shape)} has strides "
                f"{tuple(have.stride())}, eager's {tuple(want.stride())}"
            )
    return None
