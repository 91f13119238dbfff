"""Op-level conformance on ops srbench has not seen: PyTorch's OpInfo database.

PyTorch tests its own backends op by op with ``op_db`` (``torch.testing._internal``): every
OpInfo knows which dtypes it supports and makes sample inputs for them. Here each OpInfo that
supports float32 on the CPU (and a rotating few in int64 and bool) becomes a one-op model: its
sample's tensors are the model's inputs, its Python scalars, lists and dtypes constants of the
model. The model is prepared by :class:`~srbench.static.StaticModule` and run beside eager on the
sample, on fresh values of the same shapes (the same sample drawn under another seed), on the
sample again, and on a sample of another shape where the OpInfo makes one, under the default
options and under each option that changes how results are written (a rotating one per op, to
keep the sweep's time down). Outputs must agree with eager's in values, dtype, shape and strides
(sizes of one excepted), alias inputs and each other as eager's do, and leave inputs as eager
leaves them; outputs the caller holds must survive the next run.

Exclusions are read from what happened, never from a list: an OpInfo without a sample for the
dtype, or whose every sample eager itself refuses, is skipped; one that ``torch.export`` cannot
capture is an expected failure with the capture's reason classified (``torch.export`` is tried
directly, so a failure of srbench's own is never mistaken for one of the capture). Ops whose
results have no specified values (``empty``-like, or random: torch's answers change with the
seed) are compared by geometry only, as srbench itself checks them
(:class:`~srbench.static.resolve.ResultCheck`).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import enum
import functools
import itertools
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from srbench.formatting import error_summary
from srbench.graph.capture import CaptureError, capture
from srbench.inputs import Inputs
from srbench.measure.equivalence import compare, structure_difference
from srbench.static import InputSignatureError, RuntimePool, StaticModule, StaticOptions, UnsupportedOpError
from srbench.static.resolve import UNINITIALIZED, changes_with_seed

op_db = pytest.importorskip(
    "torch.testing._internal.common_methods_invocations", reason="PyTorch's OpInfo database needs expecttest"
).op_db

# The options that change how results are written, beside the defaults; each OpInfo runs under
# the defaults and one of these, in turn, so that every option meets a third of the ops.
OPTION_VARIANTS = (
    StaticOptions(enable_out_variant=False),
    StaticOptions(cleanup_activations=False),
    StaticOptions(manage_output_tensors=True),
)
# Non-float dtypes for a rotating sample of the ops that support them (every n-th such op).
EXTRA_DTYPES = {torch.int64: 8, torch.bool: 8}
SAMPLES_TRIED = 4  # samples tried, in order, for one that eager runs and torch.export captures


@dataclass(frozen=True)
class OpCase:
    """One OpInfo at one dtype, and the options it runs under besides the defaults."""

    op: Any  # an OpInfo
    dtype: torch.dtype
    variant: StaticOptions

    @property
    def id(self) -> str:
        name = self.op.name + (f".{self.op.variant_test_name}" if self.op.variant_test_name else "")
        return f"{name}-{str(self.dtype).removeprefix('torch.')}"


def _cases() -> list[OpCase]:
    cases = []
    seen: dict[torch.dtype, int] = dict.fromkeys(EXTRA_DTYPES, 0)
    for index, op in enumerate(op_db):
        dtypes = op.supported_dtypes("cpu")
        variant = OPTION_VARIANTS[index % len(OPTION_VARIANTS)]
        if torch.float32 in dtypes:
            cases.append(OpCase(op, torch.float32, variant))
        for dtype, every in EXTRA_DTYPES.items():
            if dtype in dtypes:
                if seen[dtype] % every == 0:
                    cases.append(OpCase(op, dtype, OPTION_VARIANTS[seen[dtype] // every % len(OPTION_VARIANTS)]))
                seen[dtype] += 1
    return cases


CASES = _cases()


class OneOp(torch.nn.Module):
    """``op(sample.input, *sample.args, **sample.kwargs)`` as a module: the sample's tensors are
    the module's inputs (in pytree order), everything else is a constant of the module."""

    def __init__(self, op: Callable[..., Any], spec: pytree.TreeSpec, constants: list[Any]) -> None:
        super().__init__()
        self.op, self.spec, self.constants = op, spec, constants

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        leaves = [next(given) if leaf is _TENSOR else leaf for leaf in self.constants]
        first, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(first, *args, **kwargs)


class _Leaf(enum.Enum):
    """Where a tensor goes among a sample's leaves: an enum member, so that a copy of the module
    (``copy.deepcopy``, as :func:`lowering_difference` captures one) still finds its inputs' places."""

    TENSOR = "tensor"


_TENSOR = _Leaf.TENSOR


