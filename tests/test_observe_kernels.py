"""The observed kernel rules of ``srbench.estimate.kernels`` checked against the observer, and the
estimated eager peak against the observed one: what the estimate knows of eager, run for real.

These rest on this project's machines (torch 2.13.0 CPU build, oneDNN): a CPU whose oneDNN picks
other blocked layouts would fail them, which is the point of keeping them."""

from __future__ import annotations

import pytest
import torch

from srbench.estimate import TemporarySource, estimate_case
from srbench.graph import capture
from srbench.observe import observe_eager
from srbench.zoo import load_zoo

ZOO = load_zoo()

pytestmark = pytest.mark.skipif(
    not torch.backends.mkldnn.is_available(), reason="the CPU rules describe oneDNN's kernels; this torch has none"
)


def estimated_and_observed(name: str, threads: int):
    """Estimate and observe under ``threads`` intra-op threads (oneDNN's choices depend on them)."""
    case = ZOO.get(name)
    inputs = case.example_inputs(0)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return estimate_case(case), observe_eager(capture(case.model(), inputs, name=name), inputs)
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_convolution_and_batch_norm_rules_match_every_node(name, threads):
    estimate, observed = estimated_and_observed(name, threads)
    checked = 0
    for node in observed.nodes:
        estimated = estimate.node(node.node)
        if estimated.op in ("aten.conv2d.default", "aten.batch_norm.default"):
            assert estimated.temporary_source is TemporarySource.OBSERVED, node.node
            assert estimated.temporary.nbytes == node.temporary_bytes, f"{name} at {threads} threads: {node.node}"
            checked += 1
    assert checked >= 40


@pytest.mark.slow
def test_linear_on_a_non_contiguous_input_copies_it():
    estimate, observed = estimated_and_observed("lstm_lm", 2)
    linear = estimate.node("linear")
    assert linear.temporary_source is TemporarySource.OBSERVED
    assert linear.temporary.nbytes == observed.node("linear").temporary_bytes == 4 * 32 * 256 * 4


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "threads"),
    [
        *((name, 2) for name in ("resnet18", "resnet50", "mobilenet_v2", "bert_encoder", "gpt_decoder", "hf_convnext")),
        ("resnet50", 1),
        ("mobilenet_v2", 1),
    ],
)
def test_estimated_eager_peak_equals_the_observed_one(name, threads):
    estimate, observed = estimated_and_observed(name, threads)
    assert estimate.eager.peak_requested == observed.peak_bytes
