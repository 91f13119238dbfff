"""What a twenty-seventh round of models from outside the zoo broke (``benchmarks/outside_round27.py``:
hand-written models no earlier round built, run by ``benchmarks/outside_models.py``), each as the
smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions
from srbench.static.errors import ManagedOutputInputError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

OPTION_SETS = {
    "default": StaticOptions(),
    "decompose": StaticOptions(decompose=True),
    "streams2_forced": StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False),
}


class WritesItsBuffer(nn.Module):
    """Writes its buffer in place, then reads its argument: where the caller passes the buffer
    itself as that argument, the argument has changed by the time it is read."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("memory", torch.linspace(-1.0, 1.0, 16))

    memory: torch.Tensor

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.memory.add_(x.mean(0))
        return state * 2.0, x + state


class WritesItsArgument(WritesItsBuffer):
    """Writes its argument in place, then reads its buffer: the other way round."""

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        state.mul_(0.5)
        return x * self.memory, self.memory + 1.0


def _state_or_copy(model: WritesItsBuffer, passed: str) -> torch.Tensor:
    return model.memory if passed == "buffer" else model.memory.clone()


@pytest.mark.parametrize("kind", [WritesItsBuffer, WritesItsArgument])
@pytest.mark.parametrize("prepared_with, called_with", [("copy", "buffer"), ("buffer", "buffer"), ("buffer", "copy")])
@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_an_argument_that_is_the_models_own_buffer_sees_the_models_writes(kind, prepared_with, called_with, options):
    """The guard compared the memory the call's tensors share with each other, never with the
    model's own parameters and buffers, so a call passing the model's buffer as the argument ran
    the program of a call passing another tensor, and the other way round. Prepared on a copy and
    called with the buffer, a ``decompose``d program (which writes the buffer's new value back at
    the end of the call) and, where the buffer is written, one of two streams (which ordered its
    write and the argument's read apart) read the argument's old value (the round's probe: ``state * 2.0`` off
    by 1.29 at every call; one stream, running the graph's ops in order, was right). Prepared on
    the buffer, torch.export traced the buffer's write as the argument's, so a call with a copy
    wrote the copy and left the buffer as it was, under every option. Silent, each. A call whose
    tensors share memory with the model's parameters and buffers otherwise than the prepared
    call's now gets a program of its own, made as for inputs sharing memory with each other (not
    decomposed, their accesses kept in order)."""
    x = torch.linspace(-1.0, 2.0, 3 * 16).reshape(3, 16)
    ours, theirs = kind().eval(), kind().eval()
    with torch.no_grad():
        runtime = StaticModule(ours, (x, _state_or_copy(ours, prepared_with)), options).runtime()
        theirs.memory.copy_(ours.memory)  # preparing may have run the model
        for _ in range(2):
            got = runtime(x, _state_or_copy(ours, called_with))
            expected = theirs(x, _state_or_copy(theirs, called_with))
            for out, want in zip(got, expected):
                torch.testing.assert_close(out, want)
            torch.testing.assert_close(ours.memory, theirs.memory, rtol=0.0, atol=0.0)


class Step(nn.Module):
    """One step of a recurrence, called on its own output (``x = runtime(x)``): the projection's
    result is written where the output goes, then ``x`` is read again."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(x)) + x[:, :1]


@pytest.mark.parametrize("managed", [False, True])
@pytest.mark.parametrize("scheduler", ["one stream", "parallel_steps"])
def test_an_output_fed_back_into_its_runtime_is_refused_where_outputs_are_managed(managed, scheduler):
    """With ``manage_output_tensors`` a run writes its outputs into an arena the runtime owns, and
    an output of the run before lies there: given back as the input, the run wrote over it while it
    read it, and answered from half-overwritten values (the round's probe: 1.85 off after four steps
    of ``x = runtime(x)``, silently). It is now refused with a clear error; a copy of the output,
    or a runtime whose outputs are not managed, follows eager step by step."""
    torch.manual_seed(0)
    model = Step().eval()
    streams = {"scheduler": scheduler, "streams": 2} if scheduler == "parallel_steps" else {}
    options = StaticOptions(manage_output_tensors=managed, measure_choices=False, **streams)
    ours = theirs = torch.linspace(-1.0, 1.0, 4 * 16).reshape(4, 16)
    with torch.no_grad():
        runtime = StaticModule(model, (ours.clone(),), options).runtime()
        for _ in range(4):
            ours, theirs = runtime(ours.clone() if managed else ours), model(theirs)
            torch.testing.assert_close(ours, theirs)
        if managed:
            with pytest.raises(ManagedOutputInputError, match="input x is an output of this runtime's earlier run"):
                runtime(ours)


class SparseBuffer(nn.Module):
    """Holds a sparse adjacency as a buffer (as graph models do) and multiplies by it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("adjacency", torch.eye(4).to_sparse())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(self.adjacency, x) * 2


def test_a_sparse_buffer_has_no_storage_to_share_and_the_model_still_prepares():
    """Reading where each parameter and buffer's storage starts (to see a caller passing one)
    asked a sparse buffer for its storage, which torch refuses: such a model failed before
    capture with "Cannot access storage of SparseTensorImpl"."""
    model, x = SparseBuffer().eval(), torch.randn(4, 3)
    runtime = StaticModule(model, (x,), StaticOptions()).runtime()
    with torch.no_grad():
        torch.testing.assert_close(runtime(x), model(x))
