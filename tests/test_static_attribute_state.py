"""A model carrying state from call to call in a plain Python attribute is refused at prepare time
(:mod:`srbench.graph.attribute_state`): ``torch.export`` bakes the attribute's capture-time value
into the program, which then gave other numbers than eager from the second call on, silently.
Attributes a forward assigns harmlessly (the same value, a list made anew from the same tensors,
an LSTM's own bookkeeping, a module called twice) are accepted, with eager's numbers."""

from __future__ import annotations

import weakref

import pytest
import torch
from torch import nn

from srbench.graph import CaptureError
from srbench.options import StaticOptions
from srbench.static import StaticModule


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class CountedScale(nn.Module):
    """A call counter used in the computation: eager's n-th call scales by n."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * self.calls


class DoublingScale(nn.Module):
    """``self.scale = self.scale * 2``, in a sub-module."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self.inner.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.inner.scale = self.inner.scale * 2
        return self.inner(x) * self.inner.scale


class UnusedCounter(nn.Module):
    """Counts its calls but never reads the count: no number changes, the state does."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.linear(x)


class KeptInput(nn.Module):
    """Adds the previous call's input, kept as an attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.last: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x if self.last is None else x + self.last
        self.last = x
        return out


class History(nn.Module):
    """Appends to a list it keeps (the list object stays the same, its items do not)."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.history.append(len(self.history))
        return x * len(self.history)


@pytest.mark.parametrize(
    ("model_class", "attribute"),
    [
        (CountedScale, "'calls': 1 after one call, 2 after a second"),
        (DoublingScale, "module 'inner' carries state from call to call in its attribute 'scale': 2.0 after one"),
        (UnusedCounter, "'calls'"),
        (KeptInput, "'last': a tensor"),
        (History, "'history': \\[0\\] after one call, \\[0, 1\\]"),
    ],
)
def test_state_carried_in_an_attribute_is_refused_and_the_model_left_as_it_was(model_class, attribute):
    """The refusal names the module, the attribute and its values after one and two calls. The
    unused counter is refused as well: it is state all the same, which no captured program holds
    (the model's next version may read it), and telling whether forward reads it would take more
    than comparing calls. The model's attributes are put back as they were."""
    model = model_class()
    before = {path: dict(vars(module)) for path, module in model.named_modules()}
    history = list(getattr(model, "history", []))
    with pytest.raises(CaptureError, match=attribute):
        StaticModule(model, (randn(2, 3),), StaticOptions())
    assert {path: dict(vars(module)) for path, module in model.named_modules()} == before
    assert list(getattr(model, "history", [])) == history


class SameFlag(nn.Module):
    """Sets a flag to the value it has (as transformers' hooks set theirs) and re-makes a list
    of the same tensors (as an LSTM its ``_flat_weights``)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.use_cache = False
        self.weights = [self.linear.weight, self.linear.bias]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.use_cache = False
        self.weights = [self.linear.weight, self.linear.bias]
        return nn.functional.linear(x, *self.weights)


class SettledOnce(nn.Module):
    """A flag the first call sets for good and a length taken from the input's shape (RWKV's
    ``layers_are_rescaled``, Funnel's ``seq_len``): each call writes before it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.rescaled = False
        self.seq_len: int | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.rescaled:
            self.rescaled = True
        self.seq_len = x.shape[1]
        return x * 2 + self.seq_len


class TwiceAndLSTM(nn.Module):
    """One Linear called twice, under two names, and an LSTM."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = self.first
        self.lstm = nn.LSTM(4, 5, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.second(self.first(x)))
        return out


class _Doubler:
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class WeakHelper(nn.Module):
    """Keeps a weak reference to a helper it makes anew once the last one has died, as torch
    2.11's ``Transform.inv`` does (a new inverse and a new weak reference at every call, both dead
    after it): read as state carried from call to call, every flow calling ``t.inv`` was refused
    on torch 2.11, as a GPU machine's run showed."""

    def __init__(self) -> None:
        super().__init__()
        self._helper: weakref.ref[_Doubler] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        helper = self._helper() if self._helper is not None else None
        if helper is None:
            helper = _Doubler()
            self._helper = weakref.ref(helper)
        return helper(x)


@pytest.mark.parametrize("model_class", [SameFlag, SettledOnce, TwiceAndLSTM, WeakHelper])
def test_harmless_attribute_writes_are_accepted_with_eager_numbers(model_class):
    """Accepted, equal to eager at every call, and the model left as it was (the settled flag
    is ``False`` again: the user's first eager call finds what it would have found)."""
    model = model_class().eval()
    before = {path: dict(vars(module)) for path, module in model.named_modules()}
    x = randn(2, 3, 4)
    runtime = StaticModule(model, (x,), StaticOptions()).runtime()
    assert {path: dict(vars(module)) for path, module in model.named_modules()} == before
    for _ in range(3):
        with torch.inference_mode():
            expected = model(x.clone())
        torch.testing.assert_close(runtime(x.clone()), expected, rtol=0, atol=0)


class OwnNoise(nn.Module):
    """Draws from a generator it holds and counts its calls in a buffer written in place."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(3)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return x + torch.randn(x.shape, generator=self.generator)


def test_the_eager_calls_leave_buffers_and_generators_as_they_were():
    """Preparing calls the model in eager: its buffer written in place, its own generator and the
    global one are put back (the model itself is refused for its generator, at capture)."""
    model = OwnNoise()
    generator_state, global_state = model.generator.get_state(), torch.get_rng_state()
    with pytest.raises(CaptureError, match=r"torch\.Generator"):
        StaticModule(model, (randn(2, 3),), StaticOptions())
    assert torch.equal(model.generator.get_state(), generator_state)
    assert torch.equal(torch.get_rng_state(), global_state)
    assert model.count.item() == 0


class WritesItsParameters(nn.Module):
    """Writes its own tensors in place as some forwards do: a parameter under ``no_grad``, a view
    of another, a buffer as an ``out=`` argument; one parameter is only read."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(4))
        self.shift = nn.Parameter(torch.zeros(4))
        self.kept = nn.Parameter(torch.full((4,), 3.0))
        self.register_buffer("last", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.scale.mul_(2)
            self.shift[1:].add_(1)
        torch.mul(x, self.kept, out=self.last)
        return x * self.scale + self.shift + self.last


def test_preparing_leaves_the_parameters_a_forward_writes_as_they_were():
    """The eager call preparing makes is not one of the user's calls: parameters and buffers it
    wrote are put back (before, the parameters kept the write), so the prepared program's calls
    give what eager's calls give on a model as it was built."""
    torch.manual_seed(0)
    model, twin = WritesItsParameters(), WritesItsParameters()
    x = randn(4)
    runtime = StaticModule(model, (x,), StaticOptions()).runtime()
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, twin.state_dict()[name], rtol=0, atol=0, msg=name)
    for _ in range(3):
        with torch.no_grad():
            expected = twin(x.clone())
        torch.testing.assert_close(runtime(x.clone()), expected, rtol=0, atol=0)