@dataclass(frozen=True)
class SampleCall:
    """One sample split into the module's constants and its tensor inputs."""

    spec: pytree.TreeSpec
    constants: list[Any]
    tensors: tuple[torch.Tensor, ...]

    @classmethod
    def of(cls, sample: Any) -> SampleCall:
        return cls.of_tree((sample.input, sample.args, sample.kwargs))

    @classmethod
    def of_tree(cls, tree: Any) -> SampleCall:
        """Any pytree of arguments (a module's call, its constructor's) split the same way."""
        leaves, spec = pytree.tree_flatten(tree)
        constants = [_TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        return cls(spec, constants, tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor)))

    def same_call(self, other: SampleCall) -> bool:
        """Whether ``other`` is a call of the same module (structure, constants, dtypes)."""
        return (
            self.spec == other.spec
            and _same_constants(self.constants, other.constants)
            and [t.dtype for t in self.tensors] == [t.dtype for t in other.tensors]
        )

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [tuple(t.shape) for t in self.tensors]


def _same_constants(a: list[Any], b: list[Any]) -> bool:
    try:
        return len(a) == len(b) and all(x is y or (type(x) is type(y) and bool(x == y)) for x, y in zip(a, b))
    except Exception:  # constants that cannot be compared (say, callables) are not the same
        return False


def _samples(case: OpCase, seed: int, *, reference: bool = False) -> list[SampleCall]:
    """The OpInfo's samples for ``case.dtype``, drawn under ``seed``; ``reference``: its
    reference inputs (more of them, extremal values and shapes) in place of its sample inputs."""
    make = case.op.reference_inputs if reference else case.op.sample_inputs
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return [SampleCall.of(s) for s in make("cpu", case.dtype, requires_grad=False)]


def _eager_runs(model: torch.nn.Module, call: Inputs | tuple[torch.Tensor, ...]) -> Exception | None:
    """Eager's error on a copy of ``call`` (a sample's tensors, or a whole call), or ``None``."""
    try:
        with torch.no_grad():
            Inputs.coerce(call).clone().call(model)
    except Exception as error:
        return error
    return None


# How torch.export's refusals read, classified: (reason, a pattern of the error's type and text).
CAPTURE_REFUSALS = (
    ("a Python value read from a tensor's data (item, bool)", r"DataDependentOutputException"),
    ("a result whose shape depends on data, without a fake kernel", r"DynamicOutputShapeException"),
    ("data-dependent control flow or size", r"data.dependent|GuardOnDataDependent|unbacked|Could not guard"),
    ("an op without a fake (meta) kernel", r"UnsupportedOperatorException|fake|meta"),
)


def capture_refusal(error: BaseException) -> str:
    """A short classified reason for ``torch.export`` refusing a model, from its error."""
    text = f"{type(error).__name__}: {error}"
    reason = next((r for r, pattern in CAPTURE_REFUSALS if re.search(pattern, text, re.IGNORECASE)), None)
    if reason is None:
        reason = (str(error).strip().splitlines() or [""])[0][:100]
    return f"torch.export cannot capture: {reason} ({type(error).__name__})"


def _export_refusal(model: torch.nn.Module, call: Inputs | tuple[torch.Tensor, ...]) -> str | None:
    """Why ``torch.export`` itself refuses ``model`` on these inputs (a sample's tensors, or a
    whole call), or ``None`` if it captures it and its own program returns what eager returns
    (structure and leaf types: a ``torch.Size`` comes back from an exported program as a tuple)."""
    inputs = Inputs.coerce(call)
    try:
        with torch.no_grad():
            copy = inputs.clone()
            exported = torch.export.export(model, copy.args, dict(copy.kwargs), strict=False)
            answers = inputs.clone().call(exported.module()), inputs.clone().call(model)
    except Exception as error:
        return capture_refusal(error)
    difference = structure_difference(*answers)
    return None if difference is None else f"torch.export's own program answers otherwise: {difference}"


@dataclass(frozen=True)
class OpCall:
    """The module of one OpInfo and its calls: the sample, fresh values of the same shapes, and
    (where the OpInfo makes one) a sample of other shapes."""

    model: OneOp
    first: Inputs
    fresh: Inputs
    other: Inputs | None

    @property
    def runs(self) -> list[tuple[str, Inputs]]:
        """The calls of the protocol, named: the sample, fresh values, the sample again, another shape."""
        runs = [("sample", self.first), ("fresh values", self.fresh), ("sample again", self.first)]
        return runs + ([("another shape", self.other)] if self.other is not None else [])


def _any(call: SampleCall) -> bool:
    return True


