"""What a nineteenth round of models from outside the zoo broke (``benchmarks/outside_round19.py``:
accelerate's hooks, hand-written models and transformers architectures no earlier round built,
run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions
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


def test_a_copy_of_a_lazily_conjugated_or_negated_input_holds_its_values():
    """The protocol runs eager and srbench on copies of a call (``Inputs.clone``), made over a
    copy of each storage; a conjugated view's storage holds the values before conjugation, and
    the copy, a plain tensor over it, held their conjugate (the imaginary part of one, a negated
    view: its negation). Eager and srbench were both given the wrong values, alike, so the
    round's ``conj_neg_views`` passed without its bits reaching the runtime."""
    z = torch.randn(2, 3, dtype=torch.complex64)
    plain = torch.randn(2, 3, dtype=torch.complex64)
    copy = Inputs((z.conj(), z.conj().imag, z, plain), {}).clone()
    conjugated, negated, same, other = copy.args
    assert conjugated.is_conj() and negated.is_neg() and not same.is_conj() and not other.is_conj()
    for got, want in zip(copy.args, (z.conj(), z.conj().imag, z, plain)):
        assert torch.equal(got, want)
    assert (
        conjugated.untyped_storage().data_ptr() == same.untyped_storage().data_ptr() != z.untyped_storage().data_ptr()
    )


class Spectral(nn.Module):
    """``z.real`` (traced on a plain tensor and decomposed: ``view_as_real(z)``, which refuses a
    conjugated view) and a gain, as the round's ``conj_neg_views``."""

    def forward(self, z: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        return z.real * gain + z.imag


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_a_conjugated_or_negated_view_gets_a_program_of_its_own(decompose):
    """A program is found by its inputs' shapes, strides, dtypes and devices, which a lazy view
    shares with a plain tensor: prepared on plain tensors, a call passing ``z.conj()`` ran that
    program, and under ``decompose`` failed where eager answers ("view_as_real doesn't work on
    unresolved conjugated tensors"). The bits are now part of the key and the guard."""
    z, other = torch.randn(2, 8, dtype=torch.complex64), torch.randn(2, 8, dtype=torch.complex64)
    module = StaticModule(Spectral(), (z, other.real), StaticOptions(decompose=decompose))
    runtime = module.runtime()
    calls = ((z, other.real), (z.conj(), other.conj().imag), (z.conj(), other.real), (z, other.real))
    for call in calls:
        torch.testing.assert_close(runtime(*call), Spectral()(*call), rtol=0, atol=0)
    assert module.shapes_prepared == 3
