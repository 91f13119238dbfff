"""Batch-norm calibration: realistic eval-mode statistics for randomly initialised CNNs."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def calibrate_batch_norm(model: nn.Module, inputs: torch.Tensor) -> nn.Module:
    """Set every batch norm's running statistics to those of one forward pass over ``inputs``.

    With freshly initialised statistics (mean 0, variance 1) a random network in eval mode does
    not normalise at all: MobileNetV2's logits come out near 1e-9 and ResNet-50's near 1e2, so
    equivalence checks at any fixed tolerance would mean little. Statistics measured on one
    seeded batch (cumulative average, ``momentum=None``) keep activations near unit scale, as in
    a trained network. A model without batch norms, or on the meta device (being counted, not
    run), is only put in eval mode.
    """
    norms = [module for module in model.modules() if isinstance(module, BATCH_NORMS)]
    if not norms or any(parameter.is_meta for parameter in model.parameters()):
        return model.eval()
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    model.train()
    with torch.no_grad():
        model(inputs)
    for norm, momentum in zip(norms, momenta):
        norm.momentum = momentum
    return model.eval()


def calibrated(build: Callable[[], nn.Module], *, batch: int = 4, size: int = 64) -> Callable[[], nn.Module]:
    """``build`` followed by batch-norm calibration on a seeded ``batch x 3 x size x size`` image batch."""

    def build_calibrated() -> nn.Module:
        images = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(0))
        return calibrate_batch_norm(build(), images)

    return build_calibrated
