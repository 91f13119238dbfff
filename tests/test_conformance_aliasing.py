"""Aliasing as eager has it, under every option, decompose included: inputs that share memory
(the same tensor twice, views of one tensor), outputs that are or view inputs or each other, and
in-place writes to inputs. The ``conformance`` fixture checks outputs, the inputs after each call,
and which outputs overlap which inputs and outputs, against eager."""

from __future__ import annotations

import pytest
import torch

from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions


class WritesFirstReadsSecond(torch.nn.Module):
    def forward(self, x, y):
        x.add_(1)
        return x * y


class WritesAViewOfOne(torch.nn.Module):
    def forward(self, x, y):
        y.mul_(3)
        return x + 1


class ReturnsInputs(torch.nn.Module):
    def forward(self, x, y):
        return x, y.view(-1), x[0], x + y


class ReturnsAWrittenInput(torch.nn.Module):
    def forward(self, x, y):
        x.mul_(2)
        return x, x.view(-1), x[1:].t(), y + 1


class OutputsAliasEachOther(torch.nn.Module):
    def forward(self, x, y):
        z = x + y
        return z, z.view(-1), z, z[1:]


class WritesThroughAView(torch.nn.Module):
    def forward(self, x, y):
        x[0].add_(y[0])
        return x.sum(0) + y


def separate(rows: int, seed: int = 0) -> Inputs:
    generator = torch.Generator().manual_seed(seed)
    return Inputs.of(torch.randn(rows, 4, generator=generator), torch.randn(rows, 4, generator=generator))


def twice(rows: int, seed: int = 0) -> Inputs:
    tensor = torch.randn(rows, 4, generator=torch.Generator().manual_seed(seed))
    return Inputs.of(tensor, tensor)


def view_of_one(rows: int, seed: int = 0) -> Inputs:
    tensor = torch.randn(rows + 1, 4, generator=torch.Generator().manual_seed(seed))
    return Inputs.of(tensor, tensor[1:])


CASES = {
    "same-tensor-twice-written": (WritesFirstReadsSecond, twice),
    "written-separately": (WritesFirstReadsSecond, separate),
    "view-of-the-other-written": (WritesAViewOfOne, view_of_one),
    "returns-inputs": (ReturnsInputs, separate),
    "returns-inputs-shared": (ReturnsInputs, twice),
    "returns-a-written-input": (ReturnsAWrittenInput, separate),
    "outputs-alias-each-other": (OutputsAliasEachOther, separate),
    "writes-through-a-view": (WritesThroughAView, separate),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_aliasing_matches_eager(case, conformance, static_options):
    model_class, inputs = CASES[case]
    conformance(model_class(), inputs(3), inputs(5, seed=1), static_options)


@pytest.mark.parametrize("decompose", [True, False], ids=["core", "export"])
def test_the_same_tensor_twice_after_preparing_on_separate_ones(decompose, one_thread):
    """The reported case: prepared on separate tensors, then given one tensor twice, with an
    in-place write. The decomposed (functionalized) graph computes ``x * y`` from the old ``y``;
    the call gets a program of its own from the export-level graph, where the write is seen."""
    model = WritesFirstReadsSecond()
    module = StaticModule(model, separate(3), StaticOptions(decompose=decompose))
    runtime = module.runtime()
    for inputs in (twice(3), separate(3), twice(3)):
        got_inputs, want_inputs = inputs.clone(), inputs.clone()
        got, want = got_inputs.call(runtime), want_inputs.call(model)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_inputs.args[0], want_inputs.args[0])
    assert module.shapes_prepared == 2
    shared = module.prepared_for(twice(3))
    assert any(plan.kind == "aten::add_" for plan in shared.plans)  # the write is kept, not functionalized


def test_a_written_input_returned_is_the_input_itself_under_decompose(one_thread):
    inputs = separate(3)
    runtime = StaticModule(ReturnsAWrittenInput(), inputs.clone(), StaticOptions(decompose=True)).runtime()
    x, y = inputs.args
    out = runtime(x, y)
    assert out[0] is x and out[1].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    out[2].zero_()  # a view of the input: writing it writes the input, as in eager
    assert bool((x[1:] == 0).all())
