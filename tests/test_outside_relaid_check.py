"""The outside-models sweep's inputs-in-other-layouts check (``benchmarks/outside_relaid.py``): a
model srbench answers rightly passes, a runtime that ignores its caller's strides is caught, and a
model that refuses a layout in eager is not applicable, not wrong."""

from __future__ import annotations

import torch
from torch import nn

from benchmarks.outside_models import CHECKS, Outcome, OutsideModel, check_named
from benchmarks.outside_relaid import LAYOUTS, check_runtime_relaid, relaid, relaid_answers
from srbench.inputs import Inputs
from srbench.measure.equivalence import eager_answer


class ScaleInPlace(nn.Module):
    """Writes its image argument in place and returns a channel mix of it, beside an id argument."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Conv2d(3, 4, 1)

    def forward(self, image: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        image.mul_(2.0)
        return self.mix(image) + ids.float().sum()


class Tangent(nn.Module):
    """A ``jvp`` of a ``jvp`` along a tangent written in place (round 19's ``func_derivatives``,
    smaller): eager runs it on every layout, ``torch.export`` fails on a sliced argument."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        along = torch.zeros_like(points)
        along[:, 0] = 1

        def u_x(where: torch.Tensor) -> torch.Tensor:
            return torch.func.jvp(self.net, (where,), (along,))[1]

        return torch.func.jvp(u_x, (points,), (along,))[1]


class FlatView(nn.Module):
    """``view(-1)`` of its argument: eager refuses it on a transposed or sliced tensor."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(-1) * 2


def _case(name: str, build, make) -> OutsideModel:  # type: ignore[no-untyped-def]
    return OutsideModel(name, name, build, make)


def _image_inputs(shape: int) -> Inputs:
    generator = torch.Generator().manual_seed(shape)
    return Inputs.of(torch.randn(1 + shape, 3, 5, 6, generator=generator), torch.arange(4).reshape(2, 2))


def _answers(model: nn.Module):  # type: ignore[no-untyped-def]
    answers, refused = relaid_answers(model, [_image_inputs(0), _image_inputs(1)])
    assert set(answers) == set(LAYOUTS) and not refused
    return answers


def test_relaid_keeps_values_changes_floating_strides_and_leaves_ids_alone():
    call = _image_inputs(0)
    for name, layout in LAYOUTS.items():
        other, changed = relaid(call, layout)
        assert changed == 1, name
        torch.testing.assert_close(other.args[0], call.args[0], rtol=0, atol=0)
        assert other.args[0].stride() != call.args[0].stride(), name
        assert other.args[1] is call.args[1]
    sliced, _ = relaid(call, LAYOUTS["sliced"])
    assert sliced.args[0].untyped_storage().nbytes() > call.args[0].untyped_storage().nbytes()


def test_a_layout_that_changes_nothing_at_shape_0_is_tried_at_shape_1():
    """At batch 1 a ``(1, n)`` argument transposed keeps its strides: shape 1's batch of 2 is relaid."""

    def make(shape: int) -> Inputs:
        return Inputs.of(torch.randn(1 + shape, 4))

    answers, refused = relaid_answers(nn.Linear(4, 2).eval(), [make(0), make(1)])
    assert set(answers) == {"transposed at shape 1", "sliced"} and not refused
    assert answers["transposed at shape 1"][0].args[0].stride() == (1, 2)


def test_a_model_srbench_answers_rightly_passes_the_check():
    model = ScaleInPlace().eval()
    calls = [_image_inputs(0), _image_inputs(1)]
    expected = [eager_answer(model, call) for call in calls]
    check, _ = check_named(model, _case("scale_in_place", ScaleInPlace, _image_inputs), calls, expected, "relaid")
    assert "relaid" in CHECKS
    assert check.outcome is Outcome.EQUIVALENT, check.detail
    assert check.detail == "layouts run: transposed, sliced, channels_last"


def test_a_runtime_writing_a_contiguous_copy_is_caught():
    """The fake runtime computes eager's outputs, but on a contiguous copy of the argument: the
    caller's strided tensor is never written."""
    model = ScaleInPlace().eval()
    answers = _answers(model)

    def runtime(image: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return model(image.contiguous(), ids)

    check = check_runtime_relaid(runtime, answers, _case("scale_in_place", ScaleInPlace, _image_inputs))
    assert check is not None and check.outcome is Outcome.WRONG, check
    assert "input" in check.detail


def test_a_runtime_reading_strided_memory_as_contiguous_is_caught():
    """The fake runtime reads the argument's storage from its offset as if contiguous: the sliced
    layout's NaN margins (and the transposed layout's order) give other values."""
    model = ScaleInPlace().eval()
    answers = _answers(model)

    def runtime(image: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        as_if = torch.as_strided(image, image.shape, torch.empty(image.shape).stride(), image.storage_offset())
        with torch.no_grad():
            return model(as_if, ids)

    check = check_runtime_relaid(runtime, answers, _case("scale_in_place", ScaleInPlace, _image_inputs))
    assert check is not None and check.outcome is Outcome.WRONG, check


def test_a_model_refusing_every_layout_in_eager_is_not_applicable():
    def make(shape: int) -> Inputs:
        return Inputs.of(torch.randn(2 + shape, 3))

    model = FlatView().eval()
    calls = [make(0), make(1)]
    expected = [eager_answer(model, call) for call in calls]
    check, _ = check_named(model, _case("flat_view", FlatView, make), calls, expected, "relaid")
    assert check.outcome is Outcome.NOT_APPLICABLE, check
    assert "eager refuses transposed" in check.detail and "eager refuses sliced" in check.detail


def test_layouts_export_cannot_capture_are_said_not_failed():
    def make(shape: int) -> Inputs:
        return Inputs.of(torch.randn(16 + shape, 2))

    model = Tangent().eval()
    calls = [make(0), make(1)]
    expected = [eager_answer(model, call) for call in calls]
    check, _ = check_named(model, _case("tangent", Tangent, make), calls, expected, "relaid")
    # transposed is captured or refused by export depending on how export traces it (srbench's
    # capture takes it where a plain export did not); sliced is refused either way
    assert check.outcome in (Outcome.EQUIVALENT, Outcome.NOT_CAPTURABLE), check
    assert "export refuses sliced: " in check.detail, check.detail
