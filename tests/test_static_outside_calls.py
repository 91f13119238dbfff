"""What a second round of models and call patterns from outside the zoo broke (found by probing
``transformers`` architectures, stock ``torch.nn`` pieces and unusual calls beside eager), each
as the smallest model that shows it: a ``torch.Size`` in or out, an output with eager's
transposed strides holding an intermediate, effect tokens and linear-algebra checks under
``decompose``, a string output, an argument passed by keyword where the example passed it by
position, and a model that writes its own buffers (a step counter, a batch norm left training)
prepared with timed choices."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from torch import nn

from srbench.inputs import Inputs
from srbench.measure.equivalence import EquivalenceError, compare
from srbench.options import StaticOptions, id_parts
from srbench.static import StaticModule


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class ShapeOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, size: torch.Size) -> tuple[torch.Tensor, torch.Size]:
        return self.linear(x).reshape(size), x.shape


def test_a_torch_size_in_and_out_stays_a_size(conformance, static_options):
    """pytree rebuilds a ``torch.Size`` as a plain tuple: returned, the runtime's answer was a
    tuple where eager's is a Size; passed in, copying the call turned it into a tuple, which the
    signature check then refused ('must be a Size, got a tuple')."""
    first, second = Inputs.of(randn(2, 4), torch.Size([4, 2])), Inputs.of(randn(3, 4, seed=1), torch.Size([6, 2]))
    assert type(first.clone().args[1]) is torch.Size
    module = conformance(ShapeOut(), first, second, static_options)
    assert type(module.runtime()(*first.clone().args)[1]) is torch.Size


class TransposedOutput(nn.Module):
    """An output of an elementwise op on a transposed input: eager gives it transposed strides."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        column = (x * 3).sum(0, keepdim=True)  # an intermediate planned into the output's bytes
        return (x.t() + column.t()).abs()


def test_an_output_with_transposed_strides_hosts_an_intermediate(conformance, static_options):
    """An intermediate hosted in a fresh output of the same dtype was a tensor set to the output
    tensor itself, and ``set_(tensor)`` refuses a non-contiguous one: every run failed ('passed in
    tensor to be used as storage must be contiguous'). It is set to the output's storage now."""
    conformance(TransposedOutput(), (randn(16, 32),), (randn(8, 32, seed=1),), static_options)


