"""Conformance of values that prepare cannot compare: unspecified results (``empty``-like ops),
random ops, results whose size depends on data; and a registered out variant that fails its
check is reported, not dropped silently."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from srbench.memory.lifetimes import analyze_lifetimes
from srbench.options import id_parts
from srbench.static import InputSignatureError, OutVariantRegistry, OutVariantWarning, StaticModule, StaticOptions
from srbench.static.choose import RunAs
from srbench.static.resolve import ResultCheck

aten = torch.ops.aten


class Unspecified(torch.nn.Module):
    """Every ``empty``-like op, each result overwritten before it is read, as eager code does."""

    def forward(self, x):
        a = torch.empty_like(x)
        a.copy_(x * 2)
        b = x.new_empty(x.shape)
        b.fill_(1.5)
        c = torch.empty(x.shape[0], 3)
        c.zero_()
        d = torch.empty_strided((x.shape[1], x.shape[0]), (1, x.shape[1]))
        d.copy_(x.t())
        e = x.new_empty_strided(x.shape, x.stride())
        torch.mul(x, 3, out=e)
        return a + b, c, d, e


def pair(*shapes: tuple[int, ...], seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*shape, generator=generator) for shape in shapes)


def test_unspecified_values_are_checked_by_geometry_only(conformance, static_options):
    """Preparing compared candidates' values with the op's own uninitialised memory: it failed with
    'no candidate matched' or passed, depending on what memory held."""
    conformance(Unspecified(), pair((4, 3)), pair((6, 3), seed=1), static_options)


@pytest.mark.parametrize(
    "op",
    [aten.empty.memory_format, aten.empty_like.default, aten.new_empty.default, aten.empty_strided.default],
    ids=str,
)
def test_uninitialised_and_random_ops_are_compared_by_geometry(op):
    x = torch.randn(4, 3)
    assert ResultCheck.of(op, lambda: torch.empty_like(x), ()) is ResultCheck.GEOMETRY
    assert ResultCheck.of(aten.rand_like.default, lambda: torch.rand_like(x), ()) is ResultCheck.GEOMETRY
    assert ResultCheck.of(aten.add.Tensor, lambda: x + 1, ()) is ResultCheck.VALUES


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_a_tagged_op_is_checked_by_what_it_answers_under_two_seeds(train):
    """``native_dropout`` carries torch's nondeterministic tag in both modes; only in training
    does it draw. Telling it leaves the caller's random state as it was."""
    x = torch.randn(4, 3)
    state = torch.get_rng_state()
    check = ResultCheck.of(aten.native_dropout.default, lambda: aten.native_dropout(x, 0.5, train), ())
    assert check is (ResultCheck.GEOMETRY if train else ResultCheck.VALUES)
    assert torch.equal(torch.get_rng_state(), state)


def test_a_tagged_op_that_draws_is_checked_by_geometry_where_its_answers_agree():
    """``bernoulli`` of ones answers ones under any seed, as a coin flip answers the same under two
    seeds half the time: an op that moves the generator is random, whatever two draws gave."""
    ones = torch.ones(3)
    assert ResultCheck.of(aten.bernoulli.default, lambda: torch.bernoulli(ones), ()) is ResultCheck.GEOMETRY


class EvalLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 5, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0] * 2


class NoDropout(torch.nn.Module):
    def forward(self, x):
        return torch.native_dropout(x * 2, 0.5, False)


def _perturbed(op: torch._ops.OpOverload):
    """An out variant of ``op`` that writes the op's results plus one."""

    def perturbed(*args, out):
        for buffer, result in zip(out, op(*args)):
            buffer.copy_(result + 1)

    return perturbed


