"""What a third round of models from outside the zoo broke (``benchmarks/outside_models.py``'s
``_third_round``: dtypes and layouts of whole models, parametrizations, shared parameters,
containers and enums in and out, aliases of inputs, strided inputs, integer arithmetic, sizes
that depend on the data, state written in forward, ``torch.cond``), each as the smallest model
that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.options import StaticOptions


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Selected(nn.Module):
    """Boolean-mask indexing and nonzero: result sizes that depend on the data (unbacked symbols)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(randn(1, 16, seed=2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        picked = x[x > 0]
        return (picked[:, None] @ self.weight).relu(), torch.nonzero(x)


@pytest.mark.parametrize("streams", [2, 4])
def test_sizes_that_depend_on_the_data_on_several_streams(conformance, streams):
    """The schedulers' cost model counted an op's bytes as ``numel * itemsize`` of its fake
    values: with an unbacked size that is a symbolic expression, and comparing estimated times
    guarded on the data and failed ('Could not guard on data-dependent expression'): every model
    with boolean-mask indexing, ``nonzero`` or ``unique`` failed to prepare under ``streams``. Such
    a size counts at its proved upper bound now, as the memory estimate counts it."""
    conformance(Selected(), (randn(4, 8),), (randn(3, 5, seed=1),), StaticOptions(streams=streams))