class Inverse(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return torch.linalg.inv(a) * 2


class Factorisations(nn.Module):
    """Every op whose lowering splits off an error check (``_linalg_check_errors``)."""

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        spd = a @ a.mT
        return (
            torch.linalg.cholesky(spd),
            torch.linalg.solve(a, a[..., :2]),
            torch.linalg.lu_factor(a)[0],
            torch.linalg.ldl_factor(spd)[0],
            torch.linalg.matrix_power(a, -2),
        )


def test_decomposed_linalg_ops_keep_their_error_checks(conformance, static_options):
    """Lowering splits ``linalg.inv`` into ``linalg_inv_ex`` and a check of its ``info``; torch 2.11
    dropped the check, and a singular matrix gave NaN where eager raises (seen on the GPU machine).
    The ops that check stay whole: a singular matrix raises as in eager, on every torch."""
    first, second = randn(2, 3, 3) + 3 * torch.eye(3), randn(4, 3, 3, seed=1) + 3 * torch.eye(3)
    module = conformance(Inverse(), (first,), (second,), static_options, rtol=1e-4, atol=1e-5)
    with pytest.raises(torch.linalg.LinAlgError):
        module.runtime()(torch.zeros(2, 3, 3))
    module = conformance(Factorisations(), (first,), (second,), static_options, rtol=1e-4, atol=1e-4)
    with pytest.raises(torch.linalg.LinAlgError):
        module.runtime()(torch.zeros(2, 3, 3))
    if static_options.decompose:
        targets = {str(node.target) for node in module.prepared.captured.graph.nodes}
        assert not any(target.endswith("_ex.default") for target in targets), targets


class Printing(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.ops.aten._print("srbench-effect")
        return x + 1


def test_decomposed_effectful_ops_run_without_effect_tokens(conformance, static_options, capfd):
    """``run_decompositions()`` threads an effect token through an op with side effects
    (``with_effects(token, aten._print, ...)``): preparing refused the graph's TOKEN input. The
    tokens are removed and the op kept: it prints at every call, as in eager."""
    module = conformance(Printing(), (randn(3),), (randn(5, seed=1),), static_options)
    capfd.readouterr()
    module.runtime()(randn(3))
    assert capfd.readouterr().out.count("srbench-effect") == 1


class Tagged(nn.Module):
    def forward(self, x: torch.Tensor, mode: str = "amax") -> tuple[torch.Tensor, str]:
        return getattr(x, mode)(-1), mode


def test_string_leaves_are_compared_by_value(conformance, static_options):
    """The checker handed a string output (or argument) to ``torch.testing.assert_close``, which
    refuses strings with a TypeError: a model returning one could not be checked at all."""
    conformance(Tagged(), Inputs.of(randn(2, 4), "amax"), Inputs.of(randn(3, 4, seed=1), "amax"), static_options)
    x = randn(2)
    assert compare((x, "amax"), (x, "amax"), rtol=0, atol=0, run="run") is not None
    with pytest.raises(EquivalenceError, match="'sum'"):
        compare((x, "sum"), (x, "amax"), rtol=0, atol=0, run="run")


class TwoArguments(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, *, scale: float = 1.0) -> torch.Tensor:
        return self.linear(x) * scale + (0 if y is None else y)


@pytest.mark.parametrize(
    ("prepared", "called"),
    [
        (lambda x, y: Inputs.of(x, y), lambda x, y: Inputs.of(x, y=y)),
        (lambda x, y: Inputs.of(x=x, y=y), lambda x, y: Inputs.of(x, y, scale=1.0)),
        (lambda x, y: Inputs.of(x, y, scale=1.0), lambda x, y: Inputs.of(x, y)),
    ],
    ids=["positional-then-keyword", "keywords-then-positional", "default-left-out"],
)
@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_an_argument_passed_by_keyword_or_position_is_one_call(conformance, decompose, prepared, called):
    """Eager takes ``model(x, y)``, ``model(x, y=y)`` and ``model(x, y, scale=1.0)`` alike; the
    runtime refused any form but the prepared one ('expected 2 positional arguments, got 1',
    'keyword arguments differ: missing scale'). Its slow path now moves the arguments to the
    prepared form, and a scalar given with its default's value counts as left out."""
    first = prepared(randn(2, 4), randn(2, 4, seed=2))
    second = called(randn(3, 4, seed=1), randn(3, 4, seed=3))
    conformance(TwoArguments(), first, second, StaticOptions(decompose=decompose))  # the form, whatever the options


@pytest.mark.parametrize(
    "called",
    [lambda x, y: Inputs.of(x, y=y), lambda x, y: Inputs.of(x, y, scale=1.0)],
    ids=["keyword", "default-given"],
)
def test_profile_and_observe_take_a_call_in_another_form(one_thread, called):
    """``srbench profile`` and ``srbench observe`` bound the call as given, so a form other than
    the example's was refused there though ``run`` takes it."""
    from srbench.observe.static import observe_static
    from srbench.static.profile import profile_runtime

    module = StaticModule(TwoArguments().eval(), Inputs.of(randn(2, 4), randn(2, 4, seed=2)))
    call = called(randn(2, 4, seed=1), randn(2, 4, seed=3))
    assert len(profile_runtime(module, call, iterations=2, warmup=1).nodes) > 0
    assert len(observe_static(module, call).nodes) > 0


class Stateful(nn.Module):
    """A step counter in a buffer, and a convolution with a batch norm (which the prepare-time
    rewrites fold and time) beside two independent branches (which several streams may run)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.BatchNorm2d(8)
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, image: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.steps[:1].add_(1)
        return self.norm(self.conv(image)).relu() * self.steps, self.a(x).relu() + self.b(x).tanh()


class TrainingNorm(nn.Module):
    """A batch norm left in training mode: ``aten.batch_norm`` updates its running statistics in
    place, though its schema marks nothing written."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


# how a write reaches the state differs with these (in place, or returned and copied back); the
# other options do not change it, and every prepare here is timed: a few seconds each
STATE_OPTIONS = [
    StaticOptions(enable_out_variant=out, decompose=decompose) for out in (True, False) for decompose in (False, True)
]


@pytest.mark.parametrize("streams", [1, 2])
@pytest.mark.parametrize("model_class", [Stateful, TrainingNorm])
@pytest.mark.parametrize("options", STATE_OPTIONS, ids=lambda options: "-".join(id_parts(options)))
def test_state_the_model_writes_is_written_once_per_call(one_thread, options, streams, model_class):
    """Prepare-time timing (the rewrites, several streams against one) ran the program tens of
    times on the model's own buffers: a step counter stood at 58 before the first call. And a
    batch norm left training updated its running statistics during preparing, as the schema of
    ``aten.batch_norm`` hides the write. Eager's model and srbench's must hold the same state
    after each call."""
    options = dataclasses.replace(options, streams=streams)
    torch.manual_seed(0)
    eager_model = model_class().train(model_class is TrainingNorm)
    static_model = copy.deepcopy(eager_model)
    calls = [(randn(2, 3, 10, 10), randn(16, 8, seed=1)), (randn(3, 3, 12, 12, seed=2), randn(5, 8, seed=3))]
    if model_class is TrainingNorm:
        calls = [(randn(4, 8),), (randn(6, 8, seed=1),)]
    runtime = StaticModule(static_model, calls[0], options).runtime()
    for call in (calls[0], calls[1], calls[0]):
        with torch.no_grad():
            expected = eager_model(*call)
        torch.testing.assert_close(runtime(*call), expected, rtol=1e-4, atol=1e-5)
        for (name, want), got in zip(eager_model.state_dict().items(), static_model.state_dict().values()):
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=name)


def test_timing_restores_state_the_program_writes():
    """The written state a prepared program names is what the timing restores."""
    model = Stateful().eval()
    module = StaticModule(model, (randn(1, 3, 8, 8), randn(4, 8)), StaticOptions(measure_choices=False))
    assert [tensor is model.steps for tensor in module.prepared.written_state] == [True]


class Swap(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return b, a


@pytest.mark.parametrize("streams", [2, 4])
def test_a_graph_without_ops_runs_on_several_streams(conformance, streams):
    """A model that only returns its inputs has no op for stream 0: its threads program had an
    empty ``try:`` block, and preparing failed with an IndentationError in the generated code."""
    options = StaticOptions(streams=streams, measure_choices=False)
    conformance(Swap(), (randn(2), randn(3, seed=1)), (randn(4, seed=2), randn(1, seed=3)), options)


class Fill(nn.Module):
    def forward(self, x: torch.Tensor, value: float) -> torch.Tensor:
        return x.masked_fill(x > 0, value) * 2


def test_a_nan_argument_is_prepared_once(one_thread):
    """Scalars are baked into a program and looked up by value, and a NaN is unequal to itself:
    each call passing ``float("nan")`` missed the fast path's guard and the cache, and was
    captured and prepared anew (one more program per call, never freed)."""
    x = randn(4, 4)
    module = StaticModule(Fill(), (x, float("nan")))
    runtime = module.runtime()
    for value in (float("nan"), float("nan"), 1.0, float("nan")):
        torch.testing.assert_close(runtime(x, value), Fill()(x, value), equal_nan=True)
    assert module.shapes_prepared == 2  # NaN, and 1.0


class WritesInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
        seen.add_(1)
        return self.linear(x).relu() + seen


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
def test_example_inputs_made_under_inference_mode(one_thread, decompose):
    """Inputs made under ``torch.inference_mode`` (as eager runs are) are inference tensors: a
    model writing one could not be captured outside that mode ('Inplace update to inference
    tensor outside InferenceMode'), though eager and srbench both run it. Capture takes a copy."""
    with torch.inference_mode():
        example = (randn(2, 4), torch.zeros(2, 4))
    model = WritesInput()
    runtime = StaticModule(model, example, StaticOptions(decompose=decompose)).runtime()  # a capture matter
    for batch in (2, 3):
        x, seen, eager_seen = randn(batch, 4, seed=batch), torch.ones(batch, 4), torch.ones(batch, 4)
        with torch.no_grad():
            expected = model(x, eager_seen)
        torch.testing.assert_close(runtime(x, seen), expected)
        torch.testing.assert_close(seen, eager_seen)


class Attention(nn.Module):
    """GPT-2's attention in small: heads by SDPA with a padding mask, the result viewed flat."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        y = y.transpose(1, 2).contiguous().reshape(batch, length, 16)
        return torch.addmm(self.out.bias, y.view(-1, 16), self.out.weight.t())


def test_attention_whose_decomposition_breaks_a_view_is_captured(conformance):
    """Lowered to core ATen, SDPA's decomposition gives its result other strides than the graph
    says (pytorch/pytorch#136543): at a batch above 1 the ``view`` after it failed, and
    ``decompose`` could not capture GPT-2. It is lowered again with SDPA kept whole."""
    masks = [torch.ones(batch, length, dtype=torch.bool) for batch, length in ((2, 6), (3, 4))]
    for mask in masks:
        mask[-1, -2:] = False
    first, second = (randn(2, 6, 16), masks[0]), (randn(3, 4, 16, seed=1), masks[1])
    conformance(Attention(), first, second, StaticOptions(decompose=True), atol=1e-5)
