"""What a seventeenth round of models from outside the zoo broke (``benchmarks/outside_round17.py``:
lucidrains' and others' libraries no earlier round used, five hand-written models and transformers
architectures no earlier round built, run by ``benchmarks/outside_models.py``), each as the
smallest model that shows it."""

from __future__ import annotations

import functools
from typing import ClassVar

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

from srbench.graph.capture import capture

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@functools.lru_cache(maxsize=1)
def _decay(length: int) -> torch.Tensor:
    """yet-another-retnet's pattern: a tensor built from a size, memoised for the last size."""
    return torch.linspace(1.0, 0.5, length)


class Decayed(nn.Module):
    """Scales the last axis by the memoised decay of its length, and by a cached table of a
    static method (the other place libraries keep such caches)."""

    @staticmethod
    @functools.cache
    def table(width: int) -> torch.Tensor:
        return torch.arange(width, dtype=torch.float32) / width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * _decay(x.shape[-1]) + self.table(x.shape[-1])


def _clear() -> None:
    _decay.cache_clear()
    Decayed.table.cache_clear()


def _expected(x: torch.Tensor) -> torch.Tensor:
    width = x.shape[-1]
    return x * torch.linspace(1.0, 0.5, width) + torch.arange(width, dtype=torch.float32) / width


def test_a_capture_leaves_no_fake_tensor_in_a_librarys_function_cache():
    """The round's ``retnet_chunkwise`` (yet-another-retnet memoises its decay masks with
    ``functools.lru_cache``): a capture filled the caches with export's ``FakeTensor``s, and eager's
    next call of the model answered a ``FakeTensor`` (the sweep stopped on it, comparing fake
    tensors). srbench's capture now clears each cache of the model's packages that missed during
    it."""
    _clear()
    model, x = Decayed().eval(), torch.randn(2, 5)
    capture(model, (x,))
    with torch.no_grad():
        out = model(x)
    assert not isinstance(out, FakeTensor)
    torch.testing.assert_close(out, _expected(x))


_TABLES: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


class Tabled(nn.Module):
    """The same cache written by hand, as rotary embeddings often keep theirs: a module-level dict
    of ``(cos, sin)`` tables by length, and a class-level dict of scales."""

    scales: ClassVar[dict[int, torch.Tensor]] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        if length not in _TABLES:
            angles = torch.linspace(0.0, 1.0, length)
            _TABLES[length] = (angles.cos(), angles.sin())
            Tabled.scales[length] = angles.exp()
        cos, sin = _TABLES[length]
        return x * cos * Tabled.scales[length] + sin


def test_a_capture_leaves_no_fake_tensor_in_a_librarys_dict_cache():
    """A dict filled under export's fake tensors kept them as the ``lru_cache`` did: the
    capture's entries holding a ``FakeTensor`` are now taken out (the next call fills them
    again), the entries eager made are kept."""
    _TABLES.clear()
    Tabled.scales.clear()
    model, x = Tabled().eval(), torch.randn(2, 6)
    with torch.no_grad():
        model(torch.randn(2, 4))
    kept = _TABLES[4]
    capture(model, (x,))
    assert set(_TABLES) == {4} and _TABLES[4] is kept and set(Tabled.scales) == {4}
    with torch.no_grad():
        out = model(x)
    angles = torch.linspace(0.0, 1.0, 6)
    torch.testing.assert_close(out, x * angles.cos() * angles.exp() + angles.sin())


def test_the_sweeps_export_probe_leaves_the_caches_as_they_were():
    """The sweep asks plain ``torch.export`` first whether it captures the model at all; that
    probe filled the cache too, right before the sweep's eager calls (the drift check's, which
    compared ``FakeTensor``s and stopped the sweep). The probe now keeps the caches and the model
    as srbench's capture keeps them."""
    from benchmarks.outside_models import _call, _export_refusal

    _clear()
    model, x = Decayed().eval(), torch.randn(3, 7)
    assert _export_refusal(model, _call(x)) is None
    with torch.no_grad():
        out = model(x)
    assert not isinstance(out, FakeTensor)
    torch.testing.assert_close(out, _expected(x))


def test_retnet_chunkwise_and_eager_after_it():
    """The round's own model, with the library (skipped where the ``retnet`` extra is not
    installed): srbench agrees with eager at both shapes, and eager's calls after srbench's
    preparations give real tensors."""
    pytest.importorskip("yet_another_retnet", reason="yet-another-retnet (the `retnet` extra) is not installed")
    from benchmarks.outside_models import Outcome, sweep_one
    from benchmarks.outside_round17 import seventeenth_round

    case = next(case for case in seventeenth_round() if case.name == "retnet_chunkwise")
    row = sweep_one(case, 0, checks=("default",))
    assert row.checks["default"].outcome is Outcome.EQUIVALENT, row
    model, call = case.build().eval(), case.make_inputs(1)
    with torch.no_grad():
        logits, states = model(*call.args, **call.kwargs)
    assert not any(isinstance(tensor, FakeTensor) for tensor in (logits, *states))
