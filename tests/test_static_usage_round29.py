"""How callers use a prepared runtime beyond the outside sweep's fresh calls (round 29's probes):
the model's mode switched after preparing, and a call that fails mid-run followed by a valid one,
each under the sweep's option sets (``benchmarks/outside_models.py``'s ``OPTION_SETS``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions
from srbench.static.errors import ModelModeError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

OPTION_SETS = {
    "default": StaticOptions(),
    "managed_outputs": StaticOptions(manage_output_tensors=True),
    "decompose": StaticOptions(decompose=True),
    "streams2_forced": StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False),
}


class DropoutNorm(nn.Module):
    """Answers otherwise in each mode: dropout applied or not, batch norm normalising by the
    batch's statistics (and updating its running ones) or by its running ones."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.drop(self.proj(x)))


@pytest.mark.parametrize("prepared_training", [True, False], ids=["prepared_training", "prepared_eval"])
@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_a_call_after_the_models_mode_switched_is_refused(prepared_training, options):
    """The program is the graph torch.export traced in the model's mode at preparing. A model
    prepared before its ``.eval()`` (the plausible slip) kept running dropout and updating batch
    norm's running statistics: 2.12 off eager's eval answer, the statistics moved, silently; one
    prepared in eval mode then switched to ``.train()`` answered as in eval. Such a call is now
    refused with the modes named, touching nothing; switched back, the runtime answers as before."""
    torch.manual_seed(0)
    model = DropoutNorm().train(prepared_training)
    x = torch.linspace(-2.0, 2.0, 4 * 8).reshape(4, 8)
    with torch.no_grad():
        runtime = StaticModule(model, (x,), options).runtime()
        model.train(not prepared_training)
        state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
        now = "eval" if prepared_training else "training"
        with pytest.raises(ModelModeError, match=f"prepared in .* mode and is now in {now} mode"):
            runtime(x)
        for name, tensor in model.state_dict().items():
            torch.testing.assert_close(tensor, state[name], rtol=0.0, atol=0.0, msg=name)
        model.train(prepared_training)
        if not prepared_training:  # eval: one answer, eager's (training mode draws dropout's mask)
            torch.testing.assert_close(runtime(x), model(x))


class Lookup(nn.Module):
    """An embedding gathered at indices the caller gives: one out of range fails mid-run, after
    the projection wrote its result into the slab (or the output arena)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.linspace(-1.0, 1.0, 10 * 8).reshape(10, 8))
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.proj(x)
        return torch.relu(hidden + self.table[index]) * 2.0, hidden.sum(-1)


@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_a_call_failing_mid_run_leaves_the_runtime_and_the_callers_thread_as_they_were(options):
    """An index out of range raises the op's own error; the caller's grad mode and dispatch keys
    come back, the runtime's call token is given back (no ``ConcurrentUseError`` after), and the
    next calls answer as eager, an output kept from before the failure included (where outputs
    are not managed: a managed output holds until the next run)."""
    torch.manual_seed(0)
    model = Lookup().eval()
    x, index = torch.linspace(-1.0, 1.0, 4 * 8).reshape(4, 8), torch.tensor([1, 2, 3, 4])
    with torch.no_grad():
        runtime = StaticModule(model, (x, index), options).runtime()
        kept = runtime(x, index)
        values = [out.clone() for out in kept]
    with pytest.raises(IndexError, match="index 30 is out of bounds"):
        runtime(x * 3.0, torch.tensor([1, 2, 30, 4]))
    assert torch.is_grad_enabled()
    assert not torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.AutogradCPU)
    if not options.manage_output_tensors:
        for out, value in zip(kept, values):
            torch.testing.assert_close(out, value, rtol=0.0, atol=0.0)
    with torch.no_grad():
        for call in ((x * 2.0, index), (x, index.flip(0))):
            for out, want in zip(runtime(*call), model(*call)):
                torch.testing.assert_close(out, want)


class MakesTensors(nn.Module):
    """Makes tensors of the default dtype in forward (``arange``, ``zeros``, ``tensor`` of floats)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return x + torch.arange(4) * 0.5, torch.zeros(4) + 1, torch.tensor([1.5, 2.5]) * x[:2]


@pytest.fixture
def default_dtype_restored():
    before = torch.get_default_dtype()
    yield
    torch.set_default_dtype(before)


@pytest.mark.usefixtures("default_dtype_restored")
@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_a_call_under_another_default_dtype_gets_its_own_program(options):
    """The program is the graph traced under the default dtype of its preparation, where
    ``torch.zeros(4)`` made float32: after ``torch.set_default_dtype(torch.float64)`` the runtime
    answered float32 where eager answers float64 (promoting the float32 input), silently. The
    default dtype is now part of the input signature, checked by the guard: a call under another
    one gets a program of its own, and back under the first the first program serves again."""
    model, x = MakesTensors(), torch.randn(4)
    module = StaticModule(model, (x,), options)
    runtime = module.runtime()
    for dtype in (torch.float64, torch.float32, torch.float64):
        torch.set_default_dtype(dtype)
        got, expected = runtime(x.clone()), model(x.clone())
        assert [t.dtype for t in got] == [t.dtype for t in expected], dtype
        for out, want in zip(got, expected):
            torch.testing.assert_close(out, want)
    assert module.shapes_prepared == 2
