"""Module-level conformance on modules srbench has not seen: PyTorch's ModuleInfo database.

PyTorch tests its ``nn`` modules with ``module_db`` (``torch.testing._internal.common_modules``):
every ModuleInfo makes ModuleInputs, each a constructor's call and a forward call. Here each
ModuleInfo that supports float32 runs on the CPU: its module is built from the sample's
constructor call (under a fixed seed, so two builds hold the same parameters), put in ``.eval()``
mode, prepared by :class:`~srbench.static.StaticModule` on the sample's forward call and run beside
an eager copy with the protocol of the OpInfo sweep (``test_conformance_opinfo``): the sample,
fresh values of the same shapes (the samples drawn under another seed), the sample again, and a
sample of the same module and call structure with other shapes where the ModuleInfo makes one,
under the defaults and one of the options that change how results are written, in turn. Outputs
must agree with eager's in values, dtypes, shapes and strides, alias inputs and each other as
eager's do, leave inputs as eager leaves them, and survive the next run while the caller holds
them; after every run the module's parameters and buffers must be what eager's copy holds then.
ModuleInfos that declare train and eval behaviour to differ (``train_and_eval_differ``, as
PyTorch's own module tests choose their modes) also run in ``.train()`` mode: BatchNorm's running
statistics must end each run as eager leaves them; where eager's answers change with the random
generator's seed (dropout in train mode), results are compared by geometry only, as the OpInfo
sweep compares random ops.

Exclusions are read from what happened, never from a list: a sample eager refuses is skipped,
one ``torch.export`` refuses (tried directly, on copies) is an expected failure with the
classified reason. CI takes the first sample of each ModuleInfo that eager runs and torch.export
captures; ``SRBENCH_MODULE_SWEEP=full`` runs every sample (README, "Module by module").

The extended part runs what the OpInfo sweep's extended part runs of each op: the module lowered
to core ATen (``decompose=True``), on two streams (``parallel_steps``, unmeasured), and from
several threads at once over one prepared module (:class:`~srbench.static.RuntimePool`), each on
the first sample of each ModuleInfo and mode that eager runs and torch.export captures. CI runs
every ``CI_EVERY``-th case of each (a different offset per kind, round robin over the kinds);
``SRBENCH_MODULE_SWEEP=full`` runs each kind on every ModuleInfo's first sample, and every further
sample under one of the kinds in turn.
"""

from __future__ import annotations

import copy
import enum
import itertools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from test_conformance_opinfo import (
    OPTION_VARIANTS,
    SAMPLES_TRIED,
    SWEEP_OPTIONS,
    THREADS,
    SampleCall,
    Sweep,
    _eager_runs,
    _export_refusal,
    check_geometry,
    check_runs,
    eager_answers,
    lowering_difference,
    on_every_thread,
    refusal_expected,
    run_in_threads,
)

from srbench.inputs import Inputs
from srbench.measure.equivalence import compare
from srbench.static import RuntimePool, StaticModule, StaticOptions
from srbench.static.resolve import changes_with_seed

common_modules = pytest.importorskip(
    "torch.testing._internal.common_modules", reason="PyTorch's ModuleInfo database needs expecttest"
)
module_db = common_modules.module_db

FULL_SWEEP = os.environ.get("SRBENCH_MODULE_SWEEP") == "full"
RTOL, ATOL = 1e-5, 1e-6  # the OpInfo sweep's float32 tolerances


class Mode(enum.Enum):
    """The mode a module is prepared and run in."""

    EVAL = "eval"
    TRAIN = "train"


def _modes(info: Any) -> tuple[Mode, ...]:
    """Eval always; train too where the ModuleInfo says the two differ (PyTorch's own choice)."""
    return (Mode.EVAL, Mode.TRAIN) if info.train_and_eval_differ else (Mode.EVAL,)


