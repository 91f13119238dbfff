"""The builtin provider: pure-torch architectures written from their papers, always available."""

from __future__ import annotations

from srbench.zoo import CatalogProvider
from srbench_models.builtin import lstm, mlp, mobilenet, recommender, resnet, transformer
from srbench_models.builtin.blocks import PROVIDER

provider = CatalogProvider(
    PROVIDER,
    entries=(*resnet.CASES, *mobilenet.CASES, *transformer.CASES, *lstm.CASES, *recommender.CASES, *mlp.CASES),
)
