"""A plain multilayer perceptron: the smallest, most overhead-bound case of the zoo."""

from __future__ import annotations

from srbench_models.builtin.blocks import builtin_case, mlp_stack
from srbench_models.inputs import features

WIDTH = 512

CASES = (
    builtin_case(
        name="mlp",
        family="mlp",
        build=lambda: mlp_stack([WIDTH] * 4),
        make_inputs=features(WIDTH, batch_size=64),
        batch_size=64,
        rtol=1e-4,
        atol=1e-5,
        description="3 linear layers of width 512 with ReLU between; batch 64, shape 1 batch 128",
    ),
)
