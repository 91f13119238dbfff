"""What a sixth round of models from outside the zoo broke (``benchmarks/outside_round6.py``,
run by ``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import distributions, nn
from torch.nn import functional as F

from srbench.inputs import Inputs
from srbench.measure.aliasing import aliasing
from srbench.measure.equivalence import eager_answer
from srbench.memory.lifetimes import analyze_lifetimes
from srbench.options import StaticOptions
from srbench.static import StaticModule

OPTIONS = [
    StaticOptions(),
    StaticOptions(enable_out_variant=False),
    StaticOptions(manage_output_tensors=True),
    StaticOptions(cleanup_activations=False),
    StaticOptions(decompose=True),
    StaticOptions(streams=2),
]


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def assert_as_eager(model: nn.Module, calls: list[Inputs], options: StaticOptions) -> None:
    """Prepared on the first call, every call (and the first again) gives eager's values, and its
    outputs share memory with its inputs and each other as eager's do."""
    expected = [eager_answer(model, call) for call in calls]
    runtime = StaticModule(model, calls[0].clone(), options).runtime()
    for call, answer in [*zip(calls, expected), (calls[0], expected[0])]:
        fresh = call.clone()
        got = fresh.call(runtime)
        torch.testing.assert_close(got, answer.outputs, rtol=1e-4, atol=1e-5)
        assert aliasing(got, fresh) == aliasing(answer.outputs, answer.inputs_after)


