"""Where a program runs (:mod:`srbench.static.placement`), and the tensors without data it
refuses. The device was the example's first tensor's: an example whose first tensor is a CPU
length and whose data is on CUDA put the slab on CPU (and managed none of the CUDA work). This
machine has no GPU: the rule is tested on ``torch.device`` objects (it reads only their type and
order), and on a StaticModule where the meta device stands in for a second device."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import InputSignatureError, StaticModule
from srbench.static.placement import program_device, weights_device

QUICK = StaticOptions(measure_choices=False)
CPU, CUDA0, CUDA1 = torch.device("cpu"), torch.device("cuda", 0), torch.device("cuda", 1)


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


class Free(nn.Module):
    """No weights: a meta example would run through capture to the resolver's value checks."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).relu()


@pytest.mark.parametrize(
    ("inputs", "weights", "expected"),
    [
        ((), None, CPU),
        ((CPU, CPU), None, CPU),
        ((CPU, CUDA0), None, CUDA0),  # a CPU length first: the work is on CUDA
        ((CUDA0, CPU), None, CUDA0),
        ((CUDA1, CUDA0), None, CUDA1),  # split across two: the first input's
        ((CPU,), CUDA0, CUDA0),  # the model moves its inputs to its weights
        ((CUDA1,), CUDA0, CUDA1),
    ],
)
def test_a_program_runs_on_the_first_accelerator_of_its_inputs_then_of_its_weights(
    inputs: tuple[torch.device, ...], weights: torch.device | None, expected: torch.device
) -> None:
    assert program_device(inputs, weights) == expected


def test_the_weights_device_is_their_first_accelerator() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    assert weights_device(model, name="m") is None
    model[1].to("meta")
    with pytest.raises(ValueError, match=r"model 'm': 1.weight is on the meta device .*load or initialise"):
        weights_device(model, name="m")


@pytest.mark.parametrize("model", [Scaled(), Free()], ids=["weights", "no weights"])
def test_a_meta_example_is_refused_by_name_before_anything_runs(model: nn.Module) -> None:
    """Before: ``NotImplementedError`` from ``aten::equal`` in the resolver (no weights), or a
    capture error about two devices (weights on cpu)."""
    with pytest.raises(InputSignatureError, match=r"model 'm': input x is on the meta device .* runs real data"):
        StaticModule(model, Inputs.of(torch.empty(2, 4, device="meta")), QUICK, name="m")


def test_a_fake_tensor_is_refused_as_example_and_as_call() -> None:
    """A FakeTensor says it is on cpu: the device check passes it, so it is refused for having no
    data (before: the resolver's failure on the example, an assertion about fake inputs)."""
    with FakeTensorMode():
        fake = torch.randn(2, 4)
    with pytest.raises(InputSignatureError, match=r"model 'm': input x is a FakeTensor .* runs real data"):
        StaticModule(Free(), Inputs.of(fake), QUICK, name="m")
    runtime = StaticModule(Free(), Inputs.of(torch.randn(2, 4)), QUICK, name="m").runtime()
    with pytest.raises(InputSignatureError, match=r"model 'm': input x is a FakeTensor .*; expected signature"):
        runtime(fake)
    torch.testing.assert_close(runtime(torch.ones(2, 4)), torch.full((2, 4), 2.0))


def test_weights_on_the_meta_device_are_refused_by_name() -> None:
    model = Scaled().to("meta")
    with pytest.raises(ValueError, match=r"model 'm': linear.weight is on the meta device"):
        StaticModule(model, Inputs.of(torch.randn(2, 4)), QUICK, name="m")


def test_an_example_whose_first_tensor_is_on_cpu_runs_where_its_other_tensors_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A program's device is chosen from all of the example's tensors: here the second is on
    meta (standing in for CUDA, which this machine lacks). Preparing on meta cannot run, so the
    device is read where preparing chooses it and preparing stops there."""
    import srbench.static.prepared as prepared

    chosen: list[torch.device] = []

    def choose(inputs: object, weights: torch.device | None) -> torch.device:
        chosen.append(program_device(inputs, weights))  # type: ignore[arg-type]
        raise _Chosen

    class _Chosen(Exception):
        pass

    monkeypatch.setattr(prepared, "program_device", choose)
    monkeypatch.setattr("srbench.static.module.input_without_data", lambda inputs, paths: None)

    class Lengths(nn.Module):
        def forward(self, lengths: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    with pytest.raises(_Chosen):
        StaticModule(Lengths(), Inputs.of(torch.tensor(3), torch.empty(3, device="meta")), QUICK)
    assert chosen == [torch.device("meta")]
