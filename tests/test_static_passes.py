"""Prepare-time rewrites: eager's fused transformer layers restored, convolutions folded and fused,
each checked against eager on two shapes; a rewrite that changes results beyond the tolerance, or
that the fused kernel cannot honour, is refused with the reason and the graph keeps its ops; rewrites
whose program measures slower are not used.

Most tests here check what a rewrite does, so they prepare with ``measure_choices=False``
(:data:`AS_PROPOSED`): whether a rewritten program runs faster than the plain one on these small
models depends on the machine at the time, which :mod:`srbench.static.rewrite_choice`'s own tests
take out of the picture."""

from __future__ import annotations

import itertools
import statistics
import types
from collections.abc import Sequence

import pytest
import torch
from torch import nn

from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import StaticModule, rewrite_choice
from srbench.static.passes import RewriteOutcome
from srbench.static.timing import Comparison
from srbench.zoo import load_zoo

mkldnn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="oneDNN is not available in this torch")


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def targets(module: StaticModule) -> list[str]:
    return [str(node.target) for node in module.prepared.captured.graph.nodes if node.op == "call_function"]


AS_PROPOSED = StaticOptions(measure_choices=False)


def assert_matches_eager(model: nn.Module, shapes: list[Inputs | tuple], options: StaticOptions = AS_PROPOSED, **tol):
    module = StaticModule(model, shapes[0], options)
    runtime = module.runtime()
    for inputs in [*shapes, shapes[0]]:
        inputs = Inputs.coerce(inputs)
        with torch.inference_mode():
            expected = inputs.call(model)
        got = inputs.call(runtime)
        torch.testing.assert_close(got, expected, **tol)
        for mine, theirs in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected)):
            assert mine.stride() == theirs.stride(), "a rewrite changed the layout of a graph output"
    return module


def applied(module: StaticModule, pass_name: str) -> list:
    return [r for r in module.prepared.rewrites if r.pass_name == pass_name and r.outcome is RewriteOutcome.APPLIED]


def refused(module: StaticModule) -> list:
    return [r for r in module.prepared.rewrites if r.outcome is RewriteOutcome.REFUSED]


class Encoder(nn.Module):
    def __init__(self, **layer_options):
        super().__init__()
        torch.manual_seed(0)
        options = {"batch_first": True, **layer_options}
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(32, 4, 64, **options), 2, enable_nested_tensor=False
        )

    def forward(self, x: torch.Tensor, *mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, mask[0] if mask else None)


def test_transformer_encoder_layers_run_fused_as_in_eager(fused_layers_first):
    model = Encoder().eval()
    module = assert_matches_eager(model, [(torch.randn(1, 10, 32),), (torch.randn(2, 6, 32),)], rtol=1e-4, atol=1e-4)
    assert len(applied(module, "fused_transformer_layer")) == 2
    assert targets(module).count("aten._transformer_encoder_layer_fwd.default") == 2
    assert "aten.scaled_dot_product_attention.default" not in targets(module)


def test_the_zoo_transformer_encoder_is_restored_on_both_shapes(fused_layers_first):
    case = load_zoo().get("transformer_encoder")
    module = assert_matches_eager(
        case.model(), [case.example_inputs(0), case.example_inputs(1)], rtol=case.rtol, atol=case.atol
    )
    assert len(applied(module, "fused_transformer_layer")) == 4


@pytest.mark.parametrize(
    ("layer_options", "reason"),
    [
        ({"norm_first": False, "activation": torch.tanh}, "neither relu nor gelu"),
        ({"batch_first": False}, "batch_first is False"),
    ],
)
def test_layers_eager_would_not_fuse_are_refused_with_the_reason(layer_options, reason):
    model = Encoder(**layer_options).eval()
    x = torch.randn(1, 10, 32) if layer_options.get("batch_first", True) else torch.randn(10, 1, 32)
    module = assert_matches_eager(model, [(x,)], rtol=1e-4, atol=1e-4)
    assert not applied(module, "fused_transformer_layer")
    assert all(reason in r.reason for r in refused(module)) and len(refused(module)) == 2


