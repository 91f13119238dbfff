"""What a third round of models from outside the zoo broke (``benchmarks/outside_models.py``'s
``_third_round``: dtypes and layouts of whole models, parametrizations, shared parameters,
containers and enums in and out, aliases of inputs, strided inputs, integer arithmetic, sizes
that depend on the data, state written in forward, ``torch.cond``), each as the smallest model
that shows it."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn
from torch._higher_order_ops.while_loop import while_loop

from srbench.inputs import Inputs
from srbench.measure.equivalence import eager_answer
from srbench.options import StaticOptions


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Selected(nn.Module):
    """Boolean-mask indexing and nonzero: result sizes that depend on the data (unbacked symbols)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(randn(1, 16, seed=2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        picked = x[x > 0]
        return (picked[:, None] @ self.weight).relu(), torch.nonzero(x)


@pytest.mark.parametrize("streams", [2, 4])
def test_sizes_that_depend_on_the_data_on_several_streams(conformance, streams):
    """The schedulers' cost model counted an op's bytes as ``numel * itemsize`` of its fake
    values: with an unbacked size that is a symbolic expression, and comparing estimated times
    guarded on the data and failed ('Could not guard on data-dependent expression'): every model
    with boolean-mask indexing, ``nonzero`` or ``unique`` failed to prepare under ``streams``. Such
    a size counts at its proved upper bound now, as the memory estimate counts it."""
    conformance(Selected(), (randn(4, 8),), (randn(3, 5, seed=1),), StaticOptions(streams=streams))


class ConvolutionReturnedWithItsViews(nn.Module):
    """A convolution's result returned as it is, twice, and through views (``view``, ``flatten``,
    and a ``permute`` and a slice, which a channels-last result gives other strides)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(self.norm(self.conv(x)))
        return y, y, y.view(y.shape[0], -1), y.flatten(2), y.permute(0, 2, 3, 1)[..., :4]


def test_a_rewritten_convolution_returned_with_its_views_aliases_as_in_eager(conformance, static_options):
    """The fused convolution computes channels-last; eager's result is contiguous. Each output
    slot holding it was copied back to eager's layout on its own, and each view read a copy of
    its own: the outputs no longer shared memory as eager's do (one tensor returned twice came
    back as two; a view of a returned tensor did not see writes to it). One contiguous copy now
    serves every output slot and layout-bound view, and returned views whose strides the rewrite
    changed are taken again from that copy."""
    options = dataclasses.replace(static_options, measure_choices=False)  # the rewrite kept whatever its speed
    module = conformance(
        ConvolutionReturnedWithItsViews().eval(), (randn(1, 3, 6, 6),), (randn(2, 3, 6, 6, seed=1),), options
    )
    fused = [rewrite.outcome.value for rewrite in module.prepared.rewrites if rewrite.pass_name == "fused_convolution"]
    if torch.backends.mkldnn.is_available() and not options.decompose:
        assert fused == ["applied"]


class NormedAcrossChannels(nn.Module):
    """BatchNorm1d over the channels of a (batch, length, channels) sequence, then a Linear: as
    PatchTST normalises its patches."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(32)
        self.linear = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.norm(x.transpose(1, 2)).transpose(1, 2))


def test_a_view_whose_input_runs_in_another_layout_than_captured(conformance, static_options):
    """``_native_batch_norm_legit_no_training``'s fake result is strided like its transposed
    input; the CPU kernel's is contiguous. ``decompose`` lowers ``linear`` to a ``view`` that holds
    only for the fake strides, and preparing failed ('view size is not compatible'). Such a view,
    where nothing writes through it, runs as ``reshape`` (a copy)."""
    conformance(NormedAcrossChannels().eval(), (randn(3, 4, 32),), (randn(2, 6, 32, seed=1),), static_options)


class SeededNoise(nn.Module):
    """Noise from a generator made and seeded in forward: the same noise at every eager call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        generator = torch.Generator().manual_seed(7)
        return x + torch.randn(x.shape, generator=generator)


class OwnNoise(nn.Module):
    """Noise from the model's own generator, which eager advances call by call."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn(x.shape, generator=self.generator)


