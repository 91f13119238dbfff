"""Building blocks shared by the builtin architectures, and the builtin case constructor."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from torch import nn

from srbench.zoo import ModelCase

PROVIDER = "builtin"
builtin_case = partial(ModelCase, provider=PROVIDER)


def mlp_stack(widths: Sequence[int], *, final_activation: bool = False) -> nn.Sequential:
    """Linear layers through ``widths`` (input first) with ReLU between them (and after the last if asked)."""
    if len(widths) < 2:
        raise ValueError(f"an MLP needs an input and an output width, got {list(widths)}")
    layers: list[nn.Module] = []
    for index, (width_in, width_out) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(width_in, width_out))
        if final_activation or index < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class ConvBNAct(nn.Sequential):
    """Convolution without bias, batch norm, then an optional activation ("same" padding)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] | None = nn.ReLU,
    ):
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)


BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def calibrate_batch_norm(model: nn.Module, inputs: torch.Tensor) -> nn.Module:
    """Set every batch norm's running statistics to those of one forward pass over ``inputs``.

    With freshly initialised statistics (mean 0, variance 1) a random network in eval mode does
    not normalise at all: MobileNetV2's logits come out near 1e-9 and ResNet-50's near 1e2, so
    equivalence checks at any fixed tolerance would mean little. Statistics measured on one
    seeded batch (cumulative average, ``momentum=None``) keep activations near unit scale, as in
    a trained network. A model on the meta device (being counted, not run) is left as it is.
    """
    norms = [module for module in model.modules() if isinstance(module, BATCH_NORMS)]
    if any(parameter.is_meta for parameter in model.parameters()):
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