@dataclass(frozen=True)
class ModuleSample:
    """One ModuleInput: the constructor's call and the forward call, and how each is shaped."""

    constructor: Inputs
    forward: Inputs
    desc: str

    @classmethod
    def of(cls, sample: Any) -> ModuleSample:
        made, call = sample.constructor_input, sample.forward_input
        forward = Inputs(tuple(call.args), call.kwargs) if call is not None else Inputs()
        return cls(Inputs(tuple(made.args), made.kwargs), forward, sample.desc)

    @property
    def call(self) -> SampleCall:
        return SampleCall.of_tree((self.forward.args, dict(self.forward.kwargs)))

    def same_module(self, other: ModuleSample) -> bool:
        """Whether ``other`` builds the same module (the same constructor call)."""
        mine = SampleCall.of_tree((self.constructor.args, dict(self.constructor.kwargs)))
        theirs = SampleCall.of_tree((other.constructor.args, dict(other.constructor.kwargs)))
        return mine.same_call(theirs) and all(torch.equal(a, b) for a, b in zip(mine.tensors, theirs.tensors))

    def same_call(self, other: ModuleSample) -> bool:
        """Whether ``other`` is a call of the same module with the same structure, constants and dtypes."""
        return self.same_module(other) and self.call.same_call(other.call)


@dataclass(frozen=True)
class ModuleCase:
    """One ModuleInfo in one mode, the options it runs under besides the defaults, and (in the
    full sweep) which of its samples; ``sample=None``: the first that eager runs and torch.export
    captures."""

    info: Any  # a ModuleInfo
    mode: Mode
    variant: StaticOptions
    sample: int | None = None

    @property
    def id(self) -> str:
        return f"{self.info.name}-{self.mode.value}" + ("" if self.sample is None else f"-{self.sample}")

    def samples(self, seed: int) -> list[ModuleSample]:
        """The ModuleInfo's float32 samples for the mode, drawn under ``seed``."""
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            made = self.info.module_inputs_func(
                self.info, device="cpu", dtype=torch.float32, requires_grad=False, training=self.mode is Mode.TRAIN
            )
        return [ModuleSample.of(sample) for sample in made]

    def build(self, sample: ModuleSample) -> torch.nn.Module:
        """The sample's module, in the case's mode, its parameters drawn under a fixed seed; a
        lazy module initialized by a call on the sample in eval mode, as torch's lazy modules ask
        (uninitialized, srbench refuses it: ``test_static_module_findings``)."""
        with torch.random.fork_rng():
            torch.manual_seed(0)
            model = sample.constructor.call(self.info.module_cls).to(torch.float32)
            if self.info.is_lazy:
                with torch.no_grad():
                    sample.forward.clone().call(model.eval())
        return model.train(self.mode is Mode.TRAIN)


def _cases(full: bool) -> list[ModuleCase]:
    cases = []
    for index, info in enumerate(module_db):
        if torch.float32 not in info.supported_dtypes("cpu"):
            continue
        for mode in _modes(info):
            count = len(ModuleCase(info, mode, StaticOptions()).samples(seed=0)) if full else 1
            for sample in range(count):
                variant = OPTION_VARIANTS[(index + sample) % len(OPTION_VARIANTS)]
                cases.append(ModuleCase(info, mode, variant, sample if full else None))
    return cases


CASES = _cases(FULL_SWEEP)


@dataclass(frozen=True)
class ModuleCall:
    """The module of one sample and its calls: the sample, fresh values of the same shapes, and
    (where the ModuleInfo makes one) a call of the same module with other shapes."""

    case: ModuleCase
    sample: ModuleSample
    fresh: Inputs
    other: Inputs | None

    @property
    def runs(self) -> list[tuple[str, Inputs]]:
        """The calls of the protocol, named: the sample, fresh values, the sample again, another shape."""
        first = self.sample.forward
        runs = [("sample", first), ("fresh values", self.fresh), ("sample again", first)]
        return runs + ([("another shape", self.other)] if self.other is not None else [])


def _refusals(case: ModuleCase, sample: ModuleSample) -> tuple[Exception | None, str | None]:
    """Eager's error on the sample, else torch.export's refusal of it (each on a copy of the
    module: a call in train mode updates its statistics)."""
    try:
        model = case.build(sample)
    except Exception as error:  # a lazy module's initializing call: eager refuses the sample
        return error, None
    if (error := _eager_runs(copy.deepcopy(model), sample.forward)) is not None:
        return error, None
    return None, _export_refusal(model, sample.forward)


