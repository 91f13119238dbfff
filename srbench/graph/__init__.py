"""Graph capture: models as ATen-level ``torch.fx`` graphs with FakeTensor metadata."""

from srbench.graph.capture import CapturedGraph, CaptureError, capture

__all__ = ["CaptureError", "CapturedGraph", "capture"]