def op_call(case: OpCase, first: Callable[[SampleCall], bool] = _any) -> OpCall:
    """The OpInfo's first sample that eager runs and torch.export captures, with its fresh twin
    and another shape; skips or xfails with the reason if there is none. Samples for which
    ``first`` holds are tried first (their twins kept beside them)."""
    samples, redrawn = _samples(case, seed=0), _samples(case, seed=1)
    if not samples:
        pytest.skip(f"OpInfo has no {case.dtype} sample on the CPU")
    order = sorted(range(len(samples)), key=lambda index: not first(samples[index]))
    twins = [redrawn[i] if i < len(redrawn) else None for i in order]
    samples = [samples[i] for i in order]
    eager_refusal: Exception | None = None
    export_refusal: str | None = None
    for index, call in enumerate(samples[:SAMPLES_TRIED]):
        model = OneOp(case.op.op, call.spec, call.constants)
        if (error := _eager_runs(model, call.tensors)) is not None:
            eager_refusal = eager_refusal or error
            continue
        if any(t.layout != torch.strided for t in call.tensors):
            with pytest.raises(InputSignatureError, match="takes strided"):  # refused clearly, before any op runs
                StaticModule(model, Inputs(call.tensors))
            pytest.xfail("srbench takes strided inputs only (README known limits): a sparse input")
        if (reason := _export_refusal(model, call.tensors)) is not None:
            export_refusal = export_refusal or reason
            continue
        twin = twins[index]
        fresh = twin if twin is not None and twin.same_call(call) and twin.shapes == call.shapes else None
        others = (s for s in samples if s.same_call(call) and s.shapes != call.shapes)
        other = next(
            (s for s in others if _eager_runs(model, s.tensors) is None and _export_refusal(model, s.tensors) is None),
            None,
        )
        first = Inputs(call.tensors)
        return OpCall(model, first, Inputs(fresh.tensors) if fresh else first, Inputs(other.tensors) if other else None)
    if export_refusal is not None:
        pytest.xfail(export_refusal)
    pytest.skip(f"eager refuses the first samples: {type(eager_refusal).__name__}: {eager_refusal}"[:200])


def geometry(tensor: torch.Tensor) -> tuple[Any, ...]:
    """What a result must keep when its values are unspecified: shape, dtype, device, and the
    layout, and the strides of the dimensions longer than one (the others' strides mean nothing)."""
    strided = tensor.layout == torch.strided and tensor.numel() > 1
    strides = tuple(s for n, s in zip(tensor.shape, tensor.stride()) if n > 1) if strided else ()
    return tuple(tensor.shape), tensor.dtype, tensor.device, tensor.layout, strides


def check_geometry(actual: Any, expected: Any, run: str, other: Any = None) -> None:
    """Each of ``actual``'s outputs has the geometry of ``expected``'s (eager's), or of ``other``'s
    where given (torch's lowered program's: srbench lays a result out as eager does where it can,
    as the lowered program does where not, output by output)."""
    got, want = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    others = pytree.tree_leaves(other) if other is not None else want
    assert len(got) == len(want) == len(others), f"{run}: {len(got)} outputs, eager's {len(want)}"
    for index, (a, e, o) in enumerate(zip(got, want, others)):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor), f"{run}: output {index} is a {type(a).__name__}, eager's a tensor"
            lowered = other is not None and isinstance(o, torch.Tensor)
            allowed = {geometry(e), geometry(o)} if lowered else {geometry(e)}
            also = f" and torch's lowered program {geometry(o)}" if lowered else ""
            assert geometry(a) in allowed, f"{run}: output {index}: {geometry(a)} where eager has {geometry(e)}{also}"


def unspecified_values(module: StaticModule, runs: list[tuple[str, Inputs]]) -> bool:
    """Whether the prepared graph's results have no specified values on ``runs``: it has an
    ``empty``-like op (:data:`~srbench.static.resolve.UNINITIALIZED`), or an op torch tags
    nondeterministic and torch's answers on one of the runs change with the seed
    (:func:`~srbench.static.resolve.changes_with_seed`, as srbench tells a tagged op's). The tag
    alone does not tell: ``dropout(train=False)`` and ``lstm`` carry it and answer fixed values,
    which were compared by geometry only. Every run is drawn: the scalars sweep's ``p`` of a
    dropout can be 0 in one run and not in the next."""
    ops = [plan.node.target for plan in module.prepared.plans if isinstance(plan.node.target, torch._ops.OpOverload)]
    if any(op._schema.name in UNINITIALIZED for op in ops):
        return True
    if not any(torch.Tag.nondeterministic_seeded in op.tags for op in ops):
        return False
    return any(_draws(module.model, inputs) for inputs in {id(inputs): inputs for _, inputs in runs}.values())


def _draws(model: torch.nn.Module, inputs: Inputs) -> bool:
    """Whether the answers on ``inputs`` of ``model``'s captured program, run by torch, change with
    the seed. Not eager's: an OpInfo may seed the generator in Python before a random op
    (``wrapper_set_seed``), which fixes eager's answer but is not part of the captured graph."""
    program = capture(model, inputs.clone()).exported.module()

    def draw() -> Any:
        with torch.no_grad():
            return inputs.clone().call(program)

    return changes_with_seed(draw)


def _held(outputs: Any) -> Any:
    """What the caller's outputs hold now, to compare with after later runs: tensors cloned, the
    rest as it is (a ``torch.Size`` a leaf: pytree rebuilds one as a tuple, which then differed
    from the output it was saved from, and ``broadcast_shapes`` failed on the sweep's side)."""
    return pytree.tree_map_only(torch.Tensor, torch.clone, outputs, is_leaf=lambda value: isinstance(value, torch.Size))


