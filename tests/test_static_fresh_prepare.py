"""srbench prepared first, on a freshly built model, as a user writes ``StaticModule(Build(), x)``:
the outside-models sweep's fresh order (``benchmarks/outside_models.py --order fresh``,
``benchmarks/outside_fresh.py``), and what it found, each on the smallest model that shows it."""

from __future__ import annotations

import itertools

import pytest
import torch
from test_static_outside_round6 import randn  # the sixth round's protocol
from torch import nn

from benchmarks.outside_fresh import sweep_fresh
from benchmarks.outside_models import Outcome, OutsideModel, sweep_one
from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule


def _randn(shape: int) -> Inputs:
    return Inputs((torch.randn(1 + 2 * shape, 4, generator=torch.Generator().manual_seed(shape)),), {})


class InitialisedFromData(nn.Module):
    """normflows' ActNorm pattern: a ``None`` buffer the first call fills from its input's
    values, which every later call reads (an initialisation from the data, not a cache)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scale is None:
            self.register_buffer("scale", 1 / x.abs().mean())
        return x * self.scale


def test_the_fresh_order_prepares_before_any_eager_call():
    """The sweep's own order calls eager first, which fills the buffer, and srbench accepts the
    model; the fresh order hands srbench a model no one called, whose first call srbench refuses
    to fix into the program (a later call on other inputs reads the example's scale where a
    first call on them makes its own)."""
    case = OutsideModel("scale_from_data", "a buffer filled from the first call's data", InitialisedFromData, _randn)
    assert not sweep_one(case, rounds=0, checks=["default"]).failed
    fresh = sweep_fresh(case, ["default"])
    assert fresh.checks["default"].outcome is Outcome.ERROR
    assert "the model's buffer 'scale' (None before)" in fresh.checks["default"].detail


class AlibiCache(nn.Module):
    """x-transformers' ``AlibiPositionalBias``: a ``None`` buffer that a call registers as a bias
    made from the length alone, registered again (larger) when a longer sequence comes, and
    sliced by every shorter or equal one."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("bias", None, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        if self.bias is None or self.bias.shape[-1] < n:
            positions = torch.arange(n, dtype=x.dtype)
            self.register_buffer("bias", -(positions[None, :] - positions[:, None]).abs(), persistent=False)
        return (x[..., None, :] + self.bias[-n:, -n:]).softmax(-1)


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["defaults", "decompose"])
def test_a_buffer_a_call_registers_as_a_cache_is_kept(options):
    """Prepared before any eager call (``StaticModule(Build(), x)``), a model registering a cache
    in forward (x-transformers' ALiBi, every model with ``alibi_pos_bias``) was refused ("the
    model's first call sets state that its later calls read: ... buffer 'bias' (None before)"),
    and, prepared after one, refused at a longer sequence ("assigns its buffer 'bias' a tensor of
    another dtype, shape or device"). Where later calls on other inputs give what a first call
    on them gives, and a second call leaves the buffer as the first made it, the buffer is a
    cache: prepare keeps what that call registers, as eager's call would, and the program reads
    it (lengths 3, 5, 3: made, made again larger, sliced)."""
    model, twin = AlibiCache(), AlibiCache()
    runtime = StaticModule(model, (randn(2, 3),), options).runtime()
    for length, seed in ((3, 1), (5, 2), (3, 3)):
        x = randn(2, length, seed=seed)
        with torch.no_grad():
            torch.testing.assert_close(runtime(x), twin(x), rtol=0, atol=0)


def test_x_transformers_alibi_is_prepared_fresh():
    """The same on x-transformers itself, prepared before any eager call, at two lengths."""
    x_transformers = pytest.importorskip("x_transformers", reason="the x-transformers extra is not installed")

    def build() -> nn.Module:
        torch.manual_seed(0)
        return x_transformers.Encoder(dim=16, depth=1, heads=2, alibi_pos_bias=True).eval()

    model, twin = build(), build()
    runtime = StaticModule(model, (randn(1, 4, 16),), StaticOptions()).runtime()
    for length, seed in ((4, 1), (7, 2), (4, 3)):
        x = randn(1, length, 16, seed=seed)
        with torch.no_grad():
            torch.testing.assert_close(runtime(x), twin(x))