@pytest.mark.parametrize(
    ("model", "op"), [(EvalLSTM, aten.lstm.input), (NoDropout, aten.native_dropout.default)], ids=["lstm", "dropout"]
)
def test_a_wrong_out_variant_of_a_tagged_op_with_fixed_answers_is_refused(model, op, one_thread):
    """An eval-mode ``lstm`` and ``native_dropout(train=False)`` carry the nondeterministic tag:
    their candidates were checked by geometry only, so an out variant writing wrong values was
    used, and the runtime answered those."""
    torch.manual_seed(0)
    module, x = model().eval(), torch.randn(2, 3, 4)
    registry = OutVariantRegistry()
    registry.register(op, _perturbed(op))
    pattern = rf"registered out variant .*perturbed for {op._schema.name} .* is not used: its values differ"
    with pytest.warns(OutVariantWarning, match=pattern):
        static = StaticModule(module, (x,), StaticOptions(), out_variants=registry)
    torch.testing.assert_close(static.runtime()(x), module(x), rtol=0, atol=0)


class Dropout(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.dropout(x, 0.5, training=True) + 1


def test_a_random_op_is_still_checked_by_geometry_and_prepares(one_thread):
    """Dropout in training draws: its candidates, a registered out variant among them, are held
    to the op's geometry, not to values of another draw."""
    registry = OutVariantRegistry()
    registry.register(aten.dropout.default, lambda x, p, train, *, out: out.copy_(aten.dropout(x, p, train)))
    x = torch.rand(64, 32) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutVariantWarning)
        module = StaticModule(Dropout(), (x,), StaticOptions(), out_variants=registry)
    first, second = (module.runtime()(x) for _ in range(2))
    assert not torch.equal(first, second)
    for got in (first, second):
        assert bool(((got == 1) | torch.isclose(got, 2 * x + 1)).all())


# A random op whose values differ at every call, by construction: comparing them with the op's
# own result never agrees, so only a check by geometry can prepare it.
_counter = iter(range(1, 1_000_000))
_library = torch.library.Library("srbench_test_random", "DEF")
_library.define("draw(Tensor x) -> Tensor", tags=(torch.Tag.nondeterministic_seeded,))


@torch.library.impl(_library, "draw", "CompositeExplicitAutograd")
def _draw(x: torch.Tensor) -> torch.Tensor:
    return torch.full_like(x, float(next(_counter)))


@torch.library.register_fake("srbench_test_random::draw", lib=_library)
def _draw_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Random(torch.nn.Module):
    def forward(self, x):
        drawn = torch.ops.srbench_test_random.draw(x)
        return x + 1, drawn.shape[0] * x, (drawn > 0).sum()


def test_random_op_is_prepared_by_geometry_and_redrawn_at_every_run(one_thread):
    x = torch.randn(3, 2)
    runtime = StaticModule(Random(), (x,)).runtime()
    first, second = runtime(x), runtime(x)
    torch.testing.assert_close(first[0], x + 1)
    assert int(first[2]) == int(second[2]) == 6


