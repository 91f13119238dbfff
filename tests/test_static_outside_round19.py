"""What a nineteenth round of models from outside the zoo broke (``benchmarks/outside_round19.py``:
accelerate's hooks, hand-written models and transformers architectures no earlier round built,
run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule
from srbench.static.signature import ScalarLeaf

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Signed(nn.Module):
    """Where a zero's sign decides: ``atan2`` (pi or -pi), ``copysign`` and a division (inf or
    -inf), by a Python float, as the round's ``signed_zero_scalars``."""

    def forward(self, x: torch.Tensor, side: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (
            torch.atan2(torch.full_like(x, side), -x.abs() - 1),
            torch.copysign(x, torch.full_like(x, side)),
            1 / (x * 0 + side),
        )


def test_a_negative_zero_argument_gets_a_program_of_its_own():
    """A scalar is baked into its program, and programs were found by the scalar's value, by
    ``==`` (the module's table) and ``!=`` (the generated code's guard): ``0.0 == -0.0``, so a
    call passing ``-0.0`` ran the program prepared for ``0.0`` and answered pi for -pi, x's
    magnitude for its negation, inf for -inf. Each zero now has its program, one each."""
    x = torch.randn(2, 8)
    module = StaticModule(Signed(), (x, 0.0))
    runtime = module.runtime()
    for side in (0.0, -0.0, 0.0, -0.0):
        for got, want in zip(runtime(x, side), Signed()(x, side)):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert torch.equal(torch.signbit(got), torch.signbit(want))
    assert module.shapes_prepared == 2


@pytest.mark.parametrize(
    ("one", "other"),
    [(0.0, -0.0), (complex(1.0, 0.0), complex(1.0, -0.0)), (complex(0.0, 2.0), complex(-0.0, 2.0))],
    ids=["float", "complex_imaginary", "complex_real"],
)
def test_scalars_equal_by_value_but_of_zeros_of_two_signs_have_two_keys(one, other):
    """The same for a complex scalar's parts; equal scalars keep one key (a program each would
    be prepared for nothing)."""
    assert one == other
    assert ScalarLeaf(one).key != ScalarLeaf(other).key
    assert ScalarLeaf(one).key == ScalarLeaf(type(one)(one)).key
    assert ScalarLeaf(2.5).key == ScalarLeaf(2.5).key and ScalarLeaf(0).key == ScalarLeaf(0).key
