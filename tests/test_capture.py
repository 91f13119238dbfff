"""Capture through torch.export: an ATen graph with FakeTensor metadata, or a clear CaptureError."""

import pytest
import torch

from srbench.graph import CapturedGraph, CaptureError, capture


class SmallMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # branch on a tensor value: torch.export cannot trace this
            return x + 1
        return x - 1


def test_capture_gives_aten_graph_with_fake_tensor_metadata():
    captured = capture(SmallMLP().eval(), (torch.randn(3, 8),), name="mlp")
    assert isinstance(captured, CapturedGraph)
    assert captured.name == "mlp"
    assert captured.graph_module is captured.exported.graph_module
    ops = [node for node in captured.graph.nodes if node.op == "call_function"]
    assert ops and all(isinstance(node.target, torch._ops.OpOverload) for node in ops)
    last = ops[-1].meta["val"]
    assert isinstance(last, torch._subclasses.FakeTensor)
    assert tuple(last.shape) == (3, 4) and last.dtype == torch.float32


def test_capture_does_not_allocate_or_modify_inputs():
    x = torch.randn(2, 8)
    before = x.clone()
    capture(SmallMLP().eval(), (x,))
    assert torch.equal(x, before)


def test_decompose_lowers_to_core_aten():
    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(8)

        def forward(self, x):
            return self.norm(x)

    plain = capture(Norm().eval(), (torch.randn(2, 8),))
    lowered = capture(Norm().eval(), (torch.randn(2, 8),), decompose=True)
    targets = lambda c: {str(n.target) for n in c.graph.nodes if n.op == "call_function"}  # noqa: E731
    assert "aten.layer_norm.default" in targets(plain)
    assert "aten.layer_norm.default" not in targets(lowered)


def test_capture_failure_names_model_and_reason():
    with pytest.raises(CaptureError) as info:
        capture(DataDependent(), (torch.randn(4),), name="branchy")
    message = str(info.value)
    assert "branchy" in message
    assert info.value.model == "branchy"
    assert info.value.reason and info.value.reason in message


def test_capture_rejects_non_module_and_non_tuple_inputs():
    with pytest.raises(CaptureError, match=r"nn\.Module"):
        capture(lambda x: x, (torch.randn(2),), name="fn")  # type: ignore[arg-type]
    with pytest.raises(CaptureError, match="tuple"):
        capture(SmallMLP(), [torch.randn(2, 8)], name="mlp")  # type: ignore[arg-type]
