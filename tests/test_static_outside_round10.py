"""What a tenth round of models from outside the zoo broke (``benchmarks/outside_round10.py``:
kornia, x-transformers, perceiver-pytorch, MONAI, PEFT, e3nn and torchdiffeq models, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from test_static_outside_round6 import randn  # the sixth round's protocol
from torch import nn

from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule


class NormalisedByAnElement(nn.Module):
    """kornia's ``get_perspective_transform`` (and every homography it normalises): a product
    divided by one of its own elements, ``h / h[..., 2:3, 2:3]``, then used."""

    def __init__(self, corner: int) -> None:
        super().__init__()
        self.corner = corner

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h = a @ b
        return (h / h[..., self.corner : self.corner + 1, self.corner : self.corner + 1]) + 1


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(cleanup_activations=False)],
                         ids=["default", "no_cleanup"])  # fmt: skip
@pytest.mark.parametrize(("batch", "corner"), [(1, 2), (2, 0)], ids=["refused", "silently-wrong"])
def test_an_op_is_not_written_over_an_input_that_another_argument_views(options, batch, corner):
    """An elementwise op whose input dies with it writes its result over that input; where
    another argument of the op is a view of the same storage (the divisor ``h[..., 2:3, 2:3]``),
    the out kernel writes elements that it reads later. ATen refuses the overlap where it sees it
    ("some elements of the input tensor and the written-to tensor refer to a single memory
    location": one element at batch 1; kornia's geometry failed so at every call under out
    variants), and where it does not (a strided view, batch 2) the result is silently wrong once
    the element read is written before the others (``h[..., :1, :1]``). Such an op now writes a
    tensor of its own."""
    model = NormalisedByAnElement(corner)
    call = Inputs.of(randn(batch, 3, 3), randn(batch, 3, 3, seed=1))
    runtime = StaticModule(model, call.clone(), options).runtime()
    for scale in (1.0, 2.0):
        a, b = call.args[0] * scale, call.args[1]
        torch.testing.assert_close(runtime(a, b), model(a, b))


def test_kornias_perspective_transform_runs_under_out_variants():
    """The same on kornia itself, as the round found it: ``get_perspective_transform`` of four
    point pairs at batch 1 (its closed form, then the division by the homography's last element)."""
    kornia = pytest.importorskip("kornia", reason="the kornia extra is not installed")

    class Perspective(nn.Module):
        def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return kornia.geometry.transform.get_perspective_transform(source, target) * 2

    square = torch.tensor([[[0.0, 0.0], [7.0, 0.0], [7.0, 7.0], [0.0, 7.0]]])
    model = Perspective()
    runtime = StaticModule(model, Inputs.of(square, square + randn(1, 4, 2) / 4)).runtime()
    for seed in (1, 2):
        target = square + randn(1, 4, 2, seed=seed) / 4
        torch.testing.assert_close(runtime(square, target), model(square, target))