class GrowingHistory(nn.Module):
    """A buffer registered anew, one row longer, at every call: state carried, not a cache."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(0, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.register_buffer("seen", torch.cat([self.seen, x[:1]]))
        return x * 2


def test_a_buffer_made_again_at_every_call_is_still_refused():
    """A buffer that a second call makes again is state carried from call to call (its shape
    moves at every call), which no program holds: refused, and the model left as it was."""
    model = GrowingHistory()
    with pytest.raises(CaptureError, match=r"buffer 'seen' a tensor of another dtype, shape or device"):
        StaticModule(model, (randn(2, 3),), StaticOptions())
    assert model.seen.shape == (0, 3)


def test_a_builder_not_deterministic_under_its_seed_is_said():
    """Two builds under one seed must be the same model, or the twin's answers are no reference:
    a builder drawing its weights from a generator of its own is named, not blamed on srbench."""
    seeds = itertools.count()

    def build() -> nn.Module:
        layer = nn.Linear(4, 4)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(4, 4, generator=torch.Generator().manual_seed(next(seeds))))
        return layer

    row = sweep_fresh(OutsideModel("unseeded", "weights from a generator of its own", build, _randn), ["default"])
    assert row.checks["default"].outcome is Outcome.ERROR
    assert row.checks["default"].detail == "builder not deterministic under its seed: weight differs between two builds"


def test_a_builder_drawing_from_pythons_random_is_built_alike():
    """Python's ``random`` is seeded with torch's for each build: a library choosing a layer's
    configuration by ``random.randrange`` (hyper-connections' residual stream, in
    tab-transformer-pytorch and local-attention) builds the same model twice, where its twins
    differed and the model was reported not deterministic."""
    import random

    def build() -> nn.Module:
        layer = nn.Linear(4, 4)
        with torch.no_grad():
            layer.bias.fill_(random.randrange(100))
        return layer

    row = sweep_fresh(OutsideModel("python_random", "a bias drawn by random.randrange", build, _randn), ["default"])
    assert row.checks["default"].outcome is Outcome.EQUIVALENT, row.checks["default"].detail


def test_a_builder_drawing_from_numpys_random_is_built_alike():
    """numpy's global generator is seeded too: FrEIA's ``AllInOneBlock`` draws its channel
    permutation by ``np.random.permutation`` (or scipy's ``special_ortho_group``), and its
    twins differed ("builder not deterministic under its seed: inn.module_list.0.w_perm")."""
    import numpy

    def build() -> nn.Module:
        layer = nn.Linear(4, 4)
        with torch.no_grad():
            layer.bias.copy_(torch.from_numpy(numpy.random.permutation(4)).float())
        return layer

    row = sweep_fresh(OutsideModel("numpy_random", "a bias drawn by np.random", build, _randn), ["default"])
    assert row.checks["default"].outcome is Outcome.EQUIVALENT, row.checks["default"].detail


def test_every_option_set_gets_an_instance_of_its_own():
    """Each option set is prepared on a model no one called: a model that counts its calls in a
    buffer would show a second preparation on a called instance."""
    built: list[nn.Module] = []

    def build() -> nn.Module:
        built.append(nn.Linear(4, 4))
        return built[-1]

    row = sweep_fresh(OutsideModel("linear", "one layer", build, _randn), ["default", "decompose", "plugin"])
    assert {name: check.outcome for name, check in row.checks.items()} == dict.fromkeys(
        ("default", "decompose", "plugin"), Outcome.EQUIVALENT
    )
    assert len(built) == 4  # the twin, then one per option set