def eager_answers(model: torch.nn.Module, runs: list[tuple[str, Inputs]]) -> dict[str, tuple[Any, Inputs]]:
    """Eager's outputs on each run, by name, with the inputs (copies) as the call left them."""
    answers = {}
    for name, inputs in runs:
        eager_inputs = inputs.clone()
        with torch.no_grad():
            answers[name] = eager_inputs.call(model), eager_inputs
    return answers


@dataclass(frozen=True)
class ProtocolRun:
    """What a passing :func:`run_protocol` saw of the prepared module: whether results were
    compared by geometry only (an op with unspecified or random values), and how many streams its
    program runs on (``PreparedGraph.streams_used``: under ``streams=2`` forced, whether the op's
    program had two chains to spread; the every-sample groups count them, README "Every sample")."""

    by_geometry: bool
    streams_used: int


def run_protocol(
    call: OpCall, options: StaticOptions, aliasing: Callable[[Any, Inputs], Any], *, rtol: float, atol: float
) -> ProtocolRun:
    """Prepare ``call.model`` under ``options`` and run it beside eager on every call; raise on
    the first difference, naming the run and the options."""
    module = StaticModule(call.model, call.first.clone(), options, name="op")
    by_geometry = unspecified_values(module, call.runs)
    check_runs(module.runtime(), call.model, call.runs, options, aliasing, by_geometry, rtol=rtol, atol=atol)
    return ProtocolRun(by_geometry, module.prepared.streams_used)


def check_runs(
    runtime: Callable[..., Any],
    model: torch.nn.Module,
    runs: list[tuple[str, Inputs]],
    options: StaticOptions,
    aliasing: Callable[[Any, Inputs], Any],
    by_geometry: bool,
    *,
    rtol: float,
    atol: float,
    answers: dict[str, tuple[Any, Inputs]] | None = None,
    after_run: Callable[[str, str], None] | None = None,
) -> None:
    """Run ``runtime`` beside eager on each of ``runs`` in turn; raise on the first difference.
    ``answers``: eager's, made beforehand (:func:`eager_answers`), by run name; ``after_run(name,
    run)``: checks of the caller's own after each run (a module's state beside eager's)."""
    held: list[tuple[str, Any, Any]] = []
    for name, inputs in runs:
        run = f"{name} under {options}"
        expected, eager_inputs = (answers or eager_answers(model, [(name, inputs)]))[name]
        runtime_inputs = inputs.clone()
        got = runtime_inputs.call(runtime)
        if by_geometry:
            check_geometry(got, expected, run)
            check_geometry(runtime_inputs.args, eager_inputs.args, f"{run}: inputs after the call")
        else:
            compare(got, expected, rtol=rtol, atol=atol, run=run)
            compare(runtime_inputs.args, eager_inputs.args, rtol=0, atol=0, run=f"{run}: inputs after the call")
            check_geometry(got, expected, run)  # strides too
        assert aliasing(got, runtime_inputs) == aliasing(expected, eager_inputs), f"{run}: aliasing differs"
        if after_run is not None:
            after_run(name, run)
        if not options.manage_output_tensors and not by_geometry:
            for earlier, output, saved in held:
                compare(output, saved, rtol=0, atol=0, run=f"{run}: the output of {earlier!r}, held by the caller")
            held.append((name, got, _held(got)))


@pytest.mark.filterwarnings("ignore")  # deprecated ops, experimental dtypes: eager's warnings, not srbench's
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_opinfo_matches_eager(
    case: OpCase,
    one_thread: None,
    output_aliasing: Callable[[Any, Inputs], Any],
    record_property: Callable[[str, object], None],
) -> None:
    call = op_call(case)
    record_property("fresh_values", call.fresh is not call.first)
    record_property("another_shape", call.other is not None)
    for options in (StaticOptions(), case.variant):
        by_geometry = run_protocol(call, options, output_aliasing, rtol=1e-5, atol=1e-6).by_geometry
    record_property("by_geometry", by_geometry)


# The extended sweep: what the sweep above leaves out. Each OpInfo that supports float32 runs
# lowered to core ATen (every op through an .out overload), on two streams, with its Python
# scalars as inputs that change between calls, and from several threads at once; each that
# supports one of SWEEP_DTYPES runs in it. Each also runs on every one of its float32 samples
# (the sweeps above take the first that eager runs and torch.export captures), and on its
# reference inputs where it makes its own. CI runs every CI_EVERY-th case of each group (a
# different offset per group; CI_SAMPLES samples at most of an every-sample case);
# SRBENCH_OPINFO_SWEEP=full runs them all (README: what it found).


class Sweep(enum.Enum):
    """What one case of the extended sweep varies."""

    DECOMPOSE = "decomposed"
    STREAMS = "streams2"
    DTYPE = "dtype"
    SCALARS = "scalars"
    THREADS = "threads"
    SAMPLES = "every_sample"
    REFERENCE = "reference_inputs"


