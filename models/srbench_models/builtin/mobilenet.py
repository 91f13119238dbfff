"""MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks", 2018).

Width multiplier 1.0 at 224x224: a 3x3/2 stem of 32 channels, the paper's Table 2 of inverted
residual blocks (1x1 expansion by t, 3x3 depthwise, linear 1x1 projection; a residual connection
when stride is 1 and widths match), a 1x1 convolution to 1280 channels, global average pool,
dropout and a 1000-way classifier. ReLU6 throughout, none after the projection.
"""

from __future__ import annotations

import torch
from torch import nn

from srbench_models.builtin.blocks import ConvBNAct, builtin_case
from srbench_models.calibration import calibrated
from srbench_models.inputs import images

# (expansion t, output channels c, repeats n, first stride s), as in the paper's Table 2.
INVERTED_RESIDUAL_SETTING = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


class InvertedResidual(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int, expansion: int):
        super().__init__()
        hidden = in_channels * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(ConvBNAct(in_channels, hidden, 1, activation=nn.ReLU6))
        layers.append(ConvBNAct(hidden, hidden, 3, stride, groups=hidden, activation=nn.ReLU6))
        layers.append(ConvBNAct(hidden, out_channels, 1, activation=None))
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        return x + out if self.residual else out


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.2):
        super().__init__()
        in_channels = 32
        layers: list[nn.Module] = [ConvBNAct(3, in_channels, 3, 2, activation=nn.ReLU6)]
        for expansion, channels, repeats, stride in INVERTED_RESIDUAL_SETTING:
            for index in range(repeats):
                layers.append(InvertedResidual(in_channels, channels, stride if index == 0 else 1, expansion))
                in_channels = channels
        layers.append(ConvBNAct(in_channels, 1280, 1, activation=nn.ReLU6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


CASES = (
    builtin_case(
        name="mobilenet_v2",
        family="vision",
        build=calibrated(MobileNetV2),
        make_inputs=images(batch_size=1),
        rtol=1e-4,
        atol=1e-4,
        description="MobileNetV2 1.0 (Sandler et al. 2018), 224x224 images; shape 1 is 160x160",
        published_parameters=3_504_872,
    ),
)
