"""What a fifth round of models from outside the zoo broke (``benchmarks/outside_models.py``'s
``_fifth_round``), each as the smallest model that shows it. This round compares the outputs'
strides with eager's too (:mod:`srbench.measure.layout`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from srbench.inputs import Inputs
from srbench.measure.equivalence import eager_answer
from srbench.measure.layout import layout_difference
from srbench.options import StaticOptions
from srbench.static import StaticModule

OPTIONS = [
    StaticOptions(),
    StaticOptions(enable_out_variant=False),
    StaticOptions(manage_output_tensors=True),
    StaticOptions(manage_output_tensors=True, cleanup_activations=False),
    StaticOptions(decompose=True),
    StaticOptions(streams=2),
]


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def assert_as_eager(model: nn.Module, calls: list[Inputs], options: StaticOptions) -> None:
    """Prepared on the first call, every call (and the first again) gives eager's values and
    eager's strides."""
    expected = [eager_answer(model, call) for call in calls]
    runtime = StaticModule(model, calls[0].clone(), options).runtime()
    for call, answer in [*zip(calls, expected), (calls[0], expected[0])]:
        got = call.clone().call(runtime)
        torch.testing.assert_close(got, answer.outputs, rtol=1e-4, atol=1e-5)
        assert layout_difference(got, answer.outputs) is None, layout_difference(got, answer.outputs)


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.attention(x, x, x)


@pytest.mark.parametrize("options", OPTIONS)
def test_an_output_of_eagers_fast_path_has_its_layout(options):
    """Eager's ``nn.MultiheadAttention`` takes its fast path (``_native_multi_head_attention``) in
    inference on a batch of several sequences and returns a contiguous result; export traces the
    Python path, whose result is a transposed view: srbench returned eager's values in
    another layout (``out.view(batch, -1)`` fails on it). The graph's outputs are copied into the
    layout of the prepare-time eager call's outputs where they differ."""
    torch.manual_seed(0)
    model = SelfAttention().eval()
    assert_as_eager(model, [Inputs.of(randn(3, 5, 16)), Inputs.of(randn(2, 7, 16, seed=1))], options)


class Attention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("options", [StaticOptions(decompose=True), StaticOptions(decompose=True, streams=2)])
def test_decomposed_attention_gives_eagers_layout(options):
    """``decompose`` lowers ``scaled_dot_product_attention`` to matmuls whose result is permuted
    (pytorch/pytorch#136543): the output came back with strides (8, 32, 1) per head where eager's
    is contiguous."""
    mask = randn(1, 4, 6, 5) > 0
    call = Inputs.of(randn(2, 4, 6, 8), randn(2, 4, 5, 8, seed=1), randn(2, 4, 5, 8, seed=2), mask)
    assert_as_eager(Attention(), [call, call], options)


class NormOfTransposed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x.transpose(1, 2))


@pytest.mark.parametrize("options", OPTIONS)
def test_a_kernel_whose_fake_strides_differ_gives_eagers_layout(options):
    """``batch_norm``'s CPU kernel returns a contiguous result for a transposed input, its fake
    kernel one strided like the input: with ``manage_output_tensors`` the output buffer was
    planned from the fake result and came back transposed."""
    model = NormOfTransposed().eval()
    assert_as_eager(model, [Inputs.of(randn(2, 5, 6)), Inputs.of(randn(3, 4, 6, seed=1))], options)


