"""The candidate programs a prepare measures (lean attention or eager's fused layers, rewrites or
none) come from one capture of the model, each from a copy of it: ``torch.export`` runs once per
input signature, and each candidate is the program its own capture gave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from srbench.graph import capture
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule
from srbench.static.out_variants import OUT_VARIANTS
from srbench.static.passes import FUSED_LAYER_PASSES, PASSES, RewriteOutcome
from srbench.static.prepared import capture_graph, prepare_graph

FUSED_KERNEL = "aten._transformer_encoder_layer_fwd.default"


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


def call_targets(graph: torch.fx.Graph) -> set[str]:
    return {str(node.target) for node in graph.nodes if node.op == "call_function"}


@pytest.fixture
def exports(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The models ``torch.export`` is asked to capture from here on, by type name."""
    captured: list[str] = []
    export = torch.export.export

    def counted(model: nn.Module, *args: Any, **kwargs: Any) -> Any:
        captured.append(type(model).__name__)
        return export(model, *args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counted)
    return captured


@pytest.mark.parametrize("decompose", [False, True])
def test_the_three_candidates_are_prepared_from_one_capture(
    rewrites_measured_as: Callable[..., list[tuple]], exports: list[str], decompose: bool
) -> None:
    # the lean attention measured slower than the fused layers, and those slower than no rewrites
    calls = rewrites_measured_as((1.2, 1.0), (1.2, 1.0))
    x = torch.randn(1, 10, 32)
    module = StaticModule(Encoder().eval(), (x,), StaticOptions(decompose=decompose))
    assert exports == ["Encoder"], "one capture for the three programs"
    if not decompose:
        (lean, fused), (fused_again, plain) = calls
        assert fused_again.program is fused.program
        graphs = [program.captured.graph for program in (lean, fused, plain)]
        assert len({id(graph) for graph in graphs}) == 3, "each candidate prepares a copy of its own"
        assert FUSED_KERNEL not in call_targets(lean.captured.graph)
        assert FUSED_KERNEL in call_targets(fused.captured.graph)
        assert not any(rewrite.outcome is RewriteOutcome.APPLIED for rewrite in plain.rewrites)
        assert {rewrite.outcome for rewrite in module.prepared.rewrites} == {RewriteOutcome.SLOWER}
    with torch.inference_mode():
        torch.testing.assert_close(module.runtime()(x), module.model(x), rtol=1e-4, atol=1e-5)
    module.runtime()(torch.randn(2, 7, 32))  # a new shape: captured once more
    assert len(exports) == 2


@pytest.mark.parametrize(
    ("options", "passes"),
    [
        (StaticOptions(), PASSES),
        (StaticOptions(), FUSED_LAYER_PASSES),
        (StaticOptions(rewrite=False), PASSES),
        (StaticOptions(decompose=True), PASSES),
    ],
    ids=["lean", "fused layers", "no rewrites", "decomposed"],
)
def test_a_program_from_a_copy_of_the_capture_is_the_one_its_own_capture_gives(
    options: StaticOptions, passes: tuple
) -> None:
    model, x = Encoder().eval(), torch.randn(1, 10, 32)
    inputs = Inputs((x,))
    shared = capture_graph(model, inputs, options, name="encoder")
    before = [node.format_node() for node in shared.graph.nodes]

    def prepared(captured: Any = None) -> Any:
        return prepare_graph(
            model, inputs, options, name="encoder", out_variants=OUT_VARIANTS, passes=passes, captured=captured
        )

    own, from_copy = prepared(), prepared(shared.copy())
    # the graphs the programs run, node by node (how each op is called may differ: a choice between
    # an out variant and the op is timed at prepare time, and differs between fresh prepares too)
    assert [node.format_node() for node in from_copy.captured.graph.nodes] == [
        node.format_node() for node in own.captured.graph.nodes
    ]
    assert [(r.pass_name, r.outcome) for r in from_copy.rewrites] == [(r.pass_name, r.outcome) for r in own.rewrites]
    assert [node.format_node() for node in shared.graph.nodes] == before, "the capture stays as captured"


def test_a_copy_of_a_capture_shares_its_tensors_and_not_its_graph() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    captured = capture(model, (torch.randn(2, 8),))
    copied = captured.copy()
    # node by node, the names the signature gives (the input is 'input', which fx renames in a copy)
    assert [node.name for node in copied.graph.nodes] == [node.name for node in captured.graph.nodes]
    assert "input" in {node.name for node in copied.graph.nodes}
    assert copied.graph_module is copied.exported.graph_module
    assert copied.graph is not captured.graph
    assert copied.exported.graph_signature is not captured.exported.graph_signature
    for name, tensor in captured.exported.state_dict.items():
        assert copied.exported.state_dict[name] is tensor
    relu = next(node for node in copied.graph.nodes if node.target is torch.ops.aten.relu.default)
    relu.replace_all_uses_with(relu.args[0])
    copied.graph.erase_node(relu)
    assert torch.ops.aten.relu.default in {node.target for node in captured.graph.nodes}
    copied.graph_module.recompile()
    x = torch.randn(3, 8)
    (full,) = captured.graph_module(*captured.exported.state_dict.values(), x)
    (without_relu,) = copied.graph_module(*copied.exported.state_dict.values(), x)
    torch.testing.assert_close(full, model(x))
    torch.testing.assert_close(without_relu, model[2](model[0](x)))