SWEEP_OPTIONS = {
    Sweep.DECOMPOSE: StaticOptions(decompose=True),
    # parallel_steps and unmeasured: the multistream program runs even where one stream is faster
    Sweep.STREAMS: StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False),
}
SWEEP_DTYPES = (torch.float16, torch.bfloat16, torch.complex64, torch.float64, torch.int32, torch.uint8)
# torch.testing's default tolerances for the dtype, float32's as above (exact for integers)
TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1e-5, 1e-6),
    torch.complex64: (1e-5, 1e-6),
    torch.float64: (1e-7, 1e-7),
}
THREADS = 3
FULL_SWEEP = os.environ.get("SRBENCH_OPINFO_SWEEP") == "full"
CI_EVERY = 40
CI_SAMPLES = 20  # CI's every-sample cases run at most this many of an OpInfo's samples (some make 1,440)


def sample_options(text: str) -> StaticOptions:
    """The options the every-sample groups prepare each sample under: the defaults, or those named
    by ``SRBENCH_OPINFO_SAMPLE_OPTIONS`` as ``name=value`` pairs (``decompose=True``,
    ``manage_output_tensors=True,cleanup_activations=False``), so that a full run under other
    options is the same test, not an edited copy of it."""
    pairs = (item.split("=", 1) for item in text.split(",") if item.strip())
    return StaticOptions(**{name.strip(): ast.literal_eval(value.strip()) for name, value in pairs})


SAMPLE_OPTIONS = sample_options(os.environ.get("SRBENCH_OPINFO_SAMPLE_OPTIONS", ""))


@dataclass(frozen=True)
class SweepCase:
    """One OpInfo at one dtype, and what the extended sweep varies for it."""

    op: Any  # an OpInfo
    dtype: torch.dtype
    sweep: Sweep

    @property
    def id(self) -> str:
        return f"{OpCase(self.op, self.dtype, StaticOptions()).id}-{self.sweep.value}"


def _sweep_cases(full: bool) -> list[SweepCase]:
    groups: dict[tuple[Sweep, torch.dtype], list[SweepCase]] = {}
    for op in op_db:
        dtypes = op.supported_dtypes("cpu")
        float32 = [sweep for sweep in Sweep if sweep is not Sweep.DTYPE and torch.float32 in dtypes]
        # reference inputs where the OpInfo makes its own (otherwise they are its sample inputs)
        wanted = [
            (sweep, torch.float32) for sweep in float32 if sweep is not Sweep.REFERENCE or op.reference_inputs_func
        ]
        wanted += [(Sweep.DTYPE, dtype) for dtype in SWEEP_DTYPES if dtype in dtypes]
        for sweep, dtype in wanted:
            groups.setdefault((sweep, dtype), []).append(SweepCase(op, dtype, sweep))
    chosen = [
        [case for index, case in enumerate(group) if full or index % CI_EVERY == offset * 7 % CI_EVERY]
        for offset, group in enumerate(groups.values())
    ]
    # round robin over the groups: a run stopped early has met every option and dtype alike
    return [case for row in itertools.zip_longest(*chosen) for case in row if case is not None]


SWEEP_CASES = _sweep_cases(FULL_SWEEP)


@contextlib.contextmanager
def refusal_expected() -> Iterator[None]:
    """srbench's own refusals at prepare time (an op it cannot run, a model it cannot capture) are
    expected failures with srbench's reason, which the sweep's summary lists for review."""
    try:
        yield
    except (UnsupportedOpError, CaptureError) as error:
        pytest.xfail(f"srbench refuses: {type(error).__name__}: {str(error).strip()[:200]}")


def lowering_difference(
    build: Callable[[], torch.nn.Module],
    first: Inputs,
    runs: list[tuple[str, Inputs]],
    options: StaticOptions,
    aliasing: Callable[[Any, Inputs], Any],
    *,
    rtol: float,
    atol: float,
) -> str | None:
    """How torch's own program, lowered to core ATen as srbench lowers it and run by torch,
    answers otherwise than eager on one of ``runs`` (values, or strides: a decomposition
    computing in another order than eager's fused kernel, or writing a fresh contiguous result),
    or ``None`` where it answers as eager does (aliasing too: a functionalized program returns a
    copy where eager's ``dropout(training=False)`` returns its input). Where it does not, srbench
    under ``options`` must give its values on that run, and its or eager's strides and aliasing
    (raises otherwise). ``build`` gives the model (a fresh one per call, where it holds state):
    srbench's, eager's and each run's lowered program (captured from a copy of eager's model as
    the earlier runs left it) each run every call in order, so a module that updates its
    statistics in train mode starts each run from the same state in all three."""
    runtime, eager = StaticModule(build(), first.clone(), options, name="op").runtime(), build()
    for name, inputs in runs:
        lowered = capture(copy.deepcopy(eager), inputs.clone(), decompose=True).exported.module()
        lowered_inputs, ours_inputs = inputs.clone(), inputs.clone()
        with torch.no_grad():
            got = lowered_inputs.call(lowered)
        expected, eager_inputs = eager_answers(eager, [(name, inputs)])[name]
        ours = ours_inputs.call(runtime)
        try:
            compare(got, expected, rtol=rtol, atol=atol, run=name)
            check_geometry(got, expected, name)
            assert aliasing(got, lowered_inputs) == aliasing(expected, eager_inputs), f"{name}: aliasing differs"
        except AssertionError as error:
            run = f"{name}: srbench beside torch's lowered program"
            compare(ours, got, rtol=rtol, atol=atol, run=run)
            check_geometry(ours, expected, run, other=got)
            assert aliasing(ours, ours_inputs) in (
                aliasing(got, lowered_inputs),
                aliasing(expected, eager_inputs),
            ), f"{run}: aliasing differs"
            return str(error).splitlines()[0]
    return None


