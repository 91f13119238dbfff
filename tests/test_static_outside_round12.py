"""What a twelfth round of models from outside the zoo broke (``benchmarks/outside_round12.py``:
ncps, mambapy, torchsde, pyro, tab-transformer-pytorch, rtdl-revisiting-models,
vector-quantize-pytorch, local-attention, linear-attention-transformer, siren-pytorch and
pytorch-tabnet models, run by ``benchmarks/outside_models.py``), each as the smallest model that
shows it."""

from __future__ import annotations

import pytest
import torch
from test_static_outside_round6 import randn  # the sixth round's protocol
from torch import nn
from torch.distributions import Transform, constraints

from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule


class Affine(Transform, nn.Module):
    """A learnable transform as pyro writes its flows (``TransformModule``: a
    ``torch.distributions.Transform`` that is a module), caching its last input and output
    (``cache_size=1``: ``Transform.__call__`` and ``_inv_call`` write ``_cached_x_y`` at every
    call, and return the cached value where given the very tensor object cached)."""

    domain = constraints.real_vector
    codomain = constraints.real_vector
    bijective = True

    def __init__(self) -> None:
        super().__init__(cache_size=1)
        self.log_scale = nn.Parameter(randn(4, seed=5) * 0.1)
        self.shift = nn.Parameter(randn(4, seed=6))

    def __hash__(self) -> int:  # Transform defines ``__eq__`` as identity; modules must hash
        return nn.Module.__hash__(self)

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.log_scale.exp() + self.shift

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        return (y - self.shift) * (-self.log_scale).exp()

    def log_abs_det_jacobian(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.log_scale.expand_as(x).sum(-1)


class Flow(nn.Module):
    """A density and a sample through the transform: its inverse, its forward map, and the
    forward map of the inverse's output (read back from the cache, as eager does)."""

    def __init__(self) -> None:
        super().__init__()
        self.transform = Affine()

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        base = torch.distributions.Independent(torch.distributions.Normal(torch.zeros(4), 1.0, validate_args=False), 1)
        density = torch.distributions.TransformedDistribution(base, [self.transform], validate_args=False)
        inverse = self.transform.inv(x)
        return density.log_prob(x), self.transform(z), self.transform(inverse)


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["defaults", "decompose"])
def test_a_transforms_identity_cache_is_not_state_carried_from_call_to_call(options):
    """``torch.distributions.Transform``'s cache (``_cached_x_y``, written at every call when
    ``cache_size=1``) was read as state carried from call to call, so every pyro flow built of
    its transforms (``spline_coupling``, ``affine_coupling``: ``cache_size=1`` by default) was
    refused at prepare ("carries state from call to call in its attribute '_cached_x_y'"). The
    cache is read only where a call is given the very tensor object it holds: a later call's
    tensors are other objects (the program computes what eager's cache misses compute), so it is
    no state now; any other attribute of such a module still is."""
    model = Flow()
    runtime = StaticModule(model, Inputs.of(randn(2, 4), randn(2, 4, seed=1)), options).runtime()
    for batch, seed in ((2, 2), (5, 3)):
        x, z = randn(batch, 4, seed=seed), randn(batch, 4, seed=seed + 10)
        torch.testing.assert_close(runtime(x, z), model(x, z))
    x = randn(3, 4, seed=7)  # the same object twice: eager's second call reads its cache
    torch.testing.assert_close(runtime(x, x), model(x, x))
    torch.testing.assert_close(runtime(x, x), model(x, x))


def test_other_state_of_a_cached_transform_is_still_refused():
    """Only the cache is exempt: a counter the same module keeps is refused as before."""

    class Counting(Affine):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def _call(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return x * self.calls

    model = Flow()
    model.transform = Counting()
    with pytest.raises(CaptureError, match="'calls'"):
        StaticModule(model, Inputs.of(randn(2, 4), randn(2, 4, seed=1)), StaticOptions())


def test_a_tensor_a_cached_transform_carries_to_its_next_call_is_still_refused():
    """A tensor attribute of such a module that a call reads before writing (a running mean of
    its inputs) is state carried from call to call: read filled with NaN, it changes the answer."""

    class Running(Affine):
        def __init__(self) -> None:
            super().__init__()
            self.mean = torch.zeros(4)

        def _call(self, x: torch.Tensor) -> torch.Tensor:
            self.mean = 0.9 * self.mean + 0.1 * x.mean(0)
            return x - self.mean

    model = Flow()
    model.transform = Running()
    with pytest.raises(CaptureError, match="'mean'"):
        StaticModule(model, Inputs.of(randn(2, 4), randn(2, 4, seed=1)), StaticOptions())


def test_a_pyro_spline_flow_is_prepared():
    """The same on pyro itself, as the round found it: a spline coupling, a permutation and an
    affine coupling, ``log_prob`` and the forward map."""
    pyro = pytest.importorskip("pyro", reason="the pyro extra is not installed")
    transforms = pytest.importorskip("pyro.distributions.transforms", reason="the pyro extra is not installed")
    distributions = pytest.importorskip("pyro.distributions", reason="the pyro extra is not installed")

    class SplineFlow(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.spline = transforms.spline_coupling(4, count_bins=4)
            self.affine = transforms.affine_coupling(4, hidden_dims=[8])

        def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with pyro.validation_enabled(False):
                base = distributions.Normal(torch.zeros(4), torch.ones(4)).to_event(1)
                flow = distributions.TransformedDistribution(base, [self.spline, self.affine])
                return flow.log_prob(x), self.affine(self.spline(z))

    model = SplineFlow().eval()
    runtime = StaticModule(model, Inputs.of(randn(3, 4), randn(3, 4, seed=1)), StaticOptions()).runtime()
    for batch, seed in ((3, 2), (6, 3)):
        x, z = randn(batch, 4, seed=seed), randn(batch, 4, seed=seed + 10)
        torch.testing.assert_close(runtime(x, z), model(x, z), rtol=1e-4, atol=1e-4)
