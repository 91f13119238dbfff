"""Random draws: eager's numbers call after call, or a refusal that says why.

Ops given an explicit ``generator=`` are refused at capture, naming the op, the line, the
argument: ``torch.export`` lifts a copy of the generator, taken at capture time, into the program
(even of ``torch.default_generator``, and of a generator passed in as an argument, which the
program then does not read), so the program's numbers would not be eager's. The same ops drawing
from the global generator run and draw eager's numbers, call after call, and so do ops computing
from a draw alone (``torch.rand(3) * 2`` reads no input: it was folded to the numbers drawn at
prepare time).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions, UnsupportedOpError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class HeldNoise(nn.Module):
    """Draws from a generator it holds (``randn``)."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn(x.shape, generator=self.generator)


class HeldCoins(HeldNoise):
    """``bernoulli`` of its input, from a generator it holds."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bernoulli(x, generator=self.generator)


class InitInForward(HeldNoise):
    """An ``nn.init``-style call in forward, from a generator it holds."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = torch.empty(x.shape[-1], 3)
        nn.init.normal_(weight, generator=self.generator)
        return x @ weight


class DefaultGiven(nn.Module):
    """``torch.default_generator`` given explicitly: eager draws from the global generator."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bernoulli(x, generator=torch.default_generator)


@pytest.mark.parametrize(
    ("model_class", "op", "line"),
    [
        (HeldNoise, "randn", "torch.randn(x.shape, generator=self.generator)"),
        (HeldCoins, "bernoulli", "torch.bernoulli(x, generator=self.generator)"),
        (InitInForward, "normal_", "nn.init.normal_(weight, generator=self.generator)"),
        (DefaultGiven, "bernoulli", "torch.bernoulli(x, generator=torch.default_generator)"),
    ],
)
@pytest.mark.parametrize("decompose", [False, True])
def test_an_op_given_a_generator_is_refused_naming_the_op_and_line(model_class, op, line, decompose):
    """Refused before lowering, so the op named is the model's own (lowered, ``bernoulli``
    became ``rand``), with the model's line; the generators are left as they were."""
    model, x = model_class(), torch.rand(2, 4)
    own = model.generator.get_state() if hasattr(model, "generator") else None
    global_state = torch.get_rng_state()
    with pytest.raises(CaptureError, match=r"torch\.Generator given explicitly") as refusal:
        StaticModule(model, (x,), StaticOptions(decompose=decompose))
    message = str(refusal.value)
    if not isinstance(refusal.value.__cause__, NotImplementedError):  # torch 2.11's export refuses the
        # generator itself, before any op exists: the model's line is named, the op cannot be
        assert f"op '{op}' (aten.{op}." in message, message
    assert "test_static_random_draws.py:" in message, message
    assert line in message and "leave generator= out" in message, message
    assert torch.equal(torch.get_rng_state(), global_state)
    if own is not None:
        assert torch.equal(model.generator.get_state(), own)


