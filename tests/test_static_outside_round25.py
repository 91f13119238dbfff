"""What a twenty-fifth round of models from outside the zoo broke (``benchmarks/outside_round25.py``:
hand-written models no earlier round built, run by ``benchmarks/outside_models.py``), each as the
smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class ViewThenWritten(nn.Module):
    """A view of the caller's tensor taken, the tensor then written in place, the view returned
    (the round's ``sliced_input_view_then_written``)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat = x.reshape(-1, 16)
        x.mul_(2.0)
        return flat, x.transpose(0, 1)[1:]


def _laid_out(layout: str) -> torch.Tensor:
    """A (3, 5, 16) tensor of the same values laid out as a caller might pass it."""
    values = torch.arange(3 * 5 * 16, dtype=torch.float32).reshape(3, 5, 16)
    if layout == "contiguous":
        return values.clone()
    if layout == "sliced":  # rows 32 apart: buffer[..., :16]
        wide = torch.zeros(3, 5, 32)
        wide[..., :16] = values
        return wide[..., :16]
    return values.transpose(0, 1).contiguous().transpose(0, 1)  # reshape(-1, 16) copies it in eager


@pytest.mark.parametrize("layout", ["contiguous", "sliced", "transposed_batch"])
@pytest.mark.parametrize("decompose", [False, True])
def test_a_view_of_a_strided_input_written_after_is_a_view_of_the_input(layout, decompose):
    """Under ``decompose`` the functionalized graph makes the input's new value as a tensor of its
    own (contiguous) and copies it back; the output, a view of that tensor, was given back as the
    same view of the input only where the input was laid out as the new value. A sliced input's
    ``reshape`` came back a copy: right values, sharing memory with nothing, so the caller's next
    write to its tensor did not show in it as in eager's (the sweep: "outputs alias unlike
    eager's"). The view is now replayed on the input's own layout."""
    model = ViewThenWritten().eval()
    ours, theirs = _laid_out(layout), _laid_out(layout)
    with torch.no_grad():
        runtime = StaticModule(model, (_laid_out(layout),), StaticOptions(decompose=decompose)).runtime()
        got, expected = runtime(ours), model(theirs)
    for out, want in zip(got, expected):
        assert out.stride() == want.stride()
        shares = out.untyped_storage().data_ptr() == ours.untyped_storage().data_ptr()
        assert shares == (want.untyped_storage().data_ptr() == theirs.untyped_storage().data_ptr())
    ours.add_(100.0), theirs.add_(100.0)  # the caller writes its tensor after the call
    for out, want in zip(got, expected):
        torch.testing.assert_close(out, want, rtol=0.0, atol=0.0)
