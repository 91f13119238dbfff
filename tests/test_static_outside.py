"""What models from outside the zoo broke (found by ``benchmarks/outside_models.py``), each as
the smallest model that shows it, under every option of the static runtime: outputs in registered
pytree containers of any kind (a transformers ``ModelOutput`` holding tuples, nested in another),
a batch of zero, a parameter the model writes in place under ``decompose``."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import pytest
import torch
from torch import nn

from srbench.inputs import Inputs
from srbench.static import StaticModule


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@dataclass
class Inner:
    pooled: torch.Tensor
    layers: tuple[torch.Tensor, ...]


@dataclass
class Outer:
    """As a transformers ``ModelOutput``: a container of its own holding tuples and another one."""

    logits: torch.Tensor
    hidden: tuple[torch.Tensor, ...]
    inner: Inner


torch.export.register_dataclass(Inner)
torch.export.register_dataclass(Outer)


class Pair(NamedTuple):
    first: torch.Tensor
    rest: tuple[torch.Tensor, torch.Tensor]


class Containers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> tuple[Outer, Pair]:
        h1 = self.a(x).relu()
        h2 = self.b(h1)
        outer = Outer(h2.sum(-1), (h1, h2), Inner(h2.mean(0), (x + 1, h1 * 2, h2.tanh())))
        return outer, Pair(h2 - 1, (h1.t(), h2.exp()))


def test_outputs_in_nested_registered_containers_keep_their_structure(conformance, static_options):
    """A node of a kind codegen did not spell out (dataclass, namedtuple) was rebuilt with the whole
    output spec from its already built children: a ModelOutput holding tuples came back with its
    tuples in the wrong places, one nesting another failed to unflatten."""
    conformance(Containers(), (randn(2, 4),), (randn(3, 4, seed=1),), static_options)


def test_transformers_model_output_with_hidden_states_and_attentions():
    transformers = pytest.importorskip("transformers", reason="the transformers extra is not installed")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=50,
        attn_implementation="eager",  # sdpa returns no attention weights
    )
    model = transformers.BertModel(config).eval()
    call = Inputs.of(input_ids=torch.randint(0, 50, (1, 6)), output_hidden_states=True, output_attentions=True)
    got = StaticModule(model, call).runtime()(**call.kwargs)
    with torch.no_grad():
        expected = model(**call.kwargs)
    assert type(got) is type(expected) and list(got.keys()) == list(expected.keys())
    assert len(got.hidden_states) == 2 and len(got.attentions) == 1
    torch.testing.assert_close(tuple(got.values()), tuple(expected.values()), rtol=1e-5, atol=1e-5)


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.linear(x).relu()
        return y * 2, y.sum(-1)


@pytest.mark.parametrize("batches", [(2, 0), (0, 2)], ids=["then-empty", "empty-first"])
def test_an_empty_batch_plans_no_bytes(conformance, static_options, batches):
    """A batch of zero makes every planned tensor empty: the slab's layout had no segment, and
    binding the first view failed with an IndexError."""
    first, second = batches
    conformance(Head(), (randn(first, 4),), (randn(second, 4, seed=1),), static_options)


class RenormedEmbedding(nn.Module):
    """``nn.Embedding(max_norm=...)`` renormalises the rows it looks up, in place, in its weight."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(10, 4, max_norm=1.0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids) * 3


def test_a_parameter_written_in_place_is_written_back(one_thread, static_options):
    """Under ``decompose`` the graph returns the parameter's new value (a PARAMETER_MUTATION
    output), which preparing refused; eager's model and srbench's must end with the same weight."""
    torch.manual_seed(0)
    eager_model = RenormedEmbedding().eval()
    static_model = copy.deepcopy(eager_model)
    initial = eager_model.embedding.weight.detach().clone()
    first, second = torch.tensor([[1, 2, 2, 5]]), torch.tensor([[7, 1], [0, 9]])
    runtime = StaticModule(static_model, (first,), static_options).runtime()
    for ids in (first, second, first):
        with torch.no_grad():
            expected = eager_model(ids)
        torch.testing.assert_close(runtime(ids), expected)
        torch.testing.assert_close(static_model.embedding.weight, eager_model.embedding.weight, rtol=0, atol=0)
    assert not torch.equal(static_model.embedding.weight, initial)  # the rows looked up were renormalised