class ViewsAndCopies(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = x.transpose(0, 1)
        return t, t * 2, x.t().contiguous(), t.exp()


@pytest.mark.parametrize("options", OPTIONS)
def test_views_of_inputs_stay_views_and_transposed_results_stay_transposed(options, output_aliasing):
    """Only outputs eager makes anew are copied into eager's layout: a returned view of an input
    stays that view (a copy would not share its memory), and a result eager lays out transposed
    stays so."""
    model, call = ViewsAndCopies(), Inputs.of(randn(4, 6))
    assert_as_eager(model, [call, Inputs.of(randn(3, 5, seed=1))], options)
    if not options.manage_output_tensors:
        runtime, expected = StaticModule(model, call.clone(), options).runtime(), eager_answer(model, call)
        fresh = call.clone()
        assert output_aliasing(fresh.call(runtime), fresh) == output_aliasing(expected.outputs, expected.inputs_after)


def test_layout_difference_names_the_output_and_both_strides():
    x = randn(4, 6)
    assert layout_difference((x, x.t().contiguous()), (x, x.t())) == (
        "output [1] of shape (6, 4) has strides (4, 1), eager's (1, 6)"
    )
    assert layout_difference(randn(1, 6).t(), randn(6, 1)) is None  # a dimension of size 1: no layout
    assert layout_difference(torch.empty(0, 3).t(), torch.empty(3, 0)) is None


def test_the_sweep_reports_outputs_laid_out_unlike_eagers():
    """The sweep compared values and aliasing, so a runtime returning eager's values transposed
    passed (as ``mha_masks`` did at batch 3). It compares strides now."""
    from benchmarks import outside_models

    model = NormOfTransposed().eval()
    calls = [Inputs.of(randn(2, 5, 6)), Inputs.of(randn(3, 4, 6, seed=1))]
    expected = [eager_answer(model, call) for call in calls]

    def transposed(x: torch.Tensor) -> torch.Tensor:
        return model(x).transpose(1, 2).contiguous().transpose(1, 2)

    assert outside_models._layout_check(model, calls, expected) is None
    check = outside_models._layout_check(transposed, calls, expected)
    assert check is not None and check.outcome is outside_models.Outcome.WRONG
    assert check.detail == "shape 0: the output of shape (2, 6, 5) has strides (30, 1, 6), eager's (30, 5, 1)"


class ConvolutionReturnedFlattened(nn.Module):
    """A convolution's result returned with its ``flatten(1)`` and ``reshape``: views of it in
    eager, copies of a channels-last result (they merge the channels with the pixels)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.norm = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = torch.relu(self.norm(self.conv(x)))
        return y, y.flatten(1), y.reshape(y.shape[0], -1)


@pytest.mark.parametrize(
    "options",
    [
        StaticOptions(measure_choices=False),
        StaticOptions(enable_out_variant=False, measure_choices=False),
        StaticOptions(streams=2, measure_choices=False),
    ],
)
def test_a_rewritten_convolution_returned_with_its_flattened_views(conformance, options):
    """The fused convolution computes channels-last; ``flatten(1)`` and ``reshape`` of it then
    copy, with the strides the capture gave the views, so the outputs were left as they were and
    no longer shared memory with the returned convolution as eager's do. An output viewing a
    tensor whose layout a rewrite changed is taken again from its contiguous copy now."""
    module = conformance(
        ConvolutionReturnedFlattened().eval(), (randn(2, 3, 6, 6),), (randn(3, 3, 5, 7, seed=1),), options
    )
    fused = [rewrite.outcome.value for rewrite in module.prepared.rewrites if rewrite.pass_name == "fused_convolution"]
    if torch.backends.mkldnn.is_available():
        assert fused == ["applied"]


class ConvolutionBesideItsInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.conv(x), F.normalize(x, dim=1)  # x / norm(x).clamp_min(eps).expand_as(x)


def test_an_op_reading_an_input_and_a_result_after_a_rewrite_on_several_streams(conformance):
    """A rewrite gives every op node metadata of a fake mode of its own, the inputs keep export's;
    the schedulers' cost model runs each op on its arguments' FakeTensors, and an op reading an
    input and an op's result (``expand_as`` in ``F.normalize``) had FakeTensors of two modes:
    preparing failed under ``streams`` wherever a rewrite was applied ('fake mode ... doesn't
    match mode'). They are remade in one mode now."""
    image = randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last)
    options = StaticOptions(streams=2, measure_choices=False)
    module = conformance(ConvolutionBesideItsInput().eval(), (image,), (randn(3, 4, 5, 5, seed=1),), options)
    fused = [rewrite.outcome.value for rewrite in module.prepared.rewrites if rewrite.pass_name == "fused_convolution"]
    if torch.backends.mkldnn.is_available():
        assert fused == ["applied"]