def module_call(case: ModuleCase) -> ModuleCall:
    """The case's sample (or its first that eager runs and torch.export captures), with its
    fresh twin and another shape; skips or xfails with the reason if there is none."""
    samples, redrawn = case.samples(seed=0), case.samples(seed=1)
    if not samples:
        pytest.skip("the ModuleInfo has no float32 sample on the CPU")
    tried = [case.sample] if case.sample is not None else range(min(len(samples), SAMPLES_TRIED))
    eager_refusal: Exception | None = None
    export_refusal: str | None = None
    for index in tried:
        sample = samples[index]
        error, refusal = _refusals(case, sample)
        eager_refusal, export_refusal = eager_refusal or error, export_refusal or refusal
        if error is not None or refusal is not None:
            continue
        twin = redrawn[index] if index < len(redrawn) else None
        fresh = twin if twin is not None and twin.same_call(sample) and twin.call.shapes == sample.call.shapes else None
        others = (s for s in samples if s.same_call(sample) and s.call.shapes != sample.call.shapes)
        other = next((s for s in others if _refusals(case, s) == (None, None)), None)
        return ModuleCall(case, sample, fresh.forward if fresh else sample.forward, other.forward if other else None)
    if export_refusal is not None:
        pytest.xfail(export_refusal)
    pytest.skip(f"eager refuses the sample: {type(eager_refusal).__name__}: {eager_refusal}"[:200])


def _stateful(call: ModuleCall) -> bool:
    """Whether eager's calls write the module's parameters or buffers (BatchNorm's running
    statistics in train mode), told from a build run through the protocol's calls."""
    model = call.case.build(call.sample)
    before = _state(model)
    eager_answers(model, call.runs)
    after = _state(model)
    return any(not torch.equal(before[name], after[name]) for name in before)


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The module's parameters and buffers, copied, by name."""
    named = itertools.chain(model.named_parameters(), model.named_buffers())
    return {name: tensor.detach().clone() for name, tensor in named}


def random_answers(call: ModuleCall) -> bool:
    """Whether eager's answers on the sample change with the random generator's state (dropout in
    train mode), as srbench tells a tagged op's (:func:`~srbench.static.resolve.changes_with_seed`):
    only then are results compared by geometry. The graph's ops do not tell it: an eval-mode
    Transformer's ``dropout(train=False)`` and an RNN's ``lstm`` carry torch's nondeterministic
    tag, though their answers are fixed (told by the tag, 375 samples of Transformer, RNN, LSTM
    and GRU modules were compared by geometry only in the first full run)."""

    def draw() -> Any:
        return eager_answers(call.case.build(call.sample), [("sample", call.sample.forward)])["sample"][0]

    return changes_with_seed(draw)


def run_module(call: ModuleCall, options: StaticOptions, aliasing: Callable[[Any, Inputs], Any]) -> bool:
    """Prepare a fresh build of the sample's module under ``options`` and run it beside another
    on every call; after each run its parameters and buffers must be what eager's hold then.
    Returns whether results were compared by geometry only (eager's answers are random)."""
    eager_model, static_model = call.case.build(call.sample), call.case.build(call.sample)
    answers, states = {}, {}
    for name, inputs in call.runs:  # in order: a train-mode call updates the module's statistics
        answers.update(eager_answers(eager_model, [(name, inputs)]))
        states[name] = _state(eager_model)
    module = StaticModule(static_model, call.sample.forward.clone(), options, name="module")
    by_geometry = random_answers(call)

    def same_state(name: str, run: str) -> None:
        what = f"{run}: the module's parameters and buffers"
        if by_geometry:
            check_geometry(_state(static_model), states[name], what)
        else:
            compare(_state(static_model), states[name], rtol=RTOL, atol=ATOL, run=what)

    runtime = module.runtime()
    check_runs(
        runtime,
        eager_model,
        call.runs,
        options,
        aliasing,
        by_geometry,
        rtol=RTOL,
        atol=ATOL,
        answers=answers,
        after_run=same_state,
    )
    return by_geometry


