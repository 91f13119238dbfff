"""Calls whose inputs are named tuples, registered dataclasses and other registered containers:
the generated guard reads them one level at a time (their registered flatten) where it ran the
whole ``pytree.tree_flatten`` and compared specs, and still tells every other structure apart (a
program of its own, or a refusal where the model does not take it)."""

from __future__ import annotations

import collections
import dataclasses

import pytest
import torch
from torch import nn
from torch.utils import _pytree as pytree

from srbench.static import StaticModule
from srbench.static.errors import InputSignatureError

Box = collections.namedtuple("Box", ["low", "high"])
OtherBox = collections.namedtuple("OtherBox", ["low", "high"])


@dataclasses.dataclass
class Batch:
    tokens: torch.Tensor
    weights: torch.Tensor


@dataclasses.dataclass
class SubBatch(Batch):
    """A subclass: not registered, so pytree takes it for a leaf."""


pytree.register_dataclass(Batch)


class Keyed(dict):
    """A registered container whose context is its keys (as diffusers' outputs)."""


pytree.register_pytree_node(
    Keyed,
    pytree._dict_flatten,
    lambda values, keys: Keyed(zip(keys, values)),
    flatten_with_keys_fn=pytree._dict_flatten_with_keys,
)


class Structured(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(16, 4)

    def forward(self, batch: Batch, box: Box, extra: Keyed) -> torch.Tensor:
        h = self.embed(batch.tokens) * batch.weights.unsqueeze(-1)
        return h.clamp(box.low, box.high) + extra["bias"] * extra["scale"]


def _call(length: int = 5, **changes: object) -> tuple[object, ...]:
    generator = torch.Generator().manual_seed(length)
    batch = Batch(torch.randint(0, 16, (2, length), generator=generator), torch.rand(2, length, generator=generator))
    low = -torch.rand(4, generator=generator)
    parts = {
        "batch": batch,
        "box": Box(low, low + 1),
        "extra": Keyed(bias=torch.randn(4, generator=generator), scale=torch.rand(4, generator=generator)),
    }
    return tuple({**parts, **changes}.values())


@pytest.fixture
def runtime():
    torch.manual_seed(0)
    return StaticModule(Structured().eval(), _call(), name="structured").runtime()


def test_calls_of_the_prepared_structure_give_eagers_results(runtime):
    model = runtime.module.model
    for length in (5, 5, 7, 5):  # the fast path, a new shape prepared anew, back
        call = _call(length)
        with torch.no_grad():
            torch.testing.assert_close(runtime(*call), model(*call), rtol=0, atol=0)


@pytest.mark.parametrize(
    "changes, refused",
    [
        ({"box": OtherBox(torch.zeros(4), torch.ones(4))}, None),  # another named tuple of the same fields
        ({"box": (torch.zeros(4), torch.ones(4))}, "box must be a Box, got a tuple"),  # no .low
        (
            {"batch": SubBatch(torch.zeros(2, 5, dtype=torch.int64), torch.rand(2, 5))},
            "batch must be a Batch",
        ),  # a leaf
        ({"extra": Keyed(bias=torch.zeros(4), shift=torch.ones(4))}, "extra must be a Keyed"),  # another context (keys)
        ({"extra": Keyed(bias=torch.zeros(4))}, "extra must be a Keyed"),  # fewer children
        ({"extra": {"bias": torch.zeros(4), "scale": torch.ones(4)}}, None),  # a dict, not the registered class
        (
            {"batch": Batch((torch.zeros(2, 5, dtype=torch.int64),), torch.rand(2, 5))},
            r"batch.tokens must be a value, got a tuple",
        ),
    ],
    ids=["other_namedtuple", "tuple", "dataclass_subclass", "other_keys", "fewer_keys", "dict", "nested_tuple"],
)
def test_a_call_of_another_structure_gets_a_program_of_its_own_or_is_refused(runtime, changes, refused):
    """The guard tells each structure apart: one the model takes gets a program of its own, one
    it does not is refused naming the difference, and the runtime goes on serving either way."""
    runtime(*_call())
    model = runtime.module.model
    other = _call(**changes)
    if refused is None:
        with torch.no_grad():
            torch.testing.assert_close(runtime(*other), model(*other), rtol=0, atol=0)
        assert runtime.module.shapes_prepared == 2
    else:
        with pytest.raises(InputSignatureError, match=rf"{refused}.*and no program could be prepared"):
            runtime(*other)
        assert runtime.module.shapes_prepared == 1
    call = _call()
    with torch.no_grad():
        torch.testing.assert_close(runtime(*call), model(*call), rtol=0, atol=0)


def test_a_registered_flatten_is_applied_only_to_its_own_type(runtime):
    """A container's flatten is called only once its type matched: the dataclass' flatten on
    another object raised what the guard does not catch."""
    runtime(*_call())
    with pytest.raises(InputSignatureError):
        runtime(*_call(batch=Box(torch.zeros(2, 5, dtype=torch.int64), torch.rand(2, 5))))
