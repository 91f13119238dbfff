"""Constants of a call declared with ``pytree.register_constant`` (a frozen dataclass of settings)
are baked into their program like scalars; programs were found by ``==`` on them (the call's
TreeSpec, the guard's ``!=``), so values that behave otherwise shared a program
(:mod:`srbench.static.value_keys`)."""

from __future__ import annotations

import dataclasses
import math
import struct

import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs
from srbench.static import StaticModule
from srbench.static.signature import InputSignature, ScalarLeaf
from srbench.static.value_keys import equality_suffices, value_key

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@dataclasses.dataclass(frozen=True)
class Settings:
    """Per-call settings: a side whose zero's sign decides, and a gain whose type does."""

    side: float
    gain: int | float | bool = 1


if Settings not in pytree.SUPPORTED_NODES:
    pytree.register_constant(Settings)


class Configured(nn.Module):
    """``1 / side`` (inf or -inf), ``atan2`` (pi or -pi); the gain multiplies an integer tensor
    (integers stay integers, a float makes floats) and ``is True`` branches."""

    def forward(self, x: torch.Tensor, counts: torch.Tensor, settings: Settings) -> tuple[torch.Tensor, ...]:
        scaled = counts * settings.gain
        flag = counts + 10 if settings.gain is True else counts
        return 1 / (x * 0 + settings.side), torch.atan2(torch.full_like(x, settings.side), -x.abs() - 1), scaled, flag


CALLS = [Settings(0.0), Settings(-0.0), Settings(0.0, 1.0), Settings(0.0, True), Settings(0.0), Settings(-0.0, True)]


def test_constants_that_behave_otherwise_get_programs_of_their_own():
    """``Settings(0.0) == Settings(-0.0) == Settings(0.0, 1.0) == Settings(0.0, True)``: each
    call ran the first one's program, answering inf for -inf, pi for -pi, integers for floats
    and no branch for ``True``. Each now has its program; a repeat finds its own."""
    x, counts = torch.randn(2, 3), torch.arange(6).reshape(2, 3)
    model = Configured()
    module = StaticModule(model, (x, counts, CALLS[0]))
    runtime = module.runtime()
    for settings in CALLS:
        got, want = runtime(x, counts, settings), model(x, counts, settings)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
            assert torch.equal(torch.signbit(a), torch.signbit(b))
    assert module.shapes_prepared == 5


def test_value_keys_tell_apart_what_equality_does_not_and_keep_what_it_does():
    assert Settings(0.0) == Settings(-0.0) and value_key(Settings(0.0)) != value_key(Settings(-0.0))
    assert value_key(Settings(1.0, 1)) != value_key(Settings(1.0, True)) != value_key(Settings(1.0, 1.0))
    assert value_key(Settings(2.5, 3)) == value_key(Settings(2.5, 3))
    nan, other_nan = float("nan"), struct_nan()
    assert value_key(Settings(nan)) == value_key(Settings(other_nan))  # NaN's payload: no op tells it
    assert value_key((0.0, [1, {"a": -0.0}])) != value_key((0.0, [1, {"a": 0.0}]))
    assert ScalarLeaf(float("nan")).key == ScalarLeaf(float("nan")).key
    # the guard checks a context's key only where ``==`` may miss a difference: numbers inside
    assert equality_suffices(("a", ("b", None))) and not equality_suffices(Settings(1.0)) and not equality_suffices([1])
    x = torch.randn(2)
    assert len({InputSignature.of(Inputs.of(x, settings)).key for settings in CALLS}) == 5


def struct_nan() -> float:
    """A NaN of another payload than ``float("nan")``'s."""
    value = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    assert math.isnan(value)
    return value


class DictForward(nn.Module):
    """Joins a dict's values in its order, and makes a tensor of each number key (its type
    decides the dtype): both baked into the program export traces through ``forward``."""

    def forward(self, parts: dict) -> tuple[torch.Tensor, ...]:
        keys = tuple(torch.full((), key) for key in parts if not isinstance(key, str))
        return (torch.cat(list(parts.values())), *keys)


def test_a_dicts_key_order_and_key_types_get_programs_of_their_own():
    """The guard looked a dict's keys up, so ``{"b": .., "a": ..}`` ran the program of
    ``{"a": .., "b": ..}`` (the values joined in the prepared order) and ``{True: ..}`` the one of
    ``{1: ..}`` (int64 for eager's bool). Each now has its program; a repeat finds its own."""
    a, b = torch.zeros(2), torch.ones(2)
    calls = [{"a": a, "b": b}, {"b": b, "a": a}, {1: a}, {True: a}, {1.0: a}, {"a": a, "b": b}, {True: a}]
    model = DictForward()
    module = StaticModule(model, (calls[0],))
    runtime = module.runtime()
    for parts in calls:
        for got, want in zip(runtime(parts), model(parts)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)  # dtypes too
    assert module.shapes_prepared == 5
    keys = {InputSignature.of(Inputs.of(parts)).key for parts in calls}
    assert len(keys) == 5
