"""Outputs of a tensor subclass, which srbench's programs cannot give as eager does.

``torch.export`` traces a model on plain fake tensors: an input of a ``__torch_function__``
subclass (MONAI's ``MetaTensor``) is traced as its tensor data, and the subclass's
``__torch_function__``, which makes eager's results of its class and carries its attributes from
inputs to results (a MetaTensor's ``meta``, ``affine`` and ``applied_operations``), is in no
program. A program's outputs are tensors its ops make, plain ones, or a tensor it passes through
as it is (an input, parameter or buffer returned: that very object, of its own class). Giving an
output eager's class afterwards (``as_subclass``) would be right for no subclass in general: what
its ``__torch_function__`` would have set on the result is not known (a MetaTensor so made has an
identity ``affine`` where eager's has the input's), and each subclass sets other things. So a
model whose eager answer has an output of a tensor subclass that is not passed through is
refused at prepare (:func:`subclass_output`, raised as a ``CaptureError`` by the static runtime's
capture), naming the output and its class, rather than answered with plain tensors that lose
what eager's carry. The check reads the eager call preparing makes anyway
(:func:`srbench.graph.attribute_state.refuse_carried_state`), at each signature (a tensor's class
is part of it: :class:`srbench.static.signature.TensorLeaf`), so a call passing a MetaTensor to a
module prepared on plain tensors is refused too, where its outputs would be MetaTensors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import flatten_with_paths


@dataclass(frozen=True)
class SubclassOutput:
    """An output of eager's answer of a tensor subclass, made by the model (not passed through)."""

    path: str  # ``[1]['logits']``; empty where the output is the tensor itself
    cls: type

    def reason(self) -> str:
        output = f"output {self.path}" if self.path else "output"
        return (
            f"eager's {output} is a {self.cls.__module__}.{self.cls.__qualname__} (a tensor subclass), which the "
            "program cannot give: torch.export traces the model on plain tensors, without the subclass's "
            f"__torch_function__ (which makes eager's results {self.cls.__name__}s and gives them its attributes), "
            "so the output would be a plain torch.Tensor, its values right and what eager's carries lost, and no "
            "class given afterwards would carry that. Pass plain tensors (x.as_subclass(torch.Tensor)) and wrap "
            "the results again"
        )


def subclass_output(outputs: Any, passed: Iterable[torch.Tensor]) -> SubclassOutput | None:
    """The first leaf of ``outputs`` (eager's answer) that is a tensor of another class than
    ``torch.Tensor`` and none of ``passed`` (the call's inputs, the model's parameters and
    buffers, which a program returns as they are), or ``None``."""
    through = {id(tensor) for tensor in passed}
    flat, _ = flatten_with_paths(outputs)
    for path, leaf in flat:
        if isinstance(leaf, torch.Tensor) and type(leaf) is not torch.Tensor and id(leaf) not in through:
            return SubclassOutput(pytree.keystr(path), type(leaf))
    return None
