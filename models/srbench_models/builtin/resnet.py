"""ResNet-18 and ResNet-50 (He et al., "Deep Residual Learning for Image Recognition", 2015),
and a small ResNet-like CNN.

The ImageNet variants of the paper's Table 1: a 7x7/2 stem and 3x3/2 max-pool, four stages of
basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 with 4x expansion) blocks, projection shortcuts
(1x1 convolution + batch norm) where the shape changes, global average pool and a 1000-way
classifier. The stride of a bottleneck stage sits on its 3x3 convolution ("ResNet v1.5", as in
torchvision), and attribute names follow torchvision's, so its state_dict loads as it is.

The small CNN is the same architecture with three stages of two basic blocks at 32, 64 and 128
channels: a convolution-bound model of a few milliseconds, where what a runtime does around
the kernels (batch norm, pooling, memory) shows more than on ResNet-50.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from srbench_models.builtin.blocks import builtin_case
from srbench_models.calibration import calibrated
from srbench_models.inputs import images


def _conv(in_channels: int, out_channels: int, kernel_size: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, kernel_size, stride, (kernel_size - 1) // 2, bias=False)


def _shortcut(in_channels: int, out_channels: int, stride: int) -> nn.Module | None:
    """Projection shortcut (the paper's option B) when the block changes shape, else identity."""
    if stride == 1 and in_channels == out_channels:
        return None
    return nn.Sequential(_conv(in_channels, out_channels, 1, stride), nn.BatchNorm2d(out_channels))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with an identity or projection shortcut."""

    expansion = 1

    def __init__(self, in_channels: int, channels: int, stride: int):
        super().__init__()
        self.conv1 = _conv(in_channels, channels, 3, stride)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = _conv(channels, channels, 3)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = _shortcut(in_channels, channels, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, with a shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, channels: int, stride: int):
        super().__init__()
        out_channels = channels * self.expansion
        self.conv1 = _conv(in_channels, channels, 1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = _conv(channels, channels, 3, stride)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv3 = _conv(channels, out_channels, 1)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = _shortcut(in_channels, out_channels, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + identity)


class ResNet(nn.Module):
    """Three or four stages ``layer1`` ... ``layer4`` (torchvision's names), one per entry of
    ``depths`` and ``widths``; the stem has ``widths[0]`` channels. ``layer4`` is ``None`` in a
    three-stage network (an optional submodule, as TorchScript accepts)."""

    def __init__(
        self,
        block: type[BasicBlock | Bottleneck],
        depths: tuple[int, ...],
        num_classes: int = 1000,
        widths: tuple[int, ...] = (64, 128, 256, 512),
    ):
        super().__init__()
        if len(depths) != len(widths) or len(depths) not in (3, 4):
            raise ValueError(f"3 or 4 stages, one depth per width: got depths {depths}, widths {widths}")
        self.conv1 = _conv(3, widths[0], 7, 2)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        in_channels = widths[0]
        stages: list[nn.Module] = []
        for index, (channels, depth) in enumerate(zip(widths, depths)):
            blocks = []
            for position in range(depth):
                stride = 2 if index > 0 and position == 0 else 1
                blocks.append(block(in_channels, channels, stride))
                in_channels = channels * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3 = stages[:3]
        self.layer4 = stages[3] if len(stages) == 4 else None
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer3(self.layer2(self.layer1(x)))
        if self.layer4 is not None:
            x = self.layer4(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2, 2))


def resnet50() -> ResNet:
    return ResNet(Bottleneck, (3, 4, 6, 3))


def small_cnn() -> ResNet:
    return ResNet(BasicBlock, (2, 2, 2), widths=(32, 64, 128))


CASES = (
    builtin_case(
        name="resnet18",
        family="vision",
        build=calibrated(resnet18),
        make_inputs=images(batch_size=1),
        rtol=1e-4,
        atol=1e-4,
        description="ResNet-18 (He et al. 2015), 224x224 images; shape 1 is 160x160",
        published_parameters=11_689_512,
    ),
    builtin_case(
        name="resnet50",
        family="vision",
        build=calibrated(resnet50),
        make_inputs=images(batch_size=1),
        rtol=1e-4,
        atol=1e-4,
        description="ResNet-50 v1.5 (He et al. 2015), 224x224 images; shape 1 is 160x160",
        published_parameters=25_557_032,
    ),
    builtin_case(
        name="small_cnn",
        family="vision",
        build=calibrated(small_cnn),
        make_inputs=images(batch_size=1),
        rtol=1e-4,
        atol=1e-4,
        description="small ResNet-like CNN: ResNet stem, 3 stages x 2 basic blocks of 32/64/128 channels, "
        "224x224 images; shape 1 is 160x160",
    ),
)