def _varied(values: list[Any]) -> Iterator[list[Any]]:
    """Other values for a sample's Python scalars: all changed, then floats only, then ints only."""
    yield [v + 1 if isinstance(v, int) else v * 0.5 + 0.25 for v in values]
    yield [v if isinstance(v, int) else v * 0.5 + 0.25 for v in values]
    yield [v + 1 if isinstance(v, int) else v for v in values]
    yield [v - 1 if isinstance(v, int) else v for v in values]


def _is_number(leaf: Any) -> bool:
    return type(leaf) in (int, float)


def has_numbers(call: SampleCall) -> bool:
    """Whether the sample passes a Python int or float (bools are flags, not numbers)."""
    return any(_is_number(leaf) for leaf in call.constants)


def scalar_call(call: OpCall) -> tuple[OneOp, list[tuple[str, Inputs]]]:
    """``call``'s module with its Python ints and floats as inputs too, and calls that change them
    (ones eager runs and torch.export captures); skips where the sample has none."""
    constants = call.model.constants
    spots = {index for index, leaf in enumerate(constants) if _is_number(leaf)}
    if not spots:
        pytest.skip("the sample has no Python int or float argument")
    model = OneOp(call.model.op, call.model.spec, [_TENSOR if i in spots else leaf for i, leaf in enumerate(constants)])

    def with_values(tensors: Inputs, values: list[Any]) -> Inputs:
        given, numbers = iter(tensors.args), iter(values)
        return Inputs(
            tuple(
                next(numbers) if i in spots else next(given)
                for i, leaf in enumerate(constants)
                if leaf is _TENSOR or i in spots
            )
        )

    sample = [constants[i] for i in sorted(spots)]
    first = with_values(call.first, sample)
    for values in _varied(sample):
        varied = with_values(call.fresh, values)
        if _eager_runs(model, varied.args) is None and _export_refusal(model, varied.args) is None:
            runs = [("sample", first), ("other scalars", varied), ("sample again", first)]
            return model, [*runs, ("other scalars again", varied)]
    pytest.skip(f"eager or torch.export refuses every other value of the scalars {sample}")


def run_threads(call: OpCall, aliasing: Callable[[Any, Inputs], Any], *, rtol: float, atol: float) -> None:
    """:func:`run_in_threads` on the OpInfo's module, prepared under the defaults."""
    module = StaticModule(call.model, call.first.clone(), StaticOptions(), name="op")
    run_in_threads(module, call.model, call.runs, unspecified_values(module, call.runs), aliasing, rtol=rtol, atol=atol)


def run_in_threads(
    module: StaticModule,
    model: torch.nn.Module,
    runs: list[tuple[str, Inputs]],
    by_geometry: bool,
    aliasing: Callable[[Any, Inputs], Any],
    *,
    rtol: float,
    atol: float,
) -> None:
    """One prepared module, a runtime per thread (:class:`RuntimePool`), THREADS threads running
    ``runs`` at once (each from another call on), twice over, beside ``model`` run by eager.
    Eager's answers are made beforehand: an eager call beside a capture (a thread's runtime
    preparing another shape) can be disturbed by it, as ``capture`` says (torch.export patches
    module attribute access process-wide); srbench's own captures and prepare-time eager calls
    are serialised."""
    pool, options, answers = RuntimePool(module), module.options, eager_answers(model, runs)
    start, errors = threading.Barrier(THREADS), []

    def work(thread: int) -> None:
        try:
            start.wait(30)
            shift = thread % len(runs)
            shifted = (runs[shift:] + runs[:shift]) * 2
            runtime = pool.runtime()
            check_runs(runtime, model, shifted, options, aliasing, by_geometry, rtol=rtol, atol=atol, answers=answers)
        except BaseException as error:  # reported by the test's thread
            errors.append(error)

    on_every_thread(work, errors)