class MaskedLayer(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.layer(x, src_mask=mask)


def test_a_layer_given_a_mask_is_not_fused():
    model = MaskedLayer().eval()
    mask = torch.zeros(10, 10).masked_fill(torch.ones(10, 10).triu(1).bool(), float("-inf"))
    module = assert_matches_eager(model, [(torch.randn(1, 10, 32), mask)], rtol=1e-4, atol=1e-4)
    assert not applied(module, "fused_transformer_layer")
    assert any("mask or other input" in r.reason for r in refused(module))


def test_rewrite_off_keeps_the_captured_ops():
    module = StaticModule(Encoder().eval(), (torch.randn(1, 10, 32),), StaticOptions(rewrite=False))
    assert module.prepared.rewrites == ()
    assert "aten._transformer_encoder_layer_fwd.default" not in targets(module)


class ConvNet(nn.Module):
    """conv-bn-relu, a residual block (conv-bn + add + relu), conv-bn-relu6, a lone convolution
    whose feature map is returned beside the pooled logits."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.conv = nn.Sequential(nn.Conv2d(8, 8, 3, 1, 1, bias=False), nn.BatchNorm2d(8))
        self.six = nn.Sequential(nn.Conv2d(8, 16, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6())
        self.last = nn.Conv2d(16, 16, 3, 1, 1)
        for norm in (self.stem[1], self.conv[1], self.six[1]):
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 2.0)
        self.eval()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.stem(x)
        x = torch.relu(self.conv(x) + x)
        features = self.last(self.six(x))
        return features, features.mean((2, 3))


@mkldnn
def test_convolutions_are_folded_fused_and_planned():
    model = ConvNet()
    shapes = [(torch.randn(1, 3, 32, 32),), (torch.randn(2, 3, 24, 24),)]
    module = StaticModule(model, shapes[0], AS_PROPOSED)
    runtime = module.runtime()
    for inputs in [*shapes, shapes[0]]:
        with torch.inference_mode():
            features, pooled = model(*inputs)
        got_features, got_pooled = runtime(*inputs)
        torch.testing.assert_close(got_features, features, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(got_pooled, pooled, rtol=1e-4, atol=1e-4)
        assert got_features.is_contiguous(), "a returned feature map must keep eager's layout"
    assert len(applied(module, "fused_convolution")) == 4
    ops = targets(module)
    assert "aten.batch_norm.default" not in ops and "aten.conv2d.default" not in ops
    assert "mkldnn._convolution_pointwise.binary" in ops
    how = {plan.kind: plan.how.value for plan in module.prepared.plans if plan.kind.startswith("mkldnn")}
    assert how == {"mkldnn::_convolution_pointwise": "out"}, "the fused convolutions write into the slab"


@mkldnn
def test_a_rewrite_beyond_the_tolerance_is_refused_with_the_reason_and_not_used():
    model = ConvNet()
    x = torch.randn(1, 3, 32, 32)
    tight = StaticOptions(rewrite_rtol=1e-12, rewrite_atol=1e-12, measure_choices=False)
    module = assert_matches_eager(model, [(x,)], tight, rtol=1e-5, atol=1e-5)
    reasons = [r.reason for r in refused(module)]
    assert reasons and all("changes the result by up to" in reason for reason in reasons)
    assert all(r.max_difference is not None and r.max_difference > 0 for r in refused(module))
    assert "aten.batch_norm.default" in targets(module)


@mkldnn
def test_the_small_cnn_plans_most_of_its_intermediate_bytes():
    case = load_zoo().get("small_cnn")
    module = assert_matches_eager(
        case.model(), [case.example_inputs(0), case.example_inputs(1)], rtol=case.rtol, atol=case.atol
    )
    prepared = module.prepared
    intermediate = sum(record.size for record in prepared.analysis.records)
    assert prepared.managed_bytes / intermediate >= 0.9


@mkldnn
def test_the_profile_says_which_node_was_not_rewritten_and_why():
    x = torch.randn(1, 3, 32, 32)
    module = StaticModule(ConvNet(), (x,), StaticOptions(rewrite_rtol=1e-12, rewrite_atol=1e-12))
    profile = module.runtime().profile((x,), iterations=2, warmup=0)
    table = profile.table()
    assert "prepare-time rewrites: 0 applied, 4 refused" in table
    assert "changes the result by up to" in table
    assert all(rewrite["outcome"] == "refused" for rewrite in profile.to_dict()["rewrites"])


class Chain(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = x + 1.0
        return x


def shifted_adds(delta: float | Sequence[float], tail_only: bool = False):
    """A planted pass: every ``add`` is replaced by one that is off by ``delta`` (or by the
    deltas in turn, in graph order)."""
    from srbench.static.passes import Candidate

    deltas = iter(delta) if isinstance(delta, Sequence) else itertools.repeat(delta)

    def run(context):
        for node in list(context.graph.nodes):
            if node.target is torch.ops.aten.add.Tensor:
                source, shift = node.args[0], 1.0 + next(deltas)

                def build(graph, current, source=source, shift=shift):
                    return graph.call_function(torch.ops.aten.add.Tensor, (current(source), shift))

                yield Candidate(
                    "shifted_add",
                    node,
                    "aten::add (shifted)",
                    region=(node,),
                    reads=(source,),
                    compute=lambda values, source=source, shift=shift: values[source.name] + shift,
                    build=build,
                    tail_only=tail_only,
                )

    return run


def _shifted_chain(deltas: Sequence[float], *, tail_only: bool = False) -> list:
    """What becomes of the three shifted adds of :class:`Chain` at ``atol=1e-3``."""
    from srbench.graph import capture
    from srbench.static.passes import PassContext, apply_passes

    model, x = Chain(), torch.zeros(4)
    captured = capture(model, (x,))
    values = {node.name: x for node in captured.graph.nodes if node.op == "placeholder"}
    context = PassContext(captured.graph_module, model, captured.exported, values)
    rewrites = apply_passes(context, [shifted_adds(deltas, tail_only)], rtol=0.0, atol=1e-3)
    torch.testing.assert_close(
        captured.graph_module(x)[0],
        x + 3 + sum(delta for delta, r in zip(deltas, rewrites) if r.outcome is RewriteOutcome.APPLIED),
    )
    return [r.outcome for r in sorted(rewrites, key=lambda r: r.node)]


@pytest.mark.parametrize(
    ("deltas", "tail_only", "applied"),
    [
        ((4e-4, 4e-4, 8e-4), False, (True, True, False)),  # the prefix is longer
        ((8e-4, 4e-4, 4e-4), False, (False, True, True)),  # the suffix is longer
        ((4e-4, 4e-4, 8e-4), True, (False, False, True)),  # a tail-only pass: no plain one after a rewritten one
    ],
)
def test_the_longer_faithful_prefix_or_suffix_applies(deltas, tail_only, applied):
    outcomes = _shifted_chain(deltas, tail_only=tail_only)
    assert outcomes == [RewriteOutcome.APPLIED if a else RewriteOutcome.REFUSED for a in applied]


def test_rewrites_whose_errors_compound_beyond_the_tolerance_are_refused_end_to_end():
    from srbench.graph import capture
    from srbench.static.passes import PassContext, apply_passes

    model, x = Chain(), torch.zeros(4)
    captured = capture(model, (x,))
    values = {node.name: x for node in captured.graph.nodes if node.op == "placeholder"}
    context = PassContext(captured.graph_module, model, captured.exported, values)
    rewrites = apply_passes(context, [shifted_adds(6e-4)], rtol=0.0, atol=1e-3)
    assert [r.outcome for r in rewrites] == [RewriteOutcome.APPLIED, RewriteOutcome.REFUSED, RewriteOutcome.REFUSED]
    assert all("compounds with the 1 rewrites kept" in r.reason for r in rewrites[1:])
    torch.testing.assert_close(captured.graph_module(x)[0], x + 3 + 6e-4)


class BigTail(nn.Module):
    """Planned intermediates, then a large output made from an unplanned one (GPT's head)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(64, 64)
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 4096, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(torch.relu(self.linear(x)) + x))


def test_with_cleanup_the_slab_is_given_back_before_a_large_tail_allocates():
    from srbench.measure.memory import observe_allocations

    model, x = BigTail().eval(), torch.randn(32, 64)
    module = assert_matches_eager(model, [(x,)], rtol=1e-4, atol=1e-5)
    runtime = module.runtime()
    runtime(x)
    slab, output = module.prepared.slab_bytes, 32 * 4096 * 4
    assert slab >= 32 * 64 * 4  # the ReLU and the add write over the linear's result (srbench.static.reuse)
    peak = observe_allocations(lambda: runtime(x)).peak_bytes
    head_input = 32 * 64 * 4  # the layer norm's result, allocated by the op, read by the head
    assert peak < slab + head_input + output, "the slab was still held while the output was allocated"


# -- rewrites are kept only where their program is not clearly slower (srbench.static.rewrite_choice)


@mkldnn
@pytest.mark.parametrize(("with_rewrites", "without", "kept"), [(1.0, 2.0, True), (1.04, 1.0, True), (1.2, 1.0, False)])
def test_rewrites_are_dropped_only_when_measured_clearly_slower(rewrites_measured_as, with_rewrites, without, kept):
    calls = rewrites_measured_as((with_rewrites, without))
    x = torch.randn(1, 3, 32, 32)
    module = assert_matches_eager(ConvNet(), [(x,)], StaticOptions(), rtol=1e-4, atol=1e-4)
    assert len(calls) == 1, "measured side by side, once"
    rewritten, plain = calls[0]
    assert "mkldnn._convolution_pointwise.default" in {str(p.target) for p in rewritten.captured.graph.nodes}
    assert not plain.rewrites and "aten.conv2d.default" in {str(p.target) for p in plain.captured.graph.nodes}
    outcomes = {r.outcome for r in module.prepared.rewrites}
    if kept:
        assert outcomes == {RewriteOutcome.APPLIED} and "aten.conv2d.default" not in targets(module)
    else:
        assert outcomes == {RewriteOutcome.SLOWER} and len(module.prepared.rewrites) == 4
        assert "aten.batch_norm.default" in targets(module), "the program without the rewrites runs"
        assert all(
            f"measured {with_rewrites * 1e3:.3g} ms, without them {without * 1e3:.3g} ms (1.2x per round" in r.reason
            for r in module.prepared.rewrites
        )
        table = module.runtime().profile((x,), iterations=2, warmup=0).table()
        assert "prepare-time rewrites: 0 applied, 0 refused, 4 not used (slower)" in table


@mkldnn
def test_a_measurement_that_cannot_tell_keeps_the_rewrites(rewrites_measured_as):
    """Load that spreads the per-round ratios across the margin (1.0x to 1.3x here) leaves the
    rewrites as proposed, even where the ratio of the two medians is above it."""
    with_rewrites = (1.3, 1.0, 1.3, 1.0, 1.3, 1.3, 1.0, 1.3, 1.0, 1.3)
    calls = rewrites_measured_as(Comparison(with_rewrites, (1.0,) * len(with_rewrites)))
    module = assert_matches_eager(ConvNet(), [(torch.randn(1, 3, 32, 32),)], StaticOptions(), rtol=1e-4, atol=1e-4)
    assert len(calls) == 1 and statistics.median(with_rewrites) > 1 + rewrite_choice.MARGIN
    assert {r.outcome for r in module.prepared.rewrites} == {RewriteOutcome.APPLIED}


@mkldnn
@pytest.mark.parametrize(
    "options",
    [
        StaticOptions(measure_choices=False),
        StaticOptions(rewrite_rtol=1e-12, rewrite_atol=1e-12),  # every rewrite refused: nothing to measure
        StaticOptions(rewrite=False),
    ],
)
def test_nothing_is_measured_when_no_rewrite_is_proposed_or_measuring_is_off(rewrites_measured_as, options):
    calls = rewrites_measured_as((2.0, 1.0))
    assert_matches_eager(ConvNet(), [(torch.randn(1, 3, 32, 32),)], options, rtol=1e-4, atol=1e-4)
    assert not calls


@mkldnn
def test_a_real_measurement_keeps_or_drops_the_rewrites_with_results_equal_to_eager():
    """Whichever program the timing picks on this machine, it computes what eager does, and a
    dropped rewrite says both timings."""
    x = torch.randn(1, 3, 32, 32)
    module = assert_matches_eager(
        ConvNet(), [(x,), (torch.randn(2, 3, 24, 24),)], StaticOptions(), rtol=1e-4, atol=1e-4
    )
    outcomes = {r.outcome for r in module.prepared.rewrites}
    assert outcomes in ({RewriteOutcome.APPLIED}, {RewriteOutcome.SLOWER})
    if outcomes == {RewriteOutcome.SLOWER}:
        assert all("ms, without them" in r.reason for r in module.prepared.rewrites)


def test_prepare_time_timing_leaves_a_programs_slow_first_calls_out(monkeypatch):
    """A program whose first calls run slowly (new threads, kernels set up at first use) is timed
    at its pace once warm: the warm-up runs for WARMUP_SECONDS, not for a fixed two rounds (with
    two, the first program's slow calls were most of its samples and it measured the slower).
    A fake clock, advanced by the calls themselves, makes this exact."""
    from srbench.inputs import Inputs
    from srbench.static import timing

    now = [0.0]
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: now[0], thread_time=lambda: now[0]))
    calls_made = [0]

    def warming() -> None:  # 8 ms for its first 18 calls, then 0.1 ms
        calls_made[0] += 1
        now[0] += 0.008 if calls_made[0] <= 18 else 0.0001

    def steady() -> None:
        now[0] += 0.0005

    warm, other = timing.compare_calls([warming, steady], Inputs((), {}), 1.1).medians
    assert warm == pytest.approx(0.0001) and other == pytest.approx(0.0005)
