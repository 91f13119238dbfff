"""What an eighteenth round of models from outside the zoo broke (``benchmarks/outside_round18.py``:
libraries no earlier round used, hand-written models and transformers architectures no earlier
round built, run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.graph.capture import capture
from srbench.graph.module_snapshot import module_kept
from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class WithTraced(nn.Module):
    """A traced child (``torch.jit.trace``: a ``ScriptModule``, whose ``_parameters``,
    ``_buffers`` and ``_modules`` are views of the compiled object), as the round's
    ``torchscript_pieces`` has one."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.mlp = torch.jit.trace(nn.Sequential(nn.Linear(16, 4), nn.Tanh()).eval(), torch.randn(2, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(torch.relu(self.proj(x)))


def test_a_model_with_a_torchscript_child_is_given_back_after_a_trace():
    """Giving the model back after export's trace wrote every registration table again; a
    ScriptModule's tables refuse ``clear`` ("'OrderedDictWrapper' object has no attribute
    'clear'"), so a capture of any model with a traced or scripted child failed with it, after
    export itself had captured the model. Tables holding what they held are now left alone."""
    model = WithTraced().eval()
    with module_kept(model):
        pass
    assert set(dict(model.mlp.named_parameters())) == {"0.weight", "0.bias"}


def test_a_model_with_a_torchscript_child_runs_as_eager():
    """Through ``StaticModule`` as the sweep runs it: the first inputs, another batch, the
    first again, each as eager answers them."""
    model, x = WithTraced().eval(), torch.randn(3, 8)
    capture(model, (x,))
    runtime = StaticModule(model, (x,), StaticOptions()).runtime()
    for inputs in ((x,), (torch.randn(5, 8),), (x,)):
        with torch.no_grad():
            torch.testing.assert_close(runtime(*inputs), model(*inputs))


def test_a_librarys_tables_are_still_given_back():
    """What the snapshot is for stays: a buffer registered during a call is taken out again,
    a replaced parameter put back."""
    model = nn.Linear(2, 2)
    weight = model.weight
    with module_kept(model):
        model.register_buffer("added", torch.zeros(1))
        model.weight = nn.Parameter(torch.ones(2, 2))
    assert "added" not in model._buffers and model.weight is weight
