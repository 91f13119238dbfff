"""Sub-modules named as a ``torch.fx.GraphModule``'s own attributes (``graph``, ``code``,
``meta``): torch's lowering failed on them ("references nonexistent attribute lin of graph"), so
``decompose`` could not prepare such a model; their state is renamed around the lowering
(:mod:`srbench.graph.state_names`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.graph import capture
from srbench.graph.lowered_program import lowered_program_failure
from srbench.inputs import Inputs


class Layer(nn.Module):
    """A linear layer with a buffer forward writes in place (its input's mean)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("mean", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.mean.copy_(x.mean())
        return self.lin(x).relu() + self.mean


class NamedLikeGraphModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.graph, self.code, self.meta = Layer(), Layer(), Layer()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.meta(self.code(self.graph(x))))


def rows(n: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(n, 4, generator=torch.Generator().manual_seed(seed)),)


def test_torchs_own_lowering_fails_on_such_names():
    """The premise: torch alone cannot lower the model (if a torch fixes it, the renaming is moot)."""
    with torch.no_grad():
        exported = torch.export.export(NamedLikeGraphModule(), rows(3, 0), strict=False)
    with pytest.raises(RuntimeError, match="references nonexistent attribute lin of graph"):
        exported.run_decompositions()


def test_the_lowered_capture_keeps_the_models_own_names():
    model = NamedLikeGraphModule()
    signature = capture(model, rows(3, 0), decompose=True).exported.graph_signature
    state = {name for name, _ in (*model.named_parameters(), *model.named_buffers())}
    assert {spec.target for spec in signature.input_specs if spec.target is not None} == state
    assert set(signature.buffers_to_mutate.values()) == {"graph.mean", "code.mean", "meta.mean"}


def test_a_model_with_such_names_runs_as_eager(conformance, static_options):
    conformance(NamedLikeGraphModule(), rows(3, 0), rows(5, 1), static_options)


def test_torchs_lowered_program_of_such_a_model_is_not_said_to_fail():
    """The check of :mod:`srbench.graph.lowered_program` runs the program under the renamed names."""
    assert lowered_program_failure(NamedLikeGraphModule(), Inputs.coerce(rows(3, 0)), name="model") is None


class VmappedGraph(nn.Module):
    """``torch.vmap`` over a sub-module named ``graph``: such a capture is retraced at the ATen level
    without decompositions, with or without ``decompose``, and that retrace failed the same way."""

    def __init__(self) -> None:
        super().__init__()
        self.graph = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.vmap(self.graph)(x).relu()


def test_a_vmapped_submodule_named_graph_runs_as_eager(conformance, static_options):
    first, second = (torch.randn(n, 2, 4, generator=torch.Generator().manual_seed(n)) for n in (3, 5))
    conformance(VmappedGraph(), (first,), (second,), static_options)
