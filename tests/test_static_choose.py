"""The chooser's rule for out variants that cost more than the allocation they save."""

from __future__ import annotations

import pytest
import torch

from srbench.static.calls import Call
from srbench.static.choose import _out_is_slower
from srbench.static.resolve import Category, Resolution


def resolution(out_seconds: float, fallback_seconds: float, *, parses_schema: bool) -> Resolution:
    out = Call("aten.linear.out", torch.ops.aten.linear.out, (), out=("out",), parses_schema=parses_schema)
    fallback = Call("torch._C._nn.linear", torch._C._nn.linear, ())
    return Resolution(
        "linear",
        "aten::linear",
        Category.FUNCTIONAL,
        out=out,
        fallback=fallback,
        out_seconds=out_seconds,
        fallback_seconds=fallback_seconds,
    )


@pytest.mark.parametrize(
    ("out", "fallback", "parses_schema", "slower"),
    [
        (4.6e-3, 0.85e-3, True, True),  # linear.out on a transposed input: another, slow kernel
        (4.6e-3, 0.85e-3, False, True),  # even through a binding
        (1.2e-3, 1.0e-3, True, False),  # kernel-bound and within noise: no allocation wins
        (30e-6, 10e-6, True, True),  # overhead-bound through a raw overload
        (30e-6, 10e-6, False, False),  # a binding costs no more than the op itself
    ],
)
def test_out_variant_is_dropped_only_when_clearly_slower(out, fallback, parses_schema, slower):
    assert _out_is_slower(resolution(out, fallback, parses_schema=parses_schema)) is slower
