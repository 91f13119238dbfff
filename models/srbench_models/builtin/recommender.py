"""Recommendation models: a DLRM (Naumov et al., "Deep Learning Recommendation Model for
Personalization and Recommendation Systems", 2019) and a Wide & Deep model (Cheng et al.,
"Wide & Deep Learning for Recommender Systems", 2016).

Both look categorical features up in EmbeddingBag tables (one per feature, a bag of ids per
sample). DLRM runs the dense features through a bottom MLP, takes the dot products of every pair
of feature vectors with one batched matmul, and feeds their strictly-lower triangle with the
dense vector to a top MLP. Wide & Deep adds a linear model over sparse cross-product features
(given as a 0/1 vector) to a deep MLP over dense features and embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from srbench_models.builtin.blocks import builtin_case, mlp_stack
from srbench_models.inputs import batch_for, generator


class SparseFeatures(nn.Module):
    """One EmbeddingBag per categorical feature: ids ``[batch, features, bag]`` -> ``[batch, features, dim]``."""

    def __init__(self, rows: Sequence[int], dim: int, mode: str):
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(count, dim, mode=mode) for count in rows)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.stack([table(ids[:, index]) for index, table in enumerate(self.tables)], dim=1)


class DLRM(nn.Module):
    def __init__(self, dense_features: int, rows: Sequence[int], dim: int, bottom: Sequence[int], top: Sequence[int]):
        super().__init__()
        self.bottom = mlp_stack([dense_features, *bottom, dim], final_activation=True)
        self.sparse = SparseFeatures(rows, dim, mode="sum")
        vectors = len(rows) + 1
        below_diagonal = torch.tril_indices(vectors, vectors, offset=-1)
        self.pair_rows: torch.Tensor
        self.pair_cols: torch.Tensor
        self.register_buffer("pair_rows", below_diagonal[0], persistent=False)
        self.register_buffer("pair_cols", below_diagonal[1], persistent=False)
        self.top = mlp_stack([dim + vectors * (vectors - 1) // 2, *top, 1])

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        vectors = torch.cat([x.unsqueeze(1), self.sparse(sparse)], dim=1)
        products = torch.bmm(vectors, vectors.transpose(1, 2))
        pairs = products[:, self.pair_rows, self.pair_cols]
        return torch.sigmoid(self.top(torch.cat([x, pairs], dim=1)))


class WideAndDeep(nn.Module):
    def __init__(self, wide_features: int, dense_features: int, rows: Sequence[int], dim: int, hidden: Sequence[int]):
        super().__init__()
        self.wide = nn.Linear(wide_features, 1)
        self.sparse = SparseFeatures(rows, dim, mode="mean")
        self.deep = mlp_stack([dense_features + len(rows) * dim, *hidden, 1])

    def forward(self, wide: torch.Tensor, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        deep = self.deep(torch.cat([dense, self.sparse(sparse).flatten(1)], dim=1))
        return torch.sigmoid(self.wide(wide) + deep)


DLRM_DENSE, DLRM_TABLES, DLRM_ROWS, DLRM_BAG = 13, 8, 10000, 4  # 13 dense features as in Criteo
WD_WIDE, WD_DENSE, WD_TABLES, WD_ROWS, WD_BAG = 64, 16, 4, 1000, 2


def _dlrm_inputs(shape: int, batch: int | None) -> tuple[torch.Tensor, ...]:
    count, random = batch_for(shape, batch, 64, doubled=True), generator(shape)
    dense = torch.randn(count, DLRM_DENSE, generator=random)
    sparse = torch.randint(0, DLRM_ROWS, (count, DLRM_TABLES, DLRM_BAG), generator=random)
    return dense, sparse


def _wide_and_deep_inputs(shape: int, batch: int | None) -> tuple[torch.Tensor, ...]:
    count, random = batch_for(shape, batch, 32, doubled=True), generator(shape)
    wide = torch.randint(0, 2, (count, WD_WIDE), generator=random).float()
    dense = torch.randn(count, WD_DENSE, generator=random)
    sparse = torch.randint(0, WD_ROWS, (count, WD_TABLES, WD_BAG), generator=random)
    return wide, dense, sparse


CASES = (
    builtin_case(
        name="dlrm",
        family="recommendation",
        build=lambda: DLRM(DLRM_DENSE, [DLRM_ROWS] * DLRM_TABLES, dim=64, bottom=(512, 256), top=(512, 256)),
        make_inputs=_dlrm_inputs,
        batch_size=64,
        rtol=1e-4,
        atol=1e-5,
        description="DLRM, 13 dense features, 8 tables of 10000x64 (bags of 4), MLPs 512-256; "
        "batch 64, shape 1 batch 128",
    ),
    builtin_case(
        name="deep_and_wide",
        family="recommendation",
        build=lambda: WideAndDeep(WD_WIDE, WD_DENSE, [WD_ROWS] * WD_TABLES, dim=32, hidden=(1024, 512, 256)),
        make_inputs=_wide_and_deep_inputs,
        batch_size=32,
        rtol=1e-4,
        atol=1e-5,
        description="Wide & Deep, 64 wide, 16 dense, 4 tables of 1000x32 (bags of 2), MLP 1024-512-256; "
        "batch 32, shape 1 batch 64",
    ),
)