class NormalLogProb(nn.Module):
    """``Normal(mean, scale).log_prob(x)``: the distribution broadcasts its parameters with
    ``torch.broadcast_tensors``, whose results are views of its arguments."""

    def forward(self, mean: torch.Tensor, log_scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return distributions.Normal(mean, log_scale.exp(), validate_args=False).log_prob(x)


@pytest.mark.parametrize("options", OPTIONS)
def test_a_normal_distributions_log_prob(options):
    """``broadcast_tensors`` returns a view of each argument under a schema saying it allocates.
    Its result was taken for a view of its first argument only, so the second (the scale
    ``exp`` computed) counted dead at ``broadcast_tensors``, its memory was given to the next
    ops, and ``log_prob`` read their values: wrong numbers, silently (``policy_heads``, under
    every option with out variants). Each result is now the view of the argument whose memory
    it shares."""
    calls = [Inputs.of(randn(1, 3), randn(1, 3, seed=1), randn(1, 3, seed=2))]
    calls.append(Inputs.of(randn(4, 3, seed=3), randn(4, 3, seed=4), randn(4, 3, seed=5)))
    assert_as_eager(NormalLogProb(), calls, options)


class Broadcasts(nn.Module):
    """``broadcast_tensors`` and ``meshgrid`` of intermediates, their results read after the
    intermediates' last other use and returned."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x, y = torch.broadcast_tensors(a.exp(), b.sin())
        u, v = torch.meshgrid(a[0].cos(), b[:, 0].tanh(), indexing="ij")
        return x * 2 + (y - 1), u + v, y, v


@pytest.mark.parametrize("options", OPTIONS)
def test_views_of_several_arguments_from_one_op(options):
    call = Inputs.of(randn(1, 5), randn(4, 1, seed=1))
    assert_as_eager(Broadcasts(), [call, Inputs.of(randn(1, 3, seed=2), randn(6, 1, seed=3))], options)


def test_each_result_of_broadcast_tensors_lives_in_its_arguments_storage():
    """The lifetime analysis given a per-result alias (a ``getitem``'s name, as the resolver
    reports what it saw) maps that result onto its argument's storage and plans none for it."""
    exported = torch.export.export(Broadcasts(), (randn(1, 5), randn(4, 1, seed=1)))
    graph = exported.graph_module.graph
    op = next(n for n in graph.nodes if n.target is torch.ops.aten.broadcast_tensors.default)
    items = sorted(op.users, key=lambda user: user.args[1])
    exp, sin = op.args[0]
    analysis = analyze_lifetimes(graph, aliases={items[0].name: exp.name, items[1].name: sin.name})
    bases = [analysis.storage_of[exp.name], analysis.storage_of[sin.name]]
    assert [analysis.storage_of[item.name] for item in items] == bases
    assert analysis.outputs_of[op.name] == (None, None)
    schema_only = analyze_lifetimes(graph)  # the schema says it allocates both
    assert {r.id for r in schema_only.all_records} >= {item.name for item in items}
    assert not {r.id for r in analysis.all_records} & {item.name for item in items}


class ReassignedBuffer(nn.Module):
    """An exponential average kept in a registered buffer, assigned anew (not written in place)."""

    ema: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ema = self.ema * 0.5 + x.mean(0)
        return x - self.ema


@pytest.mark.parametrize("options", OPTIONS)
def test_a_buffer_assigned_anew_in_forward(options):
    """``nn.Module`` stores a tensor assigned to a buffer's name in its buffer table. Preparing
    calls the model in eager (the check for state carried in plain attributes) and put the
    buffers' values back into the tensors they were, not the tables: the model kept that call's
    new tensor, and the program read state one call ahead of eager's at every call (wrong
    numbers, silently). The tables get their tensors back."""
    eager, static = ReassignedBuffer(), ReassignedBuffer()
    calls = [randn(2, 4), randn(3, 4, seed=1), randn(2, 4, seed=2)]
    runtime = StaticModule(static, Inputs.of(calls[0].clone()), options).runtime()
    assert torch.equal(static.ema, torch.zeros(4))  # preparing leaves the model as it was
    for x in calls:
        with torch.no_grad():
            expected = eager(x.clone())
        torch.testing.assert_close(runtime(x.clone()), expected)
        torch.testing.assert_close(static.ema, eager.ema)


class DropoutInEval(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dropout, self.linear = nn.Dropout(0.3), nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.dropout(x), self.dropout(self.linear(x)) * 2, self.dropout(x), F.dropout(x, 0.0, training=True)


@pytest.mark.parametrize("options", [StaticOptions(decompose=True), StaticOptions(decompose=True, streams=2)])
def test_dropout_in_eval_under_decompose_returns_its_input(options):
    """Eager's ``dropout`` out of training returns its input itself; torch's lowering to core
    ATen makes it ``clone`` whatever the decomposition table says, so under ``decompose`` the
    output shared memory with nothing (``dropout_eval``). It is lowered as ``alias`` now; so is
    dropout at ``p == 0`` in training, which eager answers with its input too."""
    model = DropoutInEval().eval()
    assert_as_eager(model, [Inputs.of(randn(2, 6)), Inputs.of(randn(3, 6, seed=1))], options)


class Contiguous(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.contiguous()


def test_the_sweep_compares_aliasing_at_both_shapes():
    """``x.contiguous()`` is ``x`` itself for a contiguous input and a copy of a transposed one:
    a runtime returning its input at every call agrees with eager at a contiguous first call and
    not at a transposed second one, which the sweep compared for strides only. It compares
    aliasing at both shapes now."""
    from benchmarks import outside_models

    model = Contiguous()
    calls = [Inputs.of(randn(2, 3)), Inputs.of(randn(3, 4, seed=1).t())]
    expected = [eager_answer(model, call) for call in calls]
    assert outside_models._aliasing_check(lambda x: x, calls[0], expected[0]) is None
    check = outside_models._aliasing_at_each_shape(lambda x: x, calls, expected)
    assert check is not None and check.outcome is outside_models.Outcome.WRONG
    assert check.detail.startswith("shape 1: outputs alias unlike eager's")
    assert check.detail.endswith("shares memory with ['input args[0] (the same view)'], eager's with nothing")
    assert outside_models._aliasing_at_each_shape(lambda x: x.contiguous(), calls, expected) is None


class WritesThroughUnsafeChunk(nn.Module):
    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = a.exp()
        first, second = e.unsafe_chunk(2, dim=1)
        second.mul_(2)
        return e, first.sum()


@pytest.mark.parametrize("options", [StaticOptions(decompose=True), StaticOptions(decompose=True, streams=2)])
def test_a_write_through_an_unsafe_chunk_under_decompose(options):
    """``unsafe_chunk``'s results are views of its input under a schema that says they are not;
    torch's lowering copies them, so a write through one was lost (torch's own lowered program
    disagrees with eager) and srbench followed it under ``decompose``. Such a capture is not
    lowered."""
    model = WritesThroughUnsafeChunk()
    call = Inputs.of(randn(3, 4))
    exported = torch.export.export(model, (randn(3, 4),))
    lowered = exported.run_decompositions().module()(*call.clone().args)
    assert not torch.allclose(lowered[0], model(*call.clone().args)[0])  # torch's own answer differs
    assert_as_eager(model, [call, Inputs.of(randn(2, 6, seed=1))], options)
