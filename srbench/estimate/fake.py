"""A model and its inputs as FakeTensors on any device, and its graph captured there.

Estimation never allocates a real tensor: the model is *built* under a ``FakeTensorMode`` (its
initialisers run on fake tensors, so ResNet-50 at batch 10,000 costs what batch 1 does), and its
inputs are fakes of the shapes the real ones would have. The mode has a ``ShapeEnv`` so that
data-dependent sizes (``nonzero``, boolean masks, ``.item()``) become unbacked symbols instead of
errors.

A device that is not present is faked too: ``torch.empty_strided(..., device="cuda")`` under the
mode gives a fake CUDA tensor on a CPU-only build of torch 2.13, and operators dispatch to their
meta kernels, which compute CUDA's output sizes and strides. Three things do not work on a CPU-only
build, found by trying: ``module.to("cuda")`` and random initialisers on fake CUDA tensors (they
ask for the CUDA device guard: "PyTorch is not linked with support for cuda devices"), autograd on
fake CUDA tensors (it aborts the process from C++, so parameters are made ``requires_grad=False``
and everything runs under ``no_grad``), and Python indexing of a fake CUDA tensor (``x[:, 0]``
also takes the device guard). So the model is built on fake CPU tensors and its parameters and
buffers are replaced by fakes on the target device; a model whose Python indexes tensors then
fails to capture there, and :func:`capture_on` captures it on the CPU and propagates the graph to
the device instead (:mod:`srbench.estimate.retarget`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from srbench.graph import CapturedGraph, CaptureError, capture
from srbench.inputs import Inputs


def new_fake_mode() -> FakeTensorMode:
    """A fake mode whose unknown sizes become symbols; real tensors a model keeps (a constant made
    at import time) are converted on use rather than refused."""
    return FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)


def fake_like(value: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A fake tensor like ``value`` (shape, strides, dtype) on ``device``; call under the fake mode."""
    return torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device=device)


def _replace_tensors(module: torch.nn.Module, convert: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Replace every parameter and buffer of ``module`` by ``convert`` of it (ties kept), no
    parameter requiring grad. ``module.to()`` cannot do this for a device torch was not built for."""
    replaced: dict[int, torch.Tensor] = {}
    for owner in module.modules():
        for table in (owner._parameters, owner._buffers):
            for name, value in table.items():
                if value is None:
                    continue
                if id(value) not in replaced:
                    new = convert(value)
                    replaced[id(value)] = (
                        torch.nn.Parameter(new, requires_grad=False) if isinstance(value, torch.nn.Parameter) else new
                    )
                table[name] = replaced[id(value)]  # type: ignore[assignment]


@dataclass(frozen=True)
class FakeModel:
    """A model built on fake tensors, with fake inputs, on ``device``. ``built_for_real`` says the
    model's initialiser needed real values (it read a tensor's value), so it was built on real
    CPU tensors and converted."""

    module: torch.nn.Module
    inputs: Inputs
    device: torch.device
    mode: FakeTensorMode
    built_for_real: bool = False


def build_fake(
    build: Callable[[], torch.nn.Module], make_inputs: Callable[[], Inputs | tuple], device: torch.device
) -> FakeModel:
    """Build the model and its inputs under a new fake mode, then move both to ``device``.

    An initialiser that reads a tensor's value (``torch.linspace(...).tolist()``) cannot run on
    fake tensors: such a model is built for real on the CPU (its parameters cost real memory,
    its activations still do not) and its parameters and buffers are converted to fakes.
    """
    mode = new_fake_mode()
    built_for_real = False
    with torch.no_grad():
        try:
            with mode:
                module = build().eval()
        except Exception:  # any failure of the model's own initialiser on fake values: build it for real
            module = build().eval()
            built_for_real = True
            _replace_tensors(module, lambda value: mode.from_tensor(value, static_shapes=True))
        with mode:
            inputs = Inputs.coerce(make_inputs())
            _replace_tensors(module, lambda value: value if device.type == "cpu" else fake_like(value, device))
            if device.type != "cpu":
                inputs = inputs.map_tensors(lambda x: fake_like(x, device))
    return FakeModel(module, inputs, device, mode, built_for_real)


@dataclass(frozen=True)
class FakeCapture:
    """A graph captured on fake tensors. ``traced_on`` is the device ``torch.export`` ran on;
    when it is not ``device``, ``retarget_reason`` says why the graph was captured there and
    propagated to ``device`` afterwards."""

    captured: CapturedGraph
    device: torch.device
    traced_on: torch.device
    mode: FakeTensorMode
    retarget_reason: str | None = None
    built_for_real: bool = False


def capture_on(
    build: Callable[[], torch.nn.Module],
    make_inputs: Callable[[], Inputs | tuple],
    device: torch.device,
    *,
    name: str = "model",
    decompose: bool = False,
) -> FakeCapture:
    """Capture the model on fake tensors on ``device``.

    Raises :class:`srbench.graph.CaptureError` when ``torch.export`` cannot capture the model on
    the CPU either (a data-dependent branch, say): :mod:`srbench.estimate.partial` then says where.
    """
    fake = build_fake(build, make_inputs, device)
    try:
        captured = capture(fake.module, fake.inputs, name=name, decompose=decompose)
        return FakeCapture(captured, device, device, fake.mode, built_for_real=fake.built_for_real)
    except CaptureError as error:
        if device.type == "cpu" or _device_present(device):
            raise
        reason = error.reason
    from srbench.estimate.retarget import retarget

    on_cpu = build_fake(build, make_inputs, torch.device("cpu"))
    captured = capture(on_cpu.module, on_cpu.inputs, name=name, decompose=decompose)
    return FakeCapture(
        retarget(captured, device, on_cpu.mode),
        device,
        torch.device("cpu"),
        on_cpu.mode,
        retarget_reason=reason,
        built_for_real=on_cpu.built_for_real,
    )


def _device_present(device: torch.device) -> bool:
    module = getattr(torch, device.type, None)
    is_available = getattr(module, "is_available", None)
    return bool(is_available()) if callable(is_available) else False