class DataDependent(torch.nn.Module):
    """Results whose size depends on values, mixed with ordinary planned ops."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.linear(x)
        picked = y[y > 0]  # boolean-mask indexing
        where = torch.nonzero(x > 0.5)
        negative = torch.masked_select(x, x < 0) * 3
        values, counts = torch.unique(torch.round(x), return_counts=True)
        return picked * 2, picked.sum() + y.mean(), where, negative, values, counts, torch.relu(y) + 1


def test_data_dependent_shapes_run_as_fallback_and_the_rest_stays_planned(conformance, static_options):
    torch.manual_seed(0)
    model = DataDependent().eval()
    module = conformance(model, pair((5, 3)), pair((7, 3), seed=1), static_options)
    # the same shape with other values: other result sizes, the same prepared program
    runtime = module.runtime()
    for seed in (2, 3, 4):
        (x,) = pair((5, 3), seed=seed)
        for got, want in zip(runtime(x), model(x)):
            torch.testing.assert_close(got, want)
    assert module.shapes_prepared == 2
    plans = {plan.node.name: plan.how for plan in module.prepared.plans}
    for name, how in plans.items():
        if name.startswith(("nonzero", "masked_select", "_unique2", "index")):
            assert how is RunAs.FALLBACK, (name, how)
    if static_options.enable_out_variant:
        assert module.prepared.count(RunAs.OUT) >= 3  # linear, relu, sum... stay in the slab


def test_lifetimes_leave_data_dependent_results_unplanned():
    exported = torch.export.export(DataDependent().eval(), pair((5, 3)), strict=False)
    analysis = analyze_lifetimes(exported.graph)
    planned = {record.id for record in analysis.all_records}
    assert "masked_select" in analysis.unplanned and "nonzero" in analysis.unplanned
    assert "masked_select" not in planned and "nonzero" not in planned
    assert "linear" in planned and "relu" in planned  # the rest of the graph is planned


class Tanh(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x) * 2


def _wrong_values(x, *, out):
    out.copy_(torch.tanh(x) + 1)


def _raises(x, *, out):
    raise ValueError("not today")


def _reallocates(x, *, out):
    out.set_(torch.tanh(x))  # the right values, in memory of its own


def _resizes(x, *, out):
    torch.tanh(x.flatten(), out=out)  # torch resizes the 2-D buffer to 1-D (and warns) ...
    out.resize_(x.shape)  # ... and this gives it its shape back, in the same memory


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        (_wrong_values, r"its values differ from the op's \(largest absolute difference 1\)"),
        (_raises, r"it raised ValueError: not today"),
        (_reallocates, r"it did not write into the out tensor it was given"),
        (_resizes, r"it resized the out tensor it was given \(deprecated in torch"),
    ],
    ids=["wrong-values", "raises", "reallocates", "resizes"],
)
def test_registered_out_variant_failing_its_check_is_reported(function, reason, one_thread):
    registry = OutVariantRegistry()
    registry.register("aten::tanh", function)
    x = torch.randn(4, 3)
    pattern = rf"registered out variant {function.__name__} for aten::tanh \(node 'tanh'\) is not used: {reason}"
    with pytest.warns(OutVariantWarning, match=pattern):
        module = StaticModule(Tanh(), (x,), StaticOptions(), out_variants=registry)
    torch.testing.assert_close(module.runtime()(x), torch.tanh(x) * 2)
    assert all(not plan.call.label.startswith("registered") for plan in module.prepared.plans if plan.call)


def test_registered_out_variant_that_works_gives_no_warning(one_thread):
    registry = OutVariantRegistry()
    registry.register("aten::tanh", lambda x, *, out: torch.tanh(x, out=out))
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutVariantWarning)
        module = StaticModule(Tanh(), (torch.randn(4, 3),), StaticOptions(), out_variants=registry)
    assert any(plan.call and plan.call.label == "registered aten::tanh" for plan in module.prepared.plans)


def test_an_out_variant_that_resizes_its_buffer_is_not_used_and_nothing_warns(one_thread):
    """``linear.out`` on a 1-D input computes a [1, n] result into the n-element buffer (torch
    resizes it, warning that this is deprecated) and squeezes it back: right values, in place,
    but a deprecation warning at every run; the op runs another way, silently."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        module = StaticModule(model, (torch.randn(8),), StaticOptions(measure_choices=False))
        runtime = module.runtime()
        for _ in range(2):
            x = torch.randn(8)
            torch.testing.assert_close(runtime(x), model(x))
    linear = next(plan for plan in module.prepared.plans if plan.kind == "aten::linear")
    assert linear.call is None or linear.call.label != "aten.linear.out"


@pytest.mark.parametrize("works", [True, False], ids=["used", "refused"])
def test_the_profile_shows_which_path_each_node_took(works, one_thread):
    registry = OutVariantRegistry()
    registry.register("aten::tanh", (lambda x, *, out: torch.tanh(x, out=out)) if works else _wrong_values)
    x = torch.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OutVariantWarning)
        module = StaticModule(Tanh(), (x,), StaticOptions(), out_variants=registry)
    profile = module.runtime().profile((x,), iterations=2, warmup=0)
    paths = {path.node: (path.path, path.call) for path in profile.paths}
    assert paths["tanh"] == (("out", "registered aten::tanh") if works else ("out", "torch.tanh"))
    assert paths["mul"][0] in ("out", "fallback")
    table = profile.table()
    assert "path" in table and ("registered aten::tanh" in table) is works
    assert json.loads(profile.to_json())["paths"][0]["how"] == "out"


