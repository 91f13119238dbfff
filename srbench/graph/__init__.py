"""Graph capture: models as ATen-level ``torch.fx`` graphs with FakeTensor metadata."""

from srbench.graph.capture import CaptureError, CapturedGraph, capture

__all__ = ["CaptureError", "CapturedGraph", "capture"]
