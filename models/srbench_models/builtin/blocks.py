"""Building blocks shared by the builtin architectures, and the builtin case constructor."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import partial

from torch import nn

from srbench.zoo import ModelCase

PROVIDER = "builtin"
builtin_case = partial(ModelCase, provider=PROVIDER)


def mlp_stack(widths: Sequence[int], *, final_activation: bool = False) -> nn.Sequential:
    """Linear layers through ``widths`` (input first) with ReLU between them (and after the last if asked)."""
    if len(widths) < 2:
        raise ValueError(f"an MLP needs an input and an output width, got {list(widths)}")
    layers: list[nn.Module] = []
    for index, (width_in, width_out) in enumerate(itertools.pairwise(widths)):
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
            nn.Conv2d(
                in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2, groups=groups, bias=False
            ),
            nn.BatchNorm2d(out_channels),
        ]
        if activation is not None:
            layers.append(activation())
        super().__init__(*layers)
