"""The torchvision provider: torchvision's ImageNet classifiers, random-initialised (``weights=None``).

torchvision is imported only when a model is built or the provider is asked for its cases, so
where it cannot load (no build matching the installed torch) its cases are still listed, as
unavailable with the import error, and nothing else is affected. The published parameter
counts are those of torchvision's weight tables; tests check the built models against them
wherever torchvision imports. CNN batch norms are calibrated like the builtin ones.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import partial

from torch import nn

from srbench.zoo import CatalogProvider, ModelCase
from srbench_models.calibration import calibrated
from srbench_models.inputs import images

PROVIDER = "torchvision"
tv_case = partial(ModelCase, provider=PROVIDER, family="vision", rtol=1e-4, atol=1e-4)


def torchvision_model(name: str) -> Callable[[], nn.Module]:
    """A build function for ``torchvision.models.<name>(weights=None)``."""

    def build() -> nn.Module:
        return getattr(importlib.import_module("torchvision.models"), name)(weights=None)

    return build


# (torchvision builder, published parameter count, whether the input size may vary)
MODELS = (
    ("resnet18", 11_689_512, True),
    ("resnet50", 25_557_032, True),
    ("mobilenet_v2", 3_504_872, True),
    ("mobilenet_v3_large", 5_483_032, True),
    ("efficientnet_b0", 5_288_548, True),
    ("convnext_tiny", 28_589_128, True),
    ("vit_b_16", 86_567_656, False),  # position embeddings fix the input at 224x224
)

CASES = tuple(
    tv_case(
        name=f"tv_{name}",
        build=calibrated(torchvision_model(name)) if resizable else torchvision_model(name),
        make_inputs=images(batch_size=1, sizes=(224, 160) if resizable else (224, 224)),
        description=f"torchvision.models.{name}(weights=None), 224x224; shape 1 "
        + ("160x160" if resizable else "batch 2"),
        published_parameters=parameters,
    )
    for name, parameters, resizable in MODELS
)

provider = CatalogProvider(PROVIDER, entries=CASES, requires=("torchvision",))
