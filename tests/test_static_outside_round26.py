"""What a twenty-sixth round of models from outside the zoo broke (``benchmarks/outside_round26.py``:
hand-written models no earlier round built, run by ``benchmarks/outside_models.py``), each as the
smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class ReadThenWritten(nn.Module):
    """A linear layer reads the caller's tensor, which is then written in place (the round's
    ``inputs_expanded_then_sliced``)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.proj(x)
        x.mul_(0.5)
        return h, x.sum(1)


def _laid_out(layout: str) -> torch.Tensor:
    """A (3, 5, 16) tensor of the same values laid out as a caller might pass it."""
    values = torch.linspace(-2.0, 2.0, 3 * 5 * 16).reshape(3, 5, 16)
    if layout == "contiguous":
        return values.clone()
    if layout == "sliced":  # rows 40 apart, 8 in: buffer[..., 8:24]
        wide = torch.zeros(3, 5, 40)
        wide[..., 8:24] = values
        return wide[..., 8:24]
    return values.transpose(0, 1).contiguous().transpose(0, 1)


@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed_batch"])
@pytest.mark.parametrize("decompose", [False, True])
def test_a_written_input_read_through_views_is_read_in_its_own_layout(layout, decompose):
    """Under ``decompose`` the resolver ran the graph on copies of the inputs it writes, made by
    ``clone()``, which is contiguous for a sliced input: the linear layer's ``view`` of the input
    was planned as one ``as_strided`` with the copy's contiguous strides, so every call read the
    caller's sliced memory as if contiguous (another row's elements, no error; the sweep: output
    [0] differs from eager by 3.07). The copies now keep their tensors' layouts."""
    torch.manual_seed(0)
    model = ReadThenWritten().eval()
    ours, theirs = _laid_out(layout), _laid_out(layout)
    with torch.no_grad():
        runtime = StaticModule(model, (_laid_out(layout),), StaticOptions(decompose=decompose)).runtime()
        for _ in range(2):
            got, expected = runtime(ours), model(theirs)
            for out, want in zip(got, expected):
                torch.testing.assert_close(out, want)
            torch.testing.assert_close(ours, theirs, rtol=0.0, atol=0.0)
