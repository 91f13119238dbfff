"""The static runtime gives eager's answers: hand-made graphs for each aliasing rule, run with
PyTorch Static Runtime's test protocol (first inputs, inputs of another shape, first inputs
again; inputs never modified) under every combination of the three runtime options."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils import _pytree as pytree

from srbench.options import id_parts
from srbench.static import StaticModule, StaticOptions
from srbench.static.choose import RunAs

OPTIONS = [
    StaticOptions(enable_out_variant=out, cleanup_activations=cleanup, manage_output_tensors=manage)
    for out, cleanup, manage in itertools.product((True, False), repeat=3)
]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Views(torch.nn.Module):
    """Views of views of intermediates, one outliving its base's last direct use; outputs that
    are views of an intermediate."""

    def forward(self, x):
        a = x * 2
        flat = a.view(-1)
        tail = flat[1:]
        b = a.permute(1, 0).contiguous() + 1
        c = b.unsqueeze(0).expand(3, -1, -1).sum(0)
        d = torch.relu(c).t()
        return tail * 3, d.select(1, 0), a.transpose(0, 1)


class InPlace(torch.nn.Module):
    def forward(self, x):
        a = x + 1
        a.mul_(2)
        a.relu_()
        a[:, :1].add_(5)  # in place through a view
        b = a * 3
        b.sub_(1)
        return b, a


class AliasesInputs(torch.nn.Module):
    def forward(self, x, y):
        s = x + y
        return x, y.view(-1), x[0], s, s.t()


class MultiOutput(torch.nn.Module):
    def forward(self, x):
        values, indices = torch.topk(x, 2)
        largest, where = torch.max(x * 2, dim=1)
        low, high = torch.split(x + 1, [1, x.shape[1] - 1], dim=1)
        parts = torch.unbind(x - 1, dim=1)
        ordered, _ = torch.sort(x, dim=1)
        return values + 1, indices, largest, where, low * high.sum(1, keepdim=True), parts[0], ordered[:, 0]


class NestedOutputs(torch.nn.Module):
    def forward(self, x):
        h = torch.tanh(x)
        return {"h": h, "pair": (h.sum(), [h * 2, h.mean(0)]), "input": x}


class Constants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("offset", torch.randn(4))
        self.scale = torch.tensor([1.0, 2.0, 3.0, 4.0])

    def forward(self, x):
        y = x @ self.weight + self.offset
        return y * self.scale, self.weight, self.offset.view(2, 2)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(4, 32),
            torch.nn.ReLU(),
            torch.nn.Linear(32, 32),
            torch.nn.GELU(),
            torch.nn.Dropout(0.1),
            torch.nn.Linear(32, 3, bias=False),
        )

    def forward(self, x):
        return self.layers(x)


class ConvBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        x = x.view(x.shape[0], 4, 4, 4)
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        y = y.flatten(2).transpose(1, 2)
        return self.norm(y).reshape(y.shape[0], -1)


CASES = {
    "views": (Views, [(3, 4)], [(5, 4)]),
    "in_place": (InPlace, [(3, 4)], [(6, 4)]),
    "aliases_inputs": (AliasesInputs, [(2, 3), (2, 3)], [(4, 3), (4, 3)]),
    "multi_output": (MultiOutput, [(3, 5)], [(2, 5)]),
    "nested_outputs": (NestedOutputs, [(3, 2)], [(4, 2)]),
    "constants": (Constants, [(2, 4)], [(7, 4)]),
    "mlp": (MLP, [(1, 4)], [(8, 4)]),
    "conv_block": (ConvBlock, [(1, 64)], [(3, 64)]),
}


def make_inputs(shapes, seed):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=generator) for shape in shapes)


def eager(model, inputs):
    with torch.inference_mode():
        return model(*inputs)


def assert_same(actual, expected):
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    assert actual_spec == expected_spec
    for got, want in zip(actual_leaves, expected_leaves):
        assert isinstance(got, torch.Tensor) and got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def run_protocol(model, first, second, options):
    module = StaticModule(model, first, options)
    runtime = module.runtime()
    for inputs in (first, second, first):
        before = [x.clone() for x in inputs]
        out = runtime.run(*inputs)
        assert_same(out, eager(model, inputs))
        for x, kept in zip(inputs, before):
            assert torch.equal(x, kept), "the runtime modified an input"
    return module, runtime


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: "-".join(id_parts(options)))
@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_made_graphs_match_eager(case, options):
    factory, first_shapes, second_shapes = CASES[case]
    torch.manual_seed(0)
    model = factory().eval()
    module, _ = run_protocol(model, make_inputs(first_shapes, 1), make_inputs(second_shapes, 2), options)
    assert module.shapes_prepared == 2


@pytest.mark.parametrize("case", ["conv_block", "in_place", "multi_output", "mlp"])
def test_core_aten_graphs_match_eager(case):
    """``decompose``: the functionalized core-ATen graph, where every op has an out variant."""
    factory, first_shapes, second_shapes = CASES[case]
    torch.manual_seed(0)
    model = factory().eval()
    module, _ = run_protocol(
        model, make_inputs(first_shapes, 1), make_inputs(second_shapes, 2), StaticOptions(decompose=True)
    )
    if case == "conv_block":  # conv2d, batch_norm, max_pool2d and layer_norm gain out variants
        plain = StaticModule(model, make_inputs(first_shapes, 1), StaticOptions(measure_choices=False))  # fused
        assert module.prepared.count(RunAs.OUT) > plain.prepared.count(RunAs.OUT)
        assert module.prepared.slab_bytes > plain.prepared.slab_bytes
