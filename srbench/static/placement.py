"""Where a program runs, and the tensors it cannot run on.

A runtime's slab lives on one device, and the planner manages only the intermediates on it (the
others are allocated by their ops, as eager does). That device is where eager runs the model's
computation: on the accelerator its tensors are on, whichever argument comes first. A CPU tensor
beside CUDA ones is a length, an index or a 0-dim scalar that eager lets mix in, not where the
work is; and a model whose weights are on CUDA runs there though its example is on CPU (it moves
its inputs, as transformers models do). So the device is the first accelerator among the
inputs' tensors (in flattening order), else the first among the weights', else the CPU. A model
split across two accelerators runs on the first input's; what it computes on the other is not
planned.

A tensor without data (on the ``meta`` device, or a ``FakeTensor`` made under a
``FakeTensorMode``) cannot be run on: preparing runs the model's ops on the example's values to
check each choice, and a runtime runs real data. It is refused by name before anything runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import torch
from torch._subclasses.fake_tensor import FakeTensor

from srbench.inputs import Inputs

CPU = torch.device("cpu")


def without_data(tensor: torch.Tensor) -> str | None:
    """Why ``tensor`` holds no values a program can run on (``"is on the meta device"``), or
    ``None``."""
    if isinstance(tensor, FakeTensor):
        return f"is a FakeTensor (made under a FakeTensorMode; it only records a shape and the device {tensor.device})"
    if tensor.device.type == "meta":
        return "is on the meta device (a shape without values)"
    return None


def input_without_data(inputs: Inputs, paths: Sequence[str]) -> str | None:
    """Which of ``inputs`` (their leaves named by ``paths``, in flattening order: arranged as their
    signature, :class:`~srbench.inputs.KeywordOrder`) holds no data, and what to give instead;
    ``None`` where every tensor has data."""
    for path, leaf in zip(paths, inputs.leaves()):
        problem = without_data(leaf) if isinstance(leaf, torch.Tensor) else None
        if problem is not None:
            return (
                f"input {path} {problem}: the static runtime runs real data (preparing runs the model's ops on the "
                "example's values); give tensors with values, on the device the runtime is to run on "
                "(torch.randn(shape, device=...), or t.to(device) of a real one)"
            )
    return None


def accelerator(devices: Iterable[torch.device]) -> torch.device | None:
    """The first of ``devices`` that is not the CPU, or ``None``."""
    return next((device for device in devices if device.type != "cpu"), None)


def weights_device(model: torch.nn.Module, *, name: str) -> torch.device | None:
    """The first accelerator among ``model``'s parameters and buffers (``None`` where all are on
    the CPU). Raises :class:`ValueError` naming the first one without data (a model built on the
    meta device and never given values)."""
    tensors = itertools.chain(
        model.named_parameters(remove_duplicate=False), model.named_buffers(remove_duplicate=False)
    )
    devices = []
    for qualified, tensor in tensors:
        problem = without_data(tensor)
        if problem is not None:
            raise ValueError(
                f"model {name!r}: {qualified} {problem}; load or initialise the model's weights before preparing it "
                "(e.g. model.to_empty(device='cpu') then load_state_dict): the static runtime runs real data"
            )
        devices.append(tensor.device)
    return accelerator(devices)


def program_device(inputs: Iterable[torch.device], weights: torch.device | None) -> torch.device:
    """Where a program for a call whose tensors are on ``inputs`` (in flattening order) runs,
    with weights on ``weights`` (their first accelerator, :func:`weights_device`): see the
    module docstring."""
    return accelerator(inputs) or weights or CPU
