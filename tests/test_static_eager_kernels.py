"""srbench's own out variants reproduce eager bit for bit: composite ops without an out kernel of
their own (inference batch norm, 1x1 adaptive average pooling) write into the slab through the
kernel eager ends in, and a built-in candidate that rounds differently is not used."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions
from srbench.static.choose import RunAs
from srbench.static.resolve import ResultCheck, _copies_into_out, _disagreement


class ConvBlock(nn.Module):
    """Convolution, inference batch norm, ReLU, a residual add and a global average pool."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.norm(self.conv(x)) + x)).flatten(1) * 2


@pytest.fixture
def block(one_thread) -> nn.Module:
    torch.manual_seed(0)
    model = ConvBlock().eval()
    with torch.no_grad():  # statistics far from the identity, so a wrong kernel shows
        model.norm.running_mean.uniform_(-1, 1)
        model.norm.running_var.uniform_(0.5, 2)
        model.norm.weight.uniform_(0.5, 2)
        model.norm.bias.uniform_(-1, 1)
    return model


def plans_by_kind(module: StaticModule) -> dict[str, tuple[RunAs, str]]:
    return {plan.kind: (plan.how, plan.runs.label) for plan in module.prepared.plans if plan.how.runs_code}


def test_batch_norm_and_pooling_write_into_the_slab_with_eager_s_values_bit_for_bit(block):
    x = torch.randn(2, 8, 12, 12)
    module = StaticModule(block, (x,), StaticOptions(rewrite=False))  # no folding: values unchanged
    how = plans_by_kind(module)
    assert how["aten::batch_norm"] == (RunAs.OUT, "torch.native_batch_norm")
    assert how["aten::adaptive_avg_pool2d"] == (RunAs.OUT, "torch.mean")
    runtime = module.runtime()
    for inputs in ((x,), (torch.randn(2, 8, 12, 12),)):
        with torch.inference_mode():
            expected = block(*inputs)
        assert torch.equal(runtime(*inputs), expected)


def test_training_mode_batch_norm_is_left_to_the_op(block):
    """Training batch norm updates its running statistics: not an inference out kernel."""
    block.train()
    x = torch.randn(2, 8, 12, 12)
    how = plans_by_kind(StaticModule(block, (x,), StaticOptions(rewrite=False)))
    assert how.get("aten::batch_norm", (None, ""))[1] != "torch.native_batch_norm"


def test_inference_batch_norm_leaves_the_shared_saved_statistics_unwritten(block):
    """The out kernel gets one empty tensor for the saved mean and deviation, shared by every
    runtime of the module: inference must neither write nor resize it."""
    x = torch.randn(2, 8, 12, 12)
    module = StaticModule(block, (x,), StaticOptions(rewrite=False))
    plan = next(plan for plan in module.prepared.plans if plan.kind == "aten::batch_norm")
    unused = plan.runs.kwargs["unused"].value
    module.runtime()(x)
    assert unused.shape == (0,) and unused.untyped_storage().nbytes() == 0


def test_a_built_in_candidate_must_match_bit_for_bit_a_registered_one_within_rounding():
    assert ResultCheck.VALUES.for_candidate(registered=False) is ResultCheck.EXACT
    assert ResultCheck.VALUES.for_candidate(registered=True) is ResultCheck.VALUES
    assert ResultCheck.GEOMETRY.for_candidate(registered=False) is ResultCheck.GEOMETRY
    x = torch.randn(1, 512, 7, 7, generator=torch.Generator().manual_seed(0))
    mean = x.mean((-1, -2), keepdim=True)  # what eager's adaptive_avg_pool2d takes for 1x1
    pooled = torch.empty_like(mean)
    torch.ops.aten.adaptive_avg_pool2d.out(x, [1, 1], out=pooled)  # the op's own out kernel
    assert _disagreement(pooled, mean, ResultCheck.VALUES) is None
    assert "last bits" in str(_disagreement(pooled, mean, ResultCheck.EXACT))
    nan = torch.tensor([float("nan"), 1.0])
    assert _disagreement(nan.clone(), nan, ResultCheck.EXACT) is None  # NaN where the op gives NaN


def test_embedding_bag_runs_as_a_fallback_its_out_overload_being_generated():
    forward_only = torch.ops.aten._embedding_bag_forward_only
    assert _copies_into_out(forward_only.default, forward_only.out, torch.device("cpu"))
    bag = nn.EmbeddingBag(100, 8, mode="sum")
    indices, offsets = torch.randint(0, 100, (6,)), torch.tensor([0, 3])
    module = StaticModule(bag, (indices, offsets))
    assert plans_by_kind(module)["aten::embedding_bag"][0] is RunAs.FALLBACK


class Bottleneck(nn.Module):
    """A 1x1 convolution (ATen's own kernel under eager on one thread) and a 3x3 one (oneDNN)."""

    def __init__(self) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(64, 16, 1, bias=False)
        self.spatial = nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.spatial(torch.relu(self.reduce(x))) * 2


def test_a_1x1_convolution_writes_into_the_slab_through_the_kernel_eager_runs(one_thread):
    torch.manual_seed(0)
    model = Bottleneck().eval()
    x = torch.randn(1, 64, 40, 40)  # large enough that eager sends the 3x3 one to oneDNN
    module = StaticModule(model, (x,), StaticOptions(rewrite=False))
    convolutions = [plan for plan in module.prepared.plans if plan.kind == "aten::conv2d"]
    assert (convolutions[0].how, convolutions[0].runs.label) == (RunAs.OUT, "torch._C._nn.thnn_conv2d")
    assert convolutions[1].how is RunAs.FALLBACK  # ATen's kernel rounds differently from oneDNN's
    runtime = module.runtime()
    for inputs in ((x,), (torch.randn(1, 64, 40, 40),)):
        with torch.inference_mode():
            assert torch.equal(runtime(*inputs), model(*inputs))