@pytest.mark.filterwarnings("ignore")  # deprecated arguments, lazy modules: eager's warnings, not srbench's
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_module_matches_eager(
    case: ModuleCase,
    one_thread: None,
    output_aliasing: Callable[[Any, Inputs], Any],
    record_property: Callable[[str, object], None],
) -> None:
    call = module_call(case)
    record_property("fresh_values", call.fresh is not call.sample.forward)
    record_property("another_shape", call.other is not None)
    for options in (StaticOptions(), case.variant):
        by_geometry = run_module(call, options, output_aliasing)
    record_property("by_geometry", by_geometry)


# The extended part: the module lowered to core ATen, on two streams, and from several threads.
EXTENDED = (Sweep.DECOMPOSE, Sweep.STREAMS, Sweep.THREADS)
CI_EVERY = 4


@dataclass(frozen=True)
class ExtendedCase:
    """One ModuleInfo in one mode and (in the full sweep) one of its samples (``module``, its
    option set unused), and what the extended part varies for it."""

    module: ModuleCase
    sweep: Sweep

    @property
    def id(self) -> str:
        return f"{self.module.id}-{self.sweep.value}"


def _extended_cases(full: bool) -> list[ExtendedCase]:
    """CI: every ``CI_EVERY``-th ModuleInfo and mode of each kind, on its first sample. Full: each
    kind on every ModuleInfo's first sample, and every further sample under one kind, in turn
    (as the sweep above turns its option sets)."""
    firsts: list[list[ExtendedCase]] = [[] for _ in EXTENDED]
    further: list[ExtendedCase] = []
    for index, info in enumerate(module_db):
        if torch.float32 not in info.supported_dtypes("cpu"):
            continue
        for mode in _modes(info):
            for kind, sweep in enumerate(EXTENDED):
                firsts[kind].append(ExtendedCase(ModuleCase(info, mode, StaticOptions(), 0 if full else None), sweep))
            count = len(ModuleCase(info, mode, StaticOptions()).samples(seed=0)) if full else 1
            further += [
                ExtendedCase(ModuleCase(info, mode, StaticOptions(), s), EXTENDED[(index + s) % len(EXTENDED)])
                for s in range(1, count)
            ]
    chosen = [
        [case for index, case in enumerate(group) if full or index % CI_EVERY == offset % CI_EVERY]
        for offset, group in enumerate(firsts)
    ]
    # round robin over the kinds: a run stopped early has met each alike
    return [case for row in itertools.zip_longest(*chosen) for case in row if case is not None] + further


EXTENDED_CASES = _extended_cases(FULL_SWEEP)


def run_extended(case: ExtendedCase, aliasing: Callable[[Any, Inputs], Any]) -> None:
    """The case's first sample under its sweep. Under ``decompose``, where srbench's answers
    differ from eager's, torch's own lowered program is run beside them: where it differs from
    eager too, srbench must answer as it does and the case is an expected failure with the
    difference; otherwise the failure stands. srbench's own refusals at prepare time are expected
    failures with srbench's reason. Threads run at once only modules whose calls leave their state
    as it was: calls from several threads at once that each update BatchNorm's running statistics
    race on them, in eager too, so no order of eager's calls is the answer; those take turns
    (:func:`run_in_turns`)."""
    call = module_call(case.module)
    with refusal_expected():
        if case.sweep is Sweep.THREADS:
            if _stateful(call):
                run_in_turns(call, aliasing)
                return
            module = StaticModule(call.case.build(call.sample), call.sample.forward.clone(), name="module")
            model = call.case.build(call.sample)
            run_in_threads(module, model, call.runs, random_answers(call), aliasing, rtol=RTOL, atol=ATOL)
            return
        options = SWEEP_OPTIONS[case.sweep]
        try:
            run_module(call, options, aliasing)
        except AssertionError:  # values (EquivalenceError), strides or state
            if case.sweep is not Sweep.DECOMPOSE:
                raise
            difference = lowering_difference(
                lambda: call.case.build(call.sample),
                call.sample.forward,
                call.runs,
                options,
                aliasing,
                rtol=RTOL,
                atol=ATOL,
            )
            if difference is None:
                raise
            pytest.xfail(f"torch's core-ATen lowering itself answers otherwise: {difference}")


