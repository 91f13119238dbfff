"""The order of keyword arguments a model can see is part of its program; the order of the others
is not (:class:`srbench.inputs.KeywordOrder`). srbench took every keyword in name order, so a
``forward(x, **parts)`` joining ``parts.values()`` answered ``model(x, b=b, a=a)`` with the
program of ``model(x, a=a, b=b)``: ``[x, a, b]`` where eager gives ``[x, b, a]``."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from torch import nn

from srbench.inputs import Inputs, KeywordOrder
from srbench.runtimes import RuntimeOptions, get_runtime
from srbench.runtimes.torchscript import CallMismatch
from srbench.static import StaticModule
from srbench.static.errors import InputSignatureError
from srbench.static.signature import InputSignature

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Joined(nn.Module):
    """Joins what ``**parts`` collects in its order, after ``x`` scaled by the named ``gain``."""

    def forward(self, x: torch.Tensor, *, gain: torch.Tensor, **parts: torch.Tensor) -> torch.Tensor:
        return torch.cat([x * gain, *parts.values()])


class Weighted(nn.Module):
    """Keyword-only parameters only: their order at a call cannot matter."""

    def forward(self, x: torch.Tensor, *, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return x + 2 * a - b


def _values() -> dict[str, torch.Tensor]:
    return {name: torch.full((2,), float(index)) for index, name in enumerate("xabcg")}


def test_keywords_collected_by_kwargs_run_in_the_order_called():
    """Every order of three collected keywords, with the named ``gain`` written anywhere among
    them, alternating on one runtime (the guard's fast path): each matches eager, and the orders
    that differ only in where ``gain`` stands share one program."""
    v = _values()
    model = Joined()
    module = StaticModule(model, Inputs.of(v["x"], gain=v["g"], a=v["a"], b=v["b"], c=v["c"]))
    runtime = module.runtime()
    orders = list(itertools.permutations("abc"))
    for _ in range(2):
        for order in orders:
            for gain_at in (0, 3):
                names = [*order[:gain_at], "gain", *order[gain_at:]]
                kwargs = {name: v["g" if name == "gain" else name] for name in names}
                torch.testing.assert_close(runtime(v["x"], **kwargs), model(v["x"], **kwargs), rtol=0, atol=0)
    assert module.shapes_prepared == len(orders)


def test_keywords_collected_in_a_moved_form_keep_the_call_order():
    """``x`` given by keyword is moved to the program's form by an adapter (the fast path for a
    form seen before): the collected keywords are passed on in the call's order, not the order
    the adapter was first made for."""
    v = _values()
    model = Joined()
    runtime = StaticModule(model, Inputs.of(v["x"], gain=v["g"], a=v["a"], b=v["b"])).runtime()
    for _ in range(3):
        for kwargs in ({"b": v["b"], "a": v["a"]}, {"a": v["a"], "b": v["b"]}):
            got = runtime(x=v["x"], gain=v["g"], **kwargs)
            torch.testing.assert_close(got, model(x=v["x"], gain=v["g"], **kwargs), rtol=0, atol=0)


def test_named_keywords_in_any_order_share_one_program():
    v = _values()
    model = Weighted()
    module = StaticModule(model, Inputs.of(v["x"], a=v["a"], b=v["b"]))
    runtime = module.runtime()
    for kwargs in ({"b": v["b"], "a": v["a"]}, {"a": v["a"], "b": v["b"]}):
        torch.testing.assert_close(runtime(v["x"], **kwargs), model(v["x"], **kwargs), rtol=0, atol=0)
    assert module.shapes_prepared == 1


def test_a_hook_given_the_keywords_sees_their_order():
    """A forward pre-hook registered ``with_kwargs`` is given the call's keyword dict: it may
    iterate it, so every keyword's order is the call's, named parameters' too."""

    def first_keyword_doubled(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        first = next(iter(kwargs))
        return args, {**kwargs, first: kwargs[first] * 2}

    v = _values()
    model = Weighted()
    model.register_forward_pre_hook(first_keyword_doubled, with_kwargs=True)
    runtime = StaticModule(model, Inputs.of(v["x"], a=v["a"], b=v["b"])).runtime()
    for _ in range(2):
        for kwargs in ({"b": v["b"], "a": v["a"]}, {"a": v["a"], "b": v["b"]}):
            torch.testing.assert_close(runtime(v["x"], **kwargs), model(v["x"], **kwargs), rtol=0, atol=0)
    assert KeywordOrder.of(model).seen(["b", "a"]) == ("b", "a")


def test_the_arrangement_sorts_named_keywords_and_keeps_collected_ones():
    order = KeywordOrder.of(Joined())
    arranged = order.arrange(Inputs.of(1, z=1, gain=2, y=3, b=4))
    assert list(arranged.kwargs) == ["gain", "z", "y", "b"]
    assert list(KeywordOrder.of(Weighted()).arrange(Inputs.of(1, b=1, a=2)).kwargs) == ["a", "b"]
    signature = InputSignature.of(Inputs.of(1, y=1, z=2), keyword_order=order)
    assert signature.key != InputSignature.of(Inputs.of(1, z=2, y=1), keyword_order=order).key
    assert signature.ordered_keywords == ("y", "z")


def test_a_call_the_model_refuses_in_another_order_names_the_order():
    """Where a call differing from the example only in its collected keywords' order cannot be
    prepared, the error says so, as it names missing or unexpected keywords."""

    class PairsOnly(nn.Module):
        def forward(self, x: torch.Tensor, **parts: torch.Tensor) -> torch.Tensor:
            first, second = parts.values()
            if first.shape[0] == 1:
                raise ValueError("the first part must hold more than one value")
            return x + first - second

    model = PairsOnly()
    runtime = StaticModule(model, Inputs.of(torch.ones(2), a=torch.ones(2), b=torch.ones(1))).runtime()
    with pytest.raises(InputSignatureError, match="given in the order b, a"):
        runtime(torch.ones(2), b=torch.ones(1), a=torch.ones(2))


def test_the_onnxruntime_peer_exports_a_session_per_order_the_model_sees():
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    v = _values()
    model = Joined()
    runtime = get_runtime("onnxruntime")(model, Inputs.of(v["x"], gain=v["g"], a=v["a"], b=v["b"]), RuntimeOptions())
    for kwargs in ({"b": v["b"], "a": v["a"]}, {"a": v["a"], "b": v["b"]}):
        torch.testing.assert_close(runtime(v["x"], gain=v["g"], **kwargs), model(v["x"], gain=v["g"], **kwargs))


def test_the_torchscript_peer_refuses_another_order_the_model_sees():
    """A trace is of one call: the order it was traced in runs, another is refused, not answered
    in the traced order."""
    v = _values()
    model = Joined()
    runtime = get_runtime("torchscript")(model, Inputs.of(v["x"], gain=v["g"], a=v["a"], b=v["b"]), RuntimeOptions())
    torch.testing.assert_close(
        runtime(v["x"], a=v["a"], gain=v["g"], b=v["b"]), model(v["x"], gain=v["g"], a=v["a"], b=v["b"])
    )
    with pytest.raises(CallMismatch, match="traced module takes calls shaped"):
        runtime(v["x"], gain=v["g"], b=v["b"], a=v["a"])


def test_an_own_call_given_the_keywords_sees_their_order():
    """A module's own ``__call__`` taking ``**kwargs`` is given them as the call wrote them."""

    class FirstScaled(Weighted):
        def __call__(self, x: torch.Tensor, **kwargs: torch.Tensor) -> torch.Tensor:
            first = next(iter(kwargs))
            return super().__call__(x, **{**kwargs, first: kwargs[first] * 3})

    v = _values()
    model = FirstScaled()
    runtime = StaticModule(model, Inputs.of(v["x"], a=v["a"], b=v["b"])).runtime()
    for _ in range(2):
        for kwargs in ({"b": v["b"], "a": v["a"]}, {"a": v["a"], "b": v["b"]}):
            torch.testing.assert_close(runtime(v["x"], **kwargs), model(v["x"], **kwargs), rtol=0, atol=0)


def _keyword_sum(forward):
    """A ``functools.wraps`` decorator adding the call's keyword values, each weighted by its place."""

    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        for place, value in enumerate(kwargs.values()):
            out = out + (place + 1) * value
        return out

    return wrapper


class Decorated(nn.Module):
    """``forward(x, a, b)`` names its parameters; the wrapper it is called through sees their order."""

    @_keyword_sum
    def forward(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return x + a * b


def test_a_forward_behind_a_wraps_decorator_sees_the_call_order():
    """``inspect.signature`` follows ``__wrapped__`` to ``forward(x, a, b)``, so srbench took ``a``
    and ``b`` as bound by name and answered ``model(x, b=b, a=a)`` with the program of
    ``model(x, a=a, b=b)`` (the round-24 model ``wraps_decorated_forward``), silently. The
    wrapper is what is called, and its ``**kwargs`` sees the order."""
    v = _values()
    model = Decorated()
    assert KeywordOrder.of(model).sees_every_order
    runtime = StaticModule(model, Inputs.of(v["x"], a=v["a"], b=v["b"])).runtime()
    for kwargs in ({"a": v["a"], "b": v["b"]}, {"b": v["b"], "a": v["a"]}):
        torch.testing.assert_close(runtime(v["x"], **kwargs), model(v["x"], **kwargs), rtol=0, atol=0)