class QR(torch.nn.Module):
    def __init__(self, outputs_in_slab: bool):
        super().__init__()
        self.outputs_in_slab = outputs_in_slab

    def forward(self, x):
        q, r = torch.linalg.qr(x)
        return (q * 1, r * 1) if self.outputs_in_slab else (q, r)


@pytest.mark.parametrize("shape", [(5, 5), (5, 3), (3, 5)], ids=str)
def test_an_out_kernel_that_decides_by_storage_identity_is_checked_on_one_storage(one_thread, shape):
    """linalg_qr's out kernel computes in Q and takes ``Q.is_alias_of(R)`` to mean it computed in
    R: given views of one slab (or arena) it returned garbage for R, or failed an internal assert
    for a wide input, while the prepare-time check, on buffers of their own, passed it."""
    (x,) = pair(shape)
    # both results in the slab, or both graph outputs in the arena of managed outputs
    for model, options in ((QR(True), StaticOptions()), (QR(False), StaticOptions(manage_output_tensors=True))):
        got = StaticModule(model, (x,), options).runtime()(x)
        for a, b in zip(got, model(x)):
            torch.testing.assert_close(a, b)


def test_complex32_results_are_compared_as_pairs_of_reals(one_thread):
    """``torch.equal`` has no complex32 kernel: checking a ``chalf()`` candidate raised."""

    class ToComplex32(torch.nn.Module):
        def forward(self, x):
            return x.chalf() * 2

    (x,) = pair((3, 4))
    got = StaticModule(ToComplex32(), (x,)).runtime()(x)
    assert got.dtype == torch.complex32
    torch.testing.assert_close(torch.view_as_real(got), torch.view_as_real(ToComplex32()(x)))


class SparseResults(torch.nn.Module):
    """Sparse results of ops: one returned, one turned dense again inside the model."""

    def forward(self, x):
        return x.to_sparse(), (x * 3).to_sparse_csr().to_dense() + 1


# decompose is left out: torch.export's run_decompositions cannot lower sparse results (torch 2.13)
@pytest.mark.parametrize(
    "options",
    [
        StaticOptions(enable_out_variant=out, cleanup_activations=c, manage_output_tensors=m)
        for out in (True, False)
        for c in (True, False)
        for m in (True, False)
    ],
    ids=lambda o: "-".join(id_parts(o)),
)
def test_sparse_results_run_as_fallback_and_are_checked_densely(conformance, options):
    """A sparse result has no strides to plan: the value check called ``torch.equal`` on it (no
    sparse kernel) and preparing failed (OpInfo sweep: ``to_sparse``)."""
    x = torch.randn(4, 3).relu()
    module = conformance(SparseResults(), (x,), (torch.randn(5, 3).relu(),), options)
    plans = {plan.node.name: plan.how for plan in module.prepared.plans}
    assert plans["to_sparse"] is RunAs.FALLBACK


def test_a_sparse_input_is_refused_before_any_op_runs():
    class Dense(torch.nn.Module):
        def forward(self, x):
            return x.to_dense() + 1

    with pytest.raises(InputSignatureError, match="input x is a sparse_csr tensor: the static runtime takes strided"):
        StaticModule(Dense(), (torch.eye(3).to_sparse_csr(),))


def test_complex_results_with_a_lazy_conjugate_are_compared_by_value(one_thread):
    class Conjugate(torch.nn.Module):
        def forward(self, x):
            return torch.fft.ifft(x).conj()  # eager's result: a conjugate view, resolved lazily

    (x,) = pair((8,))
    got = StaticModule(Conjugate(), (x,)).runtime()(x)
    torch.testing.assert_close(got, Conjugate()(x))
