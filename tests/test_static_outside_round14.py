"""What a fourteenth round of models from outside the zoo broke (``benchmarks/outside_round14.py``:
lucidrains' attention, mixture and recurrent libraries, EGNN and the E(n)-transformer, torchcde,
pytorch-tcn, X-UNet and transformers architectures no earlier round built, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import static_options_id
from test_static_outside_round6 import OPTIONS, randn  # the sixth round's protocol
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class LeftContext(nn.Module):
    """A causal convolution's left padding as a streaming layer keeps it (pytorch-tcn's
    ``TemporalPad1d.pad_inference``): the last ``context`` steps of the previous chunk, in a
    buffer assigned anew in forward to a slice of this chunk's concatenation."""

    def __init__(self, channels: int, context: int) -> None:
        super().__init__()
        self.context = context
        self.register_buffer("buffer", torch.zeros(1, channels, context))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat((self.buffer, x), -1)
        self.buffer = x[..., -self.context :]
        return x


class StreamingConv(nn.Module):
    """A causal convolution streamed chunk by chunk, its left context a sub-module's buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = LeftContext(2, 2)
        self.conv = nn.Conv1d(2, 3, 3)

    def forward(self, chunk: torch.Tensor) -> torch.Tensor:
        return self.conv(self.pad(chunk))


def _chunks(*lengths: int) -> list[torch.Tensor]:
    return [randn(1, 2, length, seed=seed) for seed, length in enumerate(lengths)]


@pytest.mark.parametrize("options", OPTIONS, ids=static_options_id)
def test_a_streaming_layers_context_in_a_sub_modules_buffer_carries_over(options):
    """A sub-module's buffer assigned anew in forward was refused ("the forward assigns the
    buffer 'pad.buffer' anew ... torch.export's graph never writes it"): export writes such a
    buffer on the root module only, so every block-wise streaming model keeping its context
    the natural way (pytorch-tcn's streaming inference) could not be prepared. The graph now
    writes it as export writes the root's, and each chunk (lengths 4, 6, 4, 3) gives eager's
    output and leaves eager's context, a new tensor after each call."""
    model = StreamingConv()
    twin = copy.deepcopy(model)
    first = _chunks(4)[0]
    runtime = StaticModule(model, Inputs.of(first.clone()), options).runtime()
    assert not model.pad.buffer.any()  # preparing leaves it as it was
    for chunk in _chunks(4, 6, 4, 3):
        held = model.pad.buffer
        with torch.no_grad():
            expected = twin(chunk.clone())
        torch.testing.assert_close(runtime(chunk.clone()), expected)
        torch.testing.assert_close(model.pad.buffer, twin.pad.buffer, rtol=0, atol=0)
        assert model.pad.buffer is not held


class Parent(nn.Module):
    """Calls its one sub-module: the buffers below are a sub-module's, which export does not
    write when assigned anew."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


class AssignedTwice(nn.Module):
    """Assigns its buffer anew twice in one forward, reading it between: the graph must write
    the last value into the buffer the call was given, not into the first new one."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = self.state + x.sum(0)
        middle = self.state * 2
        self.state = self.state.flip(0) - 1
        return x + middle + self.state


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["defaults", "decompose"])
def test_a_sub_modules_buffer_assigned_twice_keeps_the_last_value(options):
    """The second assignment's value is the buffer's after the call, and the first one's is what
    forward read between them, at every call."""
    model = Parent(AssignedTwice())
    twin = copy.deepcopy(model)
    runtime = StaticModule(model, Inputs.of(randn(2, 3)), options).runtime()
    for seed in range(1, 4):
        with torch.no_grad():
            expected = twin(randn(2, 3, seed=seed))
        torch.testing.assert_close(runtime(randn(2, 3, seed=seed)), expected)
        torch.testing.assert_close(model.inner.state, twin.inner.state, rtol=0, atol=0)


class GrowingContext(nn.Module):
    """Assigns its buffer a longer tensor at every call: another shape, which the program cannot
    hold."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(1, 2, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = torch.cat((self.seen, x), -1)
        return self.seen.mean(-1)


def test_a_sub_modules_buffer_assigned_another_shape_is_still_refused():
    """Only a new value of the buffer's shape and dtype is written; a sub-module's buffer growing
    at every call is refused by name, as the root's is."""
    with pytest.raises(CaptureError, match=r"module 'inner' assigns its buffer 'seen' a tensor of another"):
        StaticModule(Parent(GrowingContext()), Inputs.of(randn(1, 2, 3)), StaticOptions())


def test_pytorch_tcns_streaming_inference_is_prepared():
    """The same on pytorch-tcn itself, as the round found it: a causal TCN's ``inference``
    (streaming, batch 1), chunk after chunk."""
    pytorch_tcn = pytest.importorskip("pytorch_tcn", reason="the pytorch-tcn extra is not installed")

    class Streaming(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tcn = pytorch_tcn.TCN(2, [4, 4], kernel_size=3, dropout=0.0, causal=True, use_skip_connections=True)

        def forward(self, chunk: torch.Tensor) -> torch.Tensor:
            return self.tcn.inference(chunk)

    torch.manual_seed(0)
    model = Streaming().eval()
    twin = copy.deepcopy(model)
    runtime = StaticModule(model, Inputs.of(_chunks(5)[0]), StaticOptions()).runtime()
    for chunk in _chunks(5, 7, 5):
        with torch.no_grad():
            expected = twin(chunk.clone())
        torch.testing.assert_close(runtime(chunk.clone()), expected, rtol=1e-5, atol=1e-6)
    for (name, got), (_, want) in zip(model.named_buffers(), twin.named_buffers()):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, msg=name)


class TableTotal(nn.Module):
    """Assigns its buffer anew through its ``_buffers`` table, past ``Module.__setattr__``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._buffers["total"] = self.total + x.sum(0)
        return x + self.total


def test_a_sub_modules_buffer_assigned_past_setattr_is_still_refused():
    """An assignment written into the module's table directly is seen by no hook, so the graph
    does not write it: the eager call still tells it, and it is refused by name as before."""
    with pytest.raises(CaptureError, match=r"assigns the buffer 'inner\.total' anew .* past `Module.__setattr__`"):
        StaticModule(Parent(TableTotal()), Inputs.of(randn(2, 3)), StaticOptions())
