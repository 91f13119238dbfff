"""What a twenty-first round of models from outside the zoo broke (``benchmarks/outside_round21.py``:
hand-written models and transformers architectures no earlier round built, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.static import StaticModule

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Trimmed(nn.Module):
    """The batch trimmed to its longest length read from a lengths tensor, as the round's
    ``item_as_int``: made a Python int by ``int()``, or left as ``.item()`` returns it."""

    def __init__(self, as_int: bool) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 8)
        self.as_int = as_int

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        longest = lengths.max().item()
        if self.as_int:
            longest = int(longest)
        return self.proj(x[:, :longest]).sum(1)


def test_a_value_made_a_python_int_is_refused_with_its_own_remedy():
    """``int(lengths.max().item())`` asks export for a concrete number; srbench's refusal read as
    a branch's ("to decide what to run ... write the branch with torch.cond"), which the model
    has none of. It now says a value read from a tensor was made a Python int, and that left as
    ``.item()`` returns it the value would do (the next test: srbench captures that)."""
    x, lengths = torch.randn(3, 8, 16), torch.tensor([3, 6, 5])
    with pytest.raises(CaptureError) as refused:
        StaticModule(Trimmed(as_int=True).eval(), (x, lengths))
    assert "a plain Python int" in refused.value.reason
    assert "leave the int() out" in refused.value.reason
    assert "torch.cond" not in refused.value.reason
    assert "int(longest)" in (refused.value.source or "")


def test_the_value_left_symbolic_is_captured():
    """What the refusal advises runs: the slice by the symbolic length is captured and agrees
    with eager at another batch and longest length."""
    model = Trimmed(as_int=False).eval()
    runtime = StaticModule(model, (torch.randn(3, 8, 16), torch.tensor([3, 6, 5]))).runtime()
    for x, lengths in ((torch.randn(3, 8, 16), torch.tensor([3, 6, 5])), (torch.randn(2, 8, 16), torch.tensor([2, 8]))):
        with torch.no_grad():
            torch.testing.assert_close(runtime(x, lengths), model(x, lengths))
