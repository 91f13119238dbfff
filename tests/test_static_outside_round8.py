"""What an eighth round of models from outside the zoo broke (``benchmarks/outside_round8.py``,
run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from test_static_outside_round6 import randn  # the sixth round's protocol
from torch import nn

from srbench.inputs import Inputs
from srbench.runtimes import UnsupportedRuntime, get_runtime


class SparseArgument(nn.Module):
    def forward(self, adjacency: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(adjacency, x)


def test_a_sparse_argument_is_an_expected_failure_through_the_plugin():
    """The static runtime takes dense tensors as inputs and refuses a sparse one at prepare time
    with an ``InputSignatureError`` naming it. Through the runtime plugin that error reached a
    suite as a failed case (``sparse_coo_input`` in a suite), where a model a runtime cannot take
    is an expected failure with the reason: the plugin raises ``UnsupportedRuntime`` now."""
    adjacency = torch.eye(3).to_sparse()
    with pytest.raises(UnsupportedRuntime, match="input adjacency is a sparse_coo tensor"):
        get_runtime("srbench")(SparseArgument(), Inputs.of(adjacency, randn(3, 2)))
