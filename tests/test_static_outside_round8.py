"""What an eighth round of models from outside the zoo broke (``benchmarks/outside_round8.py``,
run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from test_static_outside_round6 import OPTIONS, randn  # the sixth round's protocol
from torch import nn

from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.runtimes import UnsupportedRuntime, get_runtime
from srbench.static import StaticModule


class SparseArgument(nn.Module):
    def forward(self, adjacency: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(adjacency, x)


def test_a_sparse_argument_is_an_expected_failure_through_the_plugin():
    """The static runtime takes dense tensors as inputs and refuses a sparse one at prepare time
    with an ``InputSignatureError`` naming it. Through the runtime plugin that error reached a
    suite as a failed case (``sparse_coo_input`` in a suite), where a model a runtime cannot take
    is an expected failure with the reason: the plugin raises ``UnsupportedRuntime`` now."""
    adjacency = torch.eye(3).to_sparse()
    with pytest.raises(UnsupportedRuntime, match="input adjacency is a sparse_coo tensor"):
        get_runtime("srbench")(SparseArgument(), Inputs.of(adjacency, randn(3, 2)))


class ReturnsCounter(nn.Module):
    count: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        self.count += 1
        return x * self.count, self.count, self.count.view(1)


@pytest.mark.parametrize("options", OPTIONS)
def test_a_buffer_written_and_returned_is_the_buffer(options: StaticOptions):
    """Eager returns a buffer it increments as the buffer itself (and a view of it), which the
    next call changes. Under ``decompose`` the functionalized graph returns the new value as a
    tensor of its own and writes it back into the buffer: the outputs were a copy, shared with
    nothing. They are the buffer now, as were inputs written and returned."""
    model = ReturnsCounter().eval()
    runtime = StaticModule(model, Inputs.of(randn(2, 3)), options).runtime()
    for calls in (1, 2):
        scaled, count, view = runtime(randn(2, 3))
        assert count is model.count and int(count) == calls
        assert view.data_ptr() == model.count.data_ptr()
        torch.testing.assert_close(scaled, randn(2, 3) * calls)


class ReturnsAverage(nn.Module):
    average: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("average", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.average = self.average * 0.5 + x.mean(0)
        return x - self.average, self.average


@pytest.mark.parametrize("options", [options for options in OPTIONS if not options.manage_output_tensors])
def test_a_buffer_assigned_anew_and_returned_is_not_the_buffer(options: StaticOptions):
    """A buffer assigned anew (not written in place) and returned is a new tensor in eager at each
    call: an output held from one call keeps its value at the next (managed outputs are reused by
    design). Lowering makes it look as one written in place, so which eager returns as the buffer
    is read from the graph export traced."""
    model = ReturnsAverage().eval()
    runtime = StaticModule(model, Inputs.of(randn(2, 3)), options).runtime()
    _, first = runtime(randn(2, 3))
    held = first.clone()
    _, second = runtime(randn(2, 3, seed=1))
    torch.testing.assert_close(first, held)
    torch.testing.assert_close(model.average, second)


class PermutedView(nn.Module):
    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return (tokens * 2).permute(0, 2, 1).view(1, 4, 2, 3)


def test_an_output_differing_in_the_stride_of_a_dimension_of_size_one_is_not_copied():
    """After a rewrite, an output whose strides differ from the captured ones only where a
    dimension has size 1 (its stride means nothing) was copied contiguous, another layout than
    eager's: CvT's last hidden state, a view of a permute at batch 1 (captured batch stride 240,
    48 after the fused convolutions upstream), came back with strides (192, 4, 2, 1) for eager's
    (48, 1, 96, 48). Strides are compared as layouts now."""
    from srbench.static.passes.apply import _output_strides, _restore_layouts

    graph = torch.export.export(PermutedView(), (randn(1, 6, 4),)).graph
    captured = _output_strides(graph)
    output = next(node for node in graph.nodes if node.op == "output")
    view = output.args[0][0]
    meta = view.meta["val"]
    view.meta["val"] = meta.as_strided(meta.shape, (999, *meta.stride()[1:]))  # another stride for the batch of one
    _restore_layouts(graph, {}, captured)
    assert output.args[0][0] is view
    assert not [node for node in graph.nodes if node.target == torch.ops.aten.clone.default]