def test_the_checker_compares_registered_dataclasses_by_their_fields():
    """A registered dataclass's context is a list of field-name lists: the structure check took
    it for dict keys and failed with 'unhashable type'; it must compare it and find differences."""
    from srbench.measure.equivalence import structure_difference

    x = randn(2)
    same = Outer(x, (x, x), Inner(x, (x,)))
    assert structure_difference(same, Outer(x, (x, x), Inner(x, (x,)))) is None
    shorter = Outer(x, (x,), Inner(x, (x,)))
    assert structure_difference(shorter, same) == "[1] has 1 elements, eager's 2"  # the second field


class ConvolutionsThenView(nn.Module):
    """A classifier head as older CNNs write it (``x.view(x.size(0), -1)``), and an
    ``as_strided`` read of a convolution's result."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 36, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.norm(self.conv(x)))
        return self.head(y.view(y.shape[0], -1)), y.as_strided((y.shape[0], 8, 2, 2), (288, 36, 6, 1))


def test_views_of_a_rewritten_convolution_read_it_as_captured(conformance, static_options):
    """The fused convolution's result is channels-last: the view captured on a contiguous tensor
    failed at prepare time ('view size is not compatible'), an as_strided would read other
    elements. They now read a contiguous copy, and the rewrite stays applied."""
    options = dataclasses.replace(static_options, measure_choices=False)  # kept whatever its speed
    model = ConvolutionsThenView().eval()
    module = conformance(model, (randn(1, 3, 6, 6),), (randn(2, 3, 6, 6, seed=1),), options)
    fused = [rewrite.outcome.value for rewrite in module.prepared.rewrites if rewrite.pass_name == "fused_convolution"]
    if torch.backends.mkldnn.is_available() and not options.decompose:
        assert fused == ["applied"]


class MaskAnd(nn.Module):
    """``&`` of boolean masks, whose result here is all False (an unwritten boolean buffer can
    hold that by chance)."""

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        kept = pad.logical_not().to(torch.int64)
        left_aligned = (kept.cummin(dim=1).values == kept).all()
        return x.masked_fill(pad.unsqueeze(-1) & left_aligned, 0.0)


def test_a_candidate_that_ignores_out_is_not_chosen(conformance, static_options):
    """``torch.__and__`` (the binding of ``aten.__and__``) is Python's operator protocol: given
    ``out=`` it returns NotImplemented and writes nothing. Boolean out buffers were not poisoned,
    so where the memory happened to hold the answer the candidate passed, and later runs returned
    stale masks: eager's answer or not depending on what memory held."""
    pad = torch.zeros(3, 5, dtype=torch.bool)
    pad[-1, -3:] = True
    pad[0, 0] = True  # not left-aligned: the & is all False
    module = conformance(MaskAnd(), (randn(3, 5, 4), pad), (randn(2, 4, 4, seed=1), pad[1:, 1:]), static_options)
    labels = [plan.call.label for plan in module.prepared.plans if plan.call is not None and plan.call.out]
    assert "torch.__and__" not in labels


def test_boolean_out_buffers_are_poisoned_with_the_opposite_of_the_result():
    from srbench.static.resolve import _poisoned_buffers

    reference = torch.tensor([[True, False], [False, False]])
    (buffer,) = _poisoned_buffers([reference], torch.device("cpu"), [reference])
    assert torch.equal(buffer, reference.logical_not())


def padding(batch: int, length: int, padded: int) -> torch.Tensor:
    mask = torch.zeros(batch, length, dtype=torch.bool)
    mask[-1, length - padded :] = True
    return mask


class PaddedEncoder(nn.Module):
    """A stock ``nn.TransformerEncoder`` (nested tensors enabled, the default) with a final norm."""

    def __init__(self) -> None:
        super().__init__()
        norm = nn.LayerNorm(16)
        nn.init.normal_(norm.bias)  # norm(0) is not 0: eager's padded positions hold it
        layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=norm)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=pad)


def test_transformer_encoder_padding_as_eager_nested_path(conformance, static_options):
    """Eager runs a padded batch through nested tensors and gives ``norm(0)`` at padded positions;
    the traced graph computed them. The second call's padding is not at the end of a sequence,
    where eager keeps the padded path: its values there."""
    torch.manual_seed(0)
    unaligned = padding(3, 5, 2)
    unaligned[0, 0] = True
    first = (randn(2, 6, 16), padding(2, 6, 3))
    conformance(PaddedEncoder().eval(), first, (randn(3, 5, 16, seed=1), unaligned), static_options, atol=1e-5)
