"""Which outputs share memory with which inputs and earlier outputs: part of what a runtime must
give as eager does. An output that is an input, a view of one, or the same tensor as another
output is something a caller can observe (a write through one shows in the other), so the
conformance tests and the outside-models sweep compare this pattern, not only values."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs, flatten_with_paths


def _byte_range(tensor: torch.Tensor) -> tuple[int, int, int]:
    """The tensor's storage and the bytes of it that its elements span."""
    start = int(tensor.storage_offset()) * tensor.element_size()
    extent = 1 + sum((int(n) - 1) * int(s) for n, s in zip(tensor.shape, tensor.stride())) if tensor.numel() else 0
    return tensor.untyped_storage().data_ptr(), start, start + extent * tensor.element_size()


def aliasing(outputs: Any, inputs: Inputs) -> list[tuple[str, list[str]]]:
    """For every output tensor, the inputs and earlier outputs whose bytes it overlaps (and, for
    an input or output it is, how): what eager's answer and a runtime's must have in common."""
    named = [(f"input {path}", leaf) for path, leaf in inputs.with_paths()]
    named += [(f"output {pytree.keystr(path)}".rstrip(), leaf) for path, leaf in flatten_with_paths(outputs)[0]]
    tensors = [
        (name, leaf)
        for name, leaf in named
        if isinstance(leaf, torch.Tensor) and leaf.layout == torch.strided and leaf.numel()  # sparse: no storage
    ]
    pattern = []
    for index, (name, tensor) in enumerate(tensors):
        if not name.startswith("output"):
            continue
        pointer, start, end = _byte_range(tensor)
        overlaps = []
        for other_name, other in tensors[:index]:
            other_pointer, other_start, other_end = _byte_range(other)
            if pointer == other_pointer and start < other_end and other_start < end:
                same = (start, tensor.shape, tensor.stride()) == (other_start, other.shape, other.stride())
                overlaps.append(other_name + (" (the same view)" if same else " (overlapping)"))
        pattern.append((name, overlaps))
    return pattern