class GeneratorArgument(nn.Module):
    def forward(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return torch.bernoulli(x, generator=generator)


@pytest.mark.parametrize(
    ("inputs", "where"),
    [
        (Inputs((torch.rand(3), torch.Generator())), "args[1]"),
        (Inputs((torch.rand(3),), {"generator": torch.Generator()}), "kwargs['generator']"),
    ],
)
def test_a_generator_passed_in_is_refused_naming_the_argument(inputs, where):
    """torch.export does not make the argument an input of the program (it lifts a copy, and every
    call would draw from that copy, whatever generator it is given): refused before export runs."""
    with pytest.raises(CaptureError, match=re.escape(f"argument {where} is a torch.Generator")):
        StaticModule(GeneratorArgument(), inputs)


class GlobalDraws(nn.Module):
    """The same draws from the global generator: ``randn``, ``bernoulli`` and ``normal_``, and
    values computed from draws alone (``rand(3) * 2``, ``bernoulli`` of a constant: lowered,
    ``rand`` then ``lt``), which read no input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = torch.empty(x.shape[-1], 3)
        nn.init.normal_(weight)
        coins = torch.bernoulli(torch.full((x.shape[0], 3), 0.5))
        return (x + torch.randn(x.shape)) @ weight + coins + torch.rand(3) * 2


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["default", "decompose"])
def test_the_same_draws_from_the_global_generator_give_eager_numbers_call_after_call(options):
    model, x = GlobalDraws(), torch.rand(2, 4)
    runtime = StaticModule(model, (x,), options).runtime()
    torch.manual_seed(5)
    with torch.no_grad():
        expected = [model(x) for _ in range(3)]
    torch.manual_seed(5)
    for call, want in enumerate(expected):
        torch.testing.assert_close(runtime(x), want, rtol=0, atol=0, msg=f"call {call}")


@torch.library.custom_op("srbench_test_draws::untagged_noise", mutates_args=())
def untagged_noise(x: torch.Tensor) -> torch.Tensor:
    """Draws, but was defined without the ``nondeterministic_seeded`` tag."""
    return x + torch.rand_like(x)


@torch.library.custom_op("srbench_test_draws::tagged_noise", mutates_args=(), tags=(torch.Tag.nondeterministic_seeded,))
def tagged_noise(x: torch.Tensor) -> torch.Tensor:
    """The same draw, tagged."""
    return x + torch.rand_like(x)


for _op in (untagged_noise, tagged_noise):
    _op.register_fake(torch.empty_like)


class CustomNoise(nn.Module):
    def __init__(self, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x) * 2


def test_a_custom_op_drawing_without_the_tag_is_refused_saying_so():
    """No candidate call of an untagged drawing op matches its own result; the refusal says the
    op answers otherwise on the same inputs and names the tag, which makes it run (below)."""
    with pytest.raises(UnsupportedOpError, match=r"answers otherwise when called again.*nondeterministic_seeded"):
        StaticModule(CustomNoise(untagged_noise), (torch.ones(3),))


def test_a_tagged_custom_op_draws_eagers_numbers_call_after_call():
    x = torch.ones(3)
    runtime, model = StaticModule(CustomNoise(tagged_noise), (x,)).runtime(), CustomNoise(tagged_noise)
    for seed in (3, 4):
        torch.manual_seed(seed)
        ours = runtime(x)
        torch.manual_seed(seed)
        torch.testing.assert_close(ours, model(x), rtol=0, atol=0)


class DrawsIntoSlices(nn.Module):
    """Draws into a slice of its input in place, then writes another slice (``uniform_`` and
    ``add_`` on ``x[..., a:b]``: strided, not contiguous)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x[..., 2:10].uniform_()
        x[..., 1:9].add_(1.0)
        return x.sum(-1)


def test_an_in_place_draw_into_a_slice_is_judged_on_the_slices_layout():
    """The resolver tries an in-place op's candidates on copies of what it writes; those copies
    were ``clone()``s, contiguous for a slice, and a drawing op's candidates are judged by the
    geometry of what they wrote, so every candidate failed on strides alone and ``uniform_`` kept
    its raw overload. The copies now keep the slice's layout, and the method is chosen."""
    module = StaticModule(DrawsIntoSlices(), (torch.rand(4, 16),), StaticOptions())
    labels = {plan.node.name: plan.call.label for plan in module.prepared.plans if plan.call is not None}
    assert labels["uniform_"] == "Tensor.uniform_", labels


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["default", "decompose"])
def test_in_place_draws_into_slices_are_eagers_and_land_in_the_callers_tensor(options):
    model, x = DrawsIntoSlices(), torch.rand(4, 16)
    runtime = StaticModule(model, (x.clone(),), options).runtime()
    ours, theirs = x.clone(), x.clone()
    torch.manual_seed(5)
    got = runtime(ours)
    torch.manual_seed(5)
    with torch.no_grad():
        expected = model(theirs)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