def run_in_turns(call: ModuleCall, aliasing: Callable[[Any, Inputs], Any]) -> None:
    """A module whose calls write its state, from THREADS threads over one prepared module (a
    runtime each, :class:`RuntimePool`), taking turns in a fixed order: each call must give what
    eager's call gives in that place of the sequence, and the state must end as eager's, so every
    thread's runtime reads the state the others' calls left (the module's own buffers, not a
    runtime's copy)."""
    eager_model, static_model = call.case.build(call.sample), call.case.build(call.sample)
    sequence = [(f"{name} #{index}", inputs) for index, (name, inputs) in enumerate(call.runs * THREADS)]
    answers = {}
    for name, inputs in sequence:  # in order: each call updates the module's statistics
        answers.update(eager_answers(eager_model, [(name, inputs)]))
    module = StaticModule(static_model, call.sample.forward.clone(), name="module")
    pool, turn, errors = RuntimePool(module), threading.Condition(), []
    taken = [0]

    def work(thread: int) -> None:
        runtime = pool.runtime()
        for index in range(thread, len(sequence), THREADS):
            with turn:
                turn.wait_for(lambda index=index: taken[0] == index or bool(errors), timeout=60)
            try:
                if not errors:
                    check_runs(runtime, eager_model, [sequence[index]], module.options, aliasing, False,
                               rtol=RTOL, atol=ATOL, answers=answers)  # fmt: skip
            except BaseException as error:  # reported by the test's thread
                errors.append(error)
            with turn:
                taken[0] += 1
                turn.notify_all()

    on_every_thread(work, errors)
    assert taken[0] == len(sequence), f"{taken[0]} of {len(sequence)} calls ran"
    compare(_state(static_model), _state(eager_model), rtol=RTOL, atol=ATOL, run="after the turns: the module's state")


@pytest.mark.filterwarnings("ignore")  # deprecated arguments, lazy modules: eager's warnings, not srbench's
@pytest.mark.parametrize("case", EXTENDED_CASES, ids=[case.id for case in EXTENDED_CASES])
def test_module_extended_matches_eager(
    case: ExtendedCase, one_thread: None, output_aliasing: Callable[[Any, Inputs], Any]
) -> None:
    run_extended(case, output_aliasing)


def test_extended_part_covers_every_kind_and_mode_in_ci() -> None:
    """CI's share of the extended part meets every kind in both modes, and is a quarter of the
    full sweep's first samples."""
    ci = _extended_cases(full=False)
    firsts = [case for case in _extended_cases(full=True) if case.module.sample == 0]
    assert {(case.sweep, case.module.mode) for case in ci} == {(case.sweep, case.module.mode) for case in firsts}
    assert len(ci) * CI_EVERY <= len(firsts) + CI_EVERY * len(EXTENDED)


def _dropout_inputs(module_info: Any, device: str, dtype: torch.dtype, requires_grad: bool, training: bool, **_: Any):
    make = torch.testing.make_tensor
    return [
        common_modules.ModuleInput(
            common_modules.FunctionInput(0.5),
            forward_input=common_modules.FunctionInput(make((4, 8), device=device, dtype=dtype)),
        )
    ]


def test_random_answers_are_compared_by_geometry_and_fixed_ones_by_value(one_thread, output_aliasing):
    # module_db has no random module whose samples draw (its dropouts are 0): nn.Dropout, as a
    # ModuleInfo of the sweep's own, goes through the geometry path in train mode only
    info = common_modules.ModuleInfo(torch.nn.Dropout, module_inputs_func=_dropout_inputs, train_and_eval_differ=True)
    training = module_call(ModuleCase(info, Mode.TRAIN, StaticOptions()))
    assert random_answers(training)
    assert run_module(training, StaticOptions(), output_aliasing)
    evaluating = module_call(ModuleCase(info, Mode.EVAL, StaticOptions()))
    assert not random_answers(evaluating)
    assert not run_module(evaluating, StaticOptions(), output_aliasing)
