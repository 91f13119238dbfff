"""Regression tests for what the extended OpInfo sweep found (``tests/test_conformance_opinfo.py``
with ``SRBENCH_OPINFO_SWEEP=full``; README, "Op by op"): each a small model of one finding, under
the protocol of ``conformance``."""

from __future__ import annotations

import re

import pytest
import torch

from srbench.graph import CaptureError
from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions, UnsupportedOpError
from srbench.static.resolve import ResultCheck


class NativeBatchNorm(torch.nn.Module):
    """``torch.native_batch_norm`` in training mode, on statistics the caller passes: the op
    updates them in place, though its schema marks no argument written."""

    def forward(self, x, running_mean, running_var, momentum: float):
        out, mean, invstd = torch.native_batch_norm(x, None, None, running_mean, running_var, True, momentum, 1e-5)
        return out, mean, invstd, running_mean * 2


def test_a_second_program_leaves_statistics_native_batch_norm_updates_to_the_call(conformance):
    # the second call (another momentum, so another program, prepared at that call) must update
    # the caller's statistics once, as eager does: preparing probed the op on them as well
    stats = torch.randn(4), torch.rand(4) + 0.5
    first = Inputs.of(torch.randn(3, 4), *stats, 0.1)
    second = Inputs.of(torch.randn(3, 4), *stats, 0.3)
    conformance(NativeBatchNorm(), first, second, StaticOptions())


class SplitAtTensor(torch.nn.Module):
    """``tensor_split`` at indices held in a tensor: its pieces' sizes depend on the data, one
    of them without a bound torch can prove."""

    def forward(self, x, indices):
        return torch.tensor_split(x, indices)


def test_pieces_of_unbounded_size_are_scheduled_on_two_streams(conformance):
    # the cost model read torch's unbounded integer (int_oo), which calls itself finite, as a
    # number of bytes: sympy raised an AttributeError while the multistream program was prepared
    options = StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False)
    first = Inputs.of(torch.randn(10, 3), torch.tensor([2, 5]))
    second = Inputs.of(torch.randn(12, 3), torch.tensor([1, 7]))
    conformance(SplitAtTensor(), first, second, options)


class Take(torch.nn.Module):
    def forward(self, x, index):
        return torch.take(x, index)


def test_a_lowering_torch_fails_on_is_refused_naming_the_lowering_not_the_model():
    # torch 2.13's decomposition of take reads a 0-d index's value; the model's own code does not,
    # and without decompose it runs: the refusal used to blame the model's Python (torch 2.14's
    # decomposition reads no value: there the model runs under decompose too)
    example = (torch.tensor(2.0), torch.tensor(0))
    try:
        StaticModule(Take(), example, StaticOptions(decompose=True))
    except CaptureError as refusal:
        assert re.search(r"torch's lowering to core ATen \(decompose=True\) failed.* in take", str(refusal)), refusal
        options = [StaticOptions()]
    else:
        options = [StaticOptions(), StaticOptions(decompose=True)]
    for chosen in options:
        assert StaticModule(Take(), example, chosen).runtime()(torch.tensor(3.0), torch.tensor(0)) == 3


def test_resize_is_checked_by_geometry_only():
    # the elements resize_ adds are left as the memory was, in eager and in srbench alike
    x = torch.randn(2)
    assert ResultCheck.of(torch.ops.aten.resize_.default, lambda: x.clone().resize_(4), ()) is ResultCheck.GEOMETRY
    assert ResultCheck.of(torch.ops.aten.resize_as_.default, lambda: x.clone().resize_(4), ()) is ResultCheck.GEOMETRY


class Max(torch.nn.Module):
    def forward(self, x):
        return torch.max(x)


def test_an_op_eager_refuses_is_refused_though_an_out_kernel_of_it_runs():
    # max of an empty tensor raises in eager; its out kernel (max.unary_out) skips the check and
    # returned -inf, which srbench gave as the answer (found with the inputs made zero-size)
    empty = torch.empty(0, 3)
    with pytest.raises(RuntimeError, match="Expected reduction dim"):
        Max()(empty)
    with pytest.raises(UnsupportedOpError, match="Expected reduction dim"):
        StaticModule(Max(), (empty,))
    runtime = StaticModule(Max(), (torch.ones(2, 3),)).runtime()
    with pytest.raises(UnsupportedOpError, match="Expected reduction dim"):  # a program of its own
        runtime(empty)
    x = torch.randn(2, 3)
    assert runtime(x) == x.max()


class MaskedSelect(torch.nn.Module):
    def forward(self, x, mask):
        return torch.masked_select(x, mask)


def test_a_failing_check_of_torch_exports_own_is_named_as_such():
    # every-sample sweep: masked_select with a mask broadcast larger than its input; export
    # bounds the data-dependent result size by the input's and its own program fails the check
    x, mask = torch.randn(5), torch.ones(3, 5, dtype=torch.bool)
    assert MaskedSelect()(x, mask).shape == (15,)
    with pytest.raises(UnsupportedOpError, match=r"runtime check torch\.export put in the graph") as raised:
        StaticModule(MaskedSelect(), (x, mask))
    assert raised.value.op.startswith("aten::_assert") and "Runtime assertion failed" in str(raised.value)