@pytest.mark.parametrize("model_class", [SeededNoise, OwnNoise])
def test_a_model_drawing_from_its_own_generator_is_refused(model_class):
    """``torch.export`` lifts a copy of the generator, taken at capture, into the graph: the
    program drew from that copy, advanced by every run and by prepare-time timing, and gave other
    numbers than eager from the first call on (a generator seeded in forward gives eager the same
    noise at every call). No captured program can give eager's numbers: preparing is refused."""
    from srbench.graph.capture import CaptureError
    from srbench.static import StaticModule

    with pytest.raises(CaptureError, match=r"torch\.Generator"):
        StaticModule(model_class(), (randn(2, 3),), StaticOptions())


def test_a_refusal_of_the_generator_by_export_itself_gives_the_same_reason():
    """torch 2.11's export refuses a ``torch.Generator`` argument outright (seen on the GPU
    machine); the refusal then says why as the one srbench gives after capture."""
    from srbench.graph.capture import _reason

    reason = _reason(NotImplementedError("argument of type: <class 'torch._C.Generator'>"))
    assert "torch.Generator" in reason and reason.endswith("torch._C.Generator'>)")


class ReturnsItsInput(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x * 2


def test_the_sweep_reports_outputs_that_alias_unlike_eagers():
    """The sweep compared values only, so a runtime returning a copy where eager returns the input
    itself passed (as the rewritten convolution's outputs did). It compares aliasing now."""
    from benchmarks import outside_models

    model = ReturnsItsInput()
    case = outside_models.OutsideModel("returns_input", "", ReturnsItsInput, lambda shape: None)
    calls = [Inputs.of(randn(2, 3)), Inputs.of(randn(3, 3, seed=1))]
    expected = [eager_answer(model, call) for call in calls]

    def copying(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.clone(), x * 2

    options = StaticOptions()
    check, _ = outside_models._check_option_set(model, case, calls, expected, options, plugin=False)
    assert check.outcome is outside_models.Outcome.EQUIVALENT
    check = outside_models._aliasing_check(copying, calls[0], expected[0])
    assert check is not None and check.outcome is outside_models.Outcome.WRONG
    assert "output [0] shares memory with nothing, eager's with ['input args[0] (the same view)']" in check.detail


class LoopInABranch(nn.Module):
    """A ``while_loop`` (its counter a tensor constant of the branch) inside a ``torch.cond`` branch."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def looped(v: torch.Tensor) -> torch.Tensor:
            _, w = while_loop(lambda i, w: i < 3, lambda i, w: (i + 1, w.sin() + 1), (torch.tensor(0), v))
            return w

        return torch.cond(x.sum() > 0, lambda v: self.linear(v), looped, (x,))


def test_a_loop_inside_a_branch(conformance, static_options):
    """A branch's sub-graph is prepared as a capture of its own: its metadata pass had no shape
    environment, which a ``while_loop``'s fake kernel needs; its ``torch.tensor(0)`` is an
    attribute, which export's verifier refuses unless lifted as a constant input; and its
    in-place ``detach_`` was checked by the verifier of the lowered IR instead of export's own.
    Preparing failed on all three; both branches run now (the first call takes the loop).
    ``decompose`` stays refused: torch's own lowering fails on such a graph."""
    from srbench.graph.capture import CaptureError
    from srbench.static import StaticModule

    first, second = (-randn(3, 8).abs(),), (randn(4, 8, seed=1).abs(),)
    if static_options.decompose:
        exported = torch.export.export(LoopInABranch().eval(), first, strict=False)
        with pytest.raises(RuntimeError, match="FunctionalTensor"):
            exported.run_decompositions()
        with pytest.raises(CaptureError, match="FunctionalTensor"):
            StaticModule(LoopInABranch().eval(), first, static_options)
        return
    conformance(LoopInABranch().eval(), first, second, static_options)