def on_every_thread(work: Callable[[int], None], errors: list[BaseException]) -> None:
    """``work(thread)`` on THREADS threads at once, waiting for them all; the first error they
    put in ``errors`` (shared with ``work``, which may read it to stop early) is raised here, in
    the test's thread, where pytest reports it."""
    workers = [threading.Thread(target=work, args=(thread,)) for thread in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        raise errors[0]


class Outcome(enum.Enum):
    """What became of one sample in the every-sample groups."""

    PASSED = "passed"
    EAGER_REFUSES = "eager refuses"  # not the op's answer to give
    EXPECTED = "expected failure"  # torch.export's refusal, sparse inputs, or srbench's own refusal
    FAILED = "failed"


@dataclass(frozen=True)
class SampleResult:
    """One sample's outcome, with the sample's shapes and the reason (an error's first line);
    where it passed, the streams its prepared program runs on."""

    index: int
    shapes: list[tuple[int, ...]]
    outcome: Outcome
    reason: str = ""
    streams_used: int | None = None

    def __str__(self) -> str:
        return f"sample {self.index} {self.shapes}: {self.reason}"


def sample_result(
    op: Any,
    index: int,
    call: SampleCall,
    twin: SampleCall | None,
    aliasing: Callable[[Any, Inputs], Any],
    options: StaticOptions,
) -> SampleResult:
    """One sample through the protocol under ``options`` (the sample, fresh values of its
    shapes, the sample again). Eager's refusal is no case; a failure is an expected one only
    where ``torch.export`` itself refuses the sample (tried after srbench's failure, so never
    mistaken for it), the sample is sparse, srbench refuses it at prepare time with a reason, or,
    under ``decompose``, torch's own lowered program answers otherwise than eager and srbench
    gives its values (:func:`lowering_difference`, as the decomposed group judges)."""
    model, result = OneOp(op.op, call.spec, call.constants), functools.partial(SampleResult, index, call.shapes)
    if (refusal := _eager_runs(model, call.tensors)) is not None:
        return result(Outcome.EAGER_REFUSES, error_summary(refusal))
    fresh = twin if twin is not None and twin.same_call(call) and twin.shapes == call.shapes else call
    protocol_call = OpCall(model, Inputs(call.tensors), Inputs(fresh.tensors), None)
    rtol, atol = TOLERANCES[torch.float32]
    try:
        passed = run_protocol(protocol_call, options, aliasing, rtol=rtol, atol=atol)
    except Exception as error:
        if isinstance(error, InputSignatureError) and any(t.layout != torch.strided for t in call.tensors):
            return result(Outcome.EXPECTED, "srbench takes strided inputs only: a sparse input")
        if (export_refusal := _export_refusal(model, call.tensors)) is not None:
            return result(Outcome.EXPECTED, export_refusal)
        if isinstance(error, (UnsupportedOpError, CaptureError)):
            return result(Outcome.EXPECTED, f"srbench refuses: {error_summary(error)}")
        if options.decompose and isinstance(error, AssertionError):
            try:
                difference = lowering_difference(
                    lambda: model, protocol_call.first, protocol_call.runs, options, aliasing, rtol=rtol, atol=atol
                )
            except Exception as beside_lowering:  # srbench differs from torch's lowered program too
                return result(Outcome.FAILED, error_summary(beside_lowering))
            if difference is not None:
                return result(Outcome.EXPECTED, f"torch's core-ATen lowering itself answers otherwise: {difference}")
        return result(Outcome.FAILED, error_summary(error))
    return result(Outcome.PASSED, streams_used=passed.streams_used)


def run_every_sample(
    case: SweepCase, aliasing: Callable[[Any, Inputs], Any], record_property: Callable[[str, object], None]
) -> None:
    """Every sample of the OpInfo (its reference inputs for ``Sweep.REFERENCE``) through
    :func:`sample_result`; fails listing every failing sample, xfails where none passed and some
    were expected failures, skips where eager refuses them all."""
    reference = case.sweep is Sweep.REFERENCE
    op_case = OpCase(case.op, case.dtype, StaticOptions())
    samples, twins = _samples(op_case, seed=0, reference=reference), _samples(op_case, seed=1, reference=reference)
    if not samples:
        pytest.skip(f"OpInfo has no {case.dtype} sample on the CPU")
    step = 1 if FULL_SWEEP else -(-len(samples) // CI_SAMPLES)  # CI: a few, spread over the samples
    results = [
        sample_result(
            case.op, index, samples[index], twins[index] if index < len(twins) else None, aliasing, SAMPLE_OPTIONS
        )
        for index in range(0, len(samples), step)
    ]
    by_outcome = {outcome: [r for r in results if r.outcome is outcome] for outcome in Outcome}
    record_property("samples", {outcome.value: len(found) for outcome, found in by_outcome.items()})
    record_property("expected", sorted({r.reason for r in by_outcome[Outcome.EXPECTED]}))
    # passing samples by the streams their programs run on (benchmarks/opinfo_counts.py totals them)
    record_property("streams_used", dict(sorted(Counter(r.streams_used for r in by_outcome[Outcome.PASSED]).items())))
    if failed := by_outcome[Outcome.FAILED]:
        raise AssertionError(
            f"{len(failed)} of {len(results)} samples differ from eager:\n" + "\n".join(map(str, failed))
        )
    if not by_outcome[Outcome.PASSED]:
        if expected := by_outcome[Outcome.EXPECTED]:
            pytest.xfail(str(expected[0]))
        pytest.skip(f"eager refuses every sample ({len(results)})")


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")  # deprecated ops, experimental dtypes: eager's warnings, not srbench's
@pytest.mark.parametrize("case", SWEEP_CASES, ids=[case.id for case in SWEEP_CASES])
def test_opinfo_sweep_matches_eager(
    case: SweepCase,
    one_thread: None,
    output_aliasing: Callable[[Any, Inputs], Any],
    record_property: Callable[[str, object], None],
) -> None:
    if case.sweep in (Sweep.SAMPLES, Sweep.REFERENCE):
        run_every_sample(case, output_aliasing, record_property)
        return
    rtol, atol = TOLERANCES.get(case.dtype, (0.0, 0.0))
    call = op_call(OpCase(case.op, case.dtype, StaticOptions()), has_numbers if case.sweep is Sweep.SCALARS else _any)
    with refusal_expected():
        if case.sweep is Sweep.DECOMPOSE:
            options = SWEEP_OPTIONS[case.sweep]
            try:
                run_protocol(call, options, output_aliasing, rtol=rtol, atol=atol)
            except AssertionError:  # values (EquivalenceError), or strides
                difference = lowering_difference(
                    lambda: call.model, call.first, call.runs, options, output_aliasing, rtol=rtol, atol=atol
                )
                if difference is not None:
                    pytest.xfail(f"torch's core-ATen lowering itself answers otherwise: {difference}")
                raise
        elif case.sweep in SWEEP_OPTIONS:
            run_protocol(call, SWEEP_OPTIONS[case.sweep], output_aliasing, rtol=rtol, atol=atol)
        elif case.sweep is Sweep.DTYPE:
            run_protocol(call, StaticOptions(), output_aliasing, rtol=rtol, atol=atol)
        elif case.sweep is Sweep.SCALARS:
            model, runs = scalar_call(call)
            module = StaticModule(model, runs[0][1].clone(), StaticOptions(), name="op")
            check_runs(
                module.runtime(),
                model,
                runs,
                StaticOptions(),
                output_aliasing,
                unspecified_values(module, runs),
                rtol=rtol,
                atol=atol,
            )
        else:
            run_threads(call, output_aliasing, rtol=rtol, atol=atol)


def test_sweep_covers_every_group_in_ci() -> None:
    """CI's share of the extended sweep meets every option and dtype, and is a small share."""
    groups = {(case.sweep, case.dtype) for case in _sweep_cases(full=False)}
    assert groups == {(case.sweep, case.dtype) for case in _sweep_cases(full=True)}
    assert len(_sweep_cases(full=False)) * CI_EVERY <= len(_sweep_cases(full=True)) + CI_EVERY * len(groups)


def test_a_copy_of_a_one_op_module_takes_its_inputs_where_the_original_does() -> None:
    """:func:`lowering_difference` captures a copy of eager's module: a copy that lost its inputs'
    places (an ``object()`` marker is copied anew) made every such capture fail, and the decomposed
    sweep read srbench's refusal where torch's lowering was to be judged."""
    sample = SampleCall.of_tree((torch.ones(2), (torch.full((2,), 3.0),), {"alpha": 2}))
    model = OneOp(torch.add, sample.spec, sample.constants)
    torch.testing.assert_close(copy.deepcopy(model)(*sample.tensors), model(*sample.tensors))


@pytest.mark.parametrize(("name", "options", "streams"), [
    ("frexp", SWEEP_OPTIONS[Sweep.STREAMS], 2),  # two results: a chain each
    ("abs", SWEEP_OPTIONS[Sweep.STREAMS], 1),  # one op: a single chain, kept on one stream
    ("frexp", StaticOptions(), 1),
])  # fmt: skip
def test_a_case_of_all_samples_records_its_passing_samples_by_the_streams_they_ran_on(
    name: str,
    options: StaticOptions,
    streams: int,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
    output_aliasing: Callable[[Any, Inputs], Any],
) -> None:
    """The count ``benchmarks/opinfo_counts.py`` totals for the README's two-stream figure:
    every passing sample once, by its prepared program's ``streams_used``."""
    monkeypatch.setattr(sys.modules[__name__], "SAMPLE_OPTIONS", options)
    recorded: dict[str, Any] = {}
    op = next(op for op in op_db if op.name == name and not op.variant_test_name)
    run_every_sample(SweepCase(op, torch.float32, Sweep.SAMPLES), output_aliasing, recorded.__setitem__)
    passed = recorded["samples"][Outcome.PASSED.value]
    assert passed > 0
    assert recorded["streams_used"] == {streams: passed}
