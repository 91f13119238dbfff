"""What a twenty-second round of models from outside the zoo broke (``benchmarks/outside_round22.py``:
hand-written models and transformers architectures no earlier round built, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwad
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Dual(nn.Module):
    """Forward-mode AD in ``forward``, as the round's ``forward_ad_dual``: the input made a dual
    number, a layer run on it, the primal and the tangent unpacked and returned."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, tangent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with fwad.dual_level():
            out = fwad.unpack_dual(torch.tanh(self.proj(fwad.make_dual(x, tangent))))
        return out.primal, out.tangent


@pytest.mark.parametrize("decompose", [False, True])
def test_forward_ad_whose_tangent_the_lowering_drops_is_refused(decompose):
    """Export captures the dual level as pre-dispatch calls; torch's retrace at the ATen level
    (which srbench runs such graphs through, as ``vmap``'s) and its lowering to core ATen keep no
    tangents, so the tangent output became ``None`` and srbench answered ``None`` where eager
    (under ``no_grad``) answers the directional derivative: a wrong answer, silently. A lowering
    that makes an output export traced as a tensor a constant is now refused, naming forward AD."""
    model, inputs = Dual().eval(), (torch.randn(2, 8), torch.randn(2, 8))
    with torch.no_grad():
        assert isinstance(model(*inputs)[1], torch.Tensor)  # eager's answer is the tangent
    with pytest.raises(CaptureError) as refused:
        StaticModule(model, inputs, StaticOptions(decompose=decompose))
    assert "makes the model's output(s) [1] None" in refused.value.reason
    assert "torch.autograd.forward_ad" in refused.value.reason


class Rewritten(nn.Module):
    """A ``__call__`` of its own that fills in ``forward``'s bias before ``nn.Module.__call__``,
    as the round's ``call_rewritten`` first did (the sweep's model now gives ``forward`` the
    arguments ``__call__`` takes, and runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 8)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return super().__call__(x / 2.0, torch.ones(8))

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.proj(x) + bias


def test_a_call_of_its_own_taking_other_arguments_than_forward_is_refused_so():
    """Export binds the call to ``forward``'s signature, and its ``TypeError`` ("missing a
    required argument: 'bias'") named an argument the user's call never had. The refusal now
    says the model's ``__call__`` takes other arguments than ``forward`` and what would do."""
    with pytest.raises(CaptureError) as refused:
        StaticModule(Rewritten().eval(), (torch.randn(2, 16),))
    assert "Rewritten has a __call__ of its own" in refused.value.reason
    assert "missing a required argument: 'bias'" in refused.value.reason
