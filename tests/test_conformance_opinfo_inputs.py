"""PyTorch's OpInfo database through srbench with its inputs in other forms.

OpInfo samples are mostly fresh, contiguous tensors, and a static runtime plans on the first
call's layout: an out variant writing into the slab, a view made once of an input, a program
chosen by signature may all assume a layout the next call does not have. Here each OpInfo that
supports float32 on the CPU is run (its first sample that eager runs and ``torch.export``
captures, as ``test_conformance_opinfo`` picks it) with its inputs made, one form per case:

- transposed (the last two dimensions' strides swapped), stepped (sliced with a step of 2),
  at a storage offset, channels-last (4-D): the same values, laid out otherwise;
- expanded (a stride of 0; only inputs eager does not write), with other values (a row repeated);
- zero-size along a dimension (the first where eager runs the op, every input of that size along
  it narrowed with it), and 0-dim (every input, else the first alone);
- two arguments the same tensor (two inputs of one shape and dtype, neither written);
- and, since a static runtime plans on the first call's layout, a module prepared on the
  contiguous sample and called with every other form in turn, and one prepared on a transposed
  (or stepped) sample and called with the contiguous one and the same layout at an offset.

Each form's runs (the form, its fresh values, the form again, another shape where the OpInfo
makes one) go through the protocol of ``test_conformance_opinfo`` (values, dtypes, shapes,
strides, aliasing, inputs left as eager leaves them, held outputs surviving). Where eager raises
on a form, srbench must raise too (at prepare time or at the call), and answer as eager on the
next call. Each case runs under one of the default options, ``enable_out_variant=False``,
``cleanup_activations=False`` and ``manage_output_tensors=True``, in turn over ops and forms.
CI runs every CI_EVERY-th case of each form; ``SRBENCH_OPINFO_SWEEP=full`` runs them all.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from test_conformance_opinfo import (
    CI_EVERY,
    FULL_SWEEP,
    OPTION_VARIANTS,
    OpCall,
    OpCase,
    SampleCall,
    _eager_runs,
    check_runs,
    op_call,
    op_db,
    refusal_expected,
    unspecified_values,
)

from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions

OFFSET = 3  # elements before an input's first one, in the offset form
OPTIONS = (StaticOptions(), *OPTION_VARIANTS)


class Form(enum.Enum):
    """How a case's inputs are made."""

    TRANSPOSED = "transposed"
    STEPPED = "stepped"
    EXPANDED = "expanded"
    OFFSET = "offset"
    CHANNELS_LAST = "channels_last"
    ZERO_SIZE = "zero_size"
    ZERO_DIM = "zero_dim"
    ALIASED = "aliased"
    SWITCHED = "contiguous_then_others"
    SWITCHED_BACK = "transposed_then_contiguous"


# Per-tensor layouts keeping values: each makes a copy of ``tensor`` laid out otherwise, or
# ``None`` where the layout would be the tensor's own (nothing to vary).


def transposed(tensor: torch.Tensor) -> torch.Tensor | None:
    if tensor.ndim < 2 or tensor.shape[-1] < 2 or tensor.shape[-2] < 2:
        return None
    return tensor.mT.contiguous().mT


def stepped(tensor: torch.Tensor) -> torch.Tensor | None:
    """Every second element of a buffer twice as long along the last dimension longer than 1."""
    long = [d for d in range(tensor.ndim) if tensor.shape[d] > 1]
    if not long:
        return None
    dim = long[-1]
    shape = list(tensor.shape)
    shape[dim] *= 2
    index: list[slice] = [slice(None)] * tensor.ndim
    index[dim] = slice(None, None, 2)
    view = tensor.new_empty(shape)[tuple(index)]
    return view.copy_(tensor)


def at_offset(tensor: torch.Tensor) -> torch.Tensor | None:
    """The tensor with its strides, OFFSET elements into a storage of its own."""
    if tensor.numel() == 0 or 0 in tensor.stride():
        return None
    span = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
    view = tensor.new_empty(OFFSET + span).as_strided(tensor.shape, tensor.stride(), OFFSET)
    return view.copy_(tensor)


def channels_last(tensor: torch.Tensor) -> torch.Tensor | None:
    if tensor.ndim != 4 or tensor.shape[1] < 2 or tensor.shape[2] * tensor.shape[3] < 2:
        return None
    return tensor.contiguous(memory_format=torch.channels_last)


def expanded(tensor: torch.Tensor) -> torch.Tensor | None:
    """The first slice along the first dimension longer than 1, expanded back (a stride of 0)."""
    dim = next((d for d in range(tensor.ndim) if tensor.shape[d] > 1), None)
    if dim is None:
        return None
    return tensor.narrow(dim, 0, 1).clone().expand(tensor.shape)


LAYOUTS: dict[Form, Callable[[torch.Tensor], torch.Tensor | None]] = {
    Form.TRANSPOSED: transposed,
    Form.STEPPED: stepped,
    Form.OFFSET: at_offset,
    Form.CHANNELS_LAST: channels_last,
    Form.EXPANDED: expanded,
}


def _layout(layout: Callable[[torch.Tensor], torch.Tensor | None], tensor: torch.Tensor) -> torch.Tensor | None:
    """``layout(tensor)`` for a strided tensor; ``None`` for a sparse one (its sample is refused)."""
    return layout(tensor) if tensor.layout == torch.strided else None


def _changes(layout: Callable[[torch.Tensor], torch.Tensor | None]) -> Callable[[SampleCall], bool]:
    """Whether ``layout`` changes one of a sample's tensors: samples it does are tried first."""
    return lambda call: any(_layout(layout, tensor) is not None for tensor in call.tensors)


def laid_out(
    inputs: Inputs, layout: Callable[[torch.Tensor], torch.Tensor | None], keep: frozenset[int] = frozenset()
) -> Inputs | None:
    """``inputs`` with every tensor (but those at the indices ``keep``) given ``layout``, or
    ``None`` where no tensor changes."""
    made = [None if index in keep else _layout(layout, tensor) for index, tensor in enumerate(inputs.args)]
    if all(tensor is None for tensor in made):
        return None
    return Inputs(tuple(old if new is None else new for old, new in zip(inputs.args, made)))


def written_inputs(model: torch.nn.Module, inputs: Inputs) -> frozenset[int]:
    """The indices of the inputs eager writes in place: their version counters move, or their
    bits change (``native_batch_norm`` updates its running statistics though its schema marks no
    argument written, so no version counter moves)."""
    copies, kept = inputs.clone(), inputs.clone()
    before = [tensor._version for tensor in copies.args]
    with torch.no_grad():
        copies.call(model)
    return frozenset(
        index
        for index, (tensor, was, old) in enumerate(zip(copies.args, before, kept.args))
        if tensor._version != was or not _same_bits(tensor, old)
    )


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit (a NaN equals itself), for strided tensors; others are taken as unchanged."""
    if a.layout != torch.strided or a.shape != b.shape:
        return a.layout != torch.strided
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def zero_size(inputs: Inputs, dim: int) -> Inputs | None:
    """Every tensor whose size along ``dim`` (counted from the right, as broadcasting aligns
    dimensions) is the first tensor's there, narrowed to 0 along it."""
    first = next((t for t in inputs.args if t.ndim > 0), None)
    if first is None or dim < -first.ndim or first.shape[dim] == 0:
        return None
    size = first.shape[dim]

    def narrowed(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.ndim >= -dim and tensor.shape[dim] == size:
            return tensor.narrow(dim, 0, 0).clone()
        return tensor

    return Inputs(tuple(narrowed(tensor) for tensor in inputs.args))


def zero_dim(inputs: Inputs, only_first: bool) -> Inputs | None:
    """Every tensor (or the first of more than 0 dimensions alone) as its first element, 0-dim."""
    dims = [index for index, tensor in enumerate(inputs.args) if tensor.ndim > 0 and tensor.numel() > 0]
    chosen = set(dims[:1] if only_first else dims)
    if not chosen:
        return None
    return Inputs(tuple(t.reshape(-1)[0].clone() if i in chosen else t for i, t in enumerate(inputs.args)))


def aliased(inputs: Inputs, written: frozenset[int]) -> Inputs | None:
    """The first two inputs of one shape and dtype, neither written, as one tensor passed twice."""
    readable = [(i, t) for i, t in enumerate(inputs.args) if i not in written and t.numel() > 0]
    for (_, a), (j, b) in itertools.combinations(readable, 2):
        if a.shape == b.shape and a.dtype == b.dtype:
            return Inputs(tuple(a if index == j else t for index, t in enumerate(inputs.args)))
    return None


def _first_eager_runs(model: torch.nn.Module, candidates: Iterator[Inputs | None]) -> Inputs | None:
    """The first candidate eager runs, else the first one made (eager's refusal is then checked)."""
    made = [inputs for inputs in candidates if inputs is not None]
    return next((inputs for inputs in made if _eager_runs(model, inputs.args) is None), made[0] if made else None)


def formed(form: Form, model: torch.nn.Module, inputs: Inputs, written: frozenset[int]) -> Inputs | None:
    """``inputs`` in ``form`` (one of the single forms), or ``None`` where it does not apply."""
    if form is Form.EXPANDED:
        return laid_out(inputs, expanded, keep=written)
    if form in LAYOUTS:
        return laid_out(inputs, LAYOUTS[form])
    if form is Form.ZERO_SIZE:
        ndim = max((t.ndim for t in inputs.args), default=0)
        return _first_eager_runs(model, (zero_size(inputs, dim) for dim in range(-ndim, 0)))
    if form is Form.ZERO_DIM:
        return _first_eager_runs(model, (zero_dim(inputs, only_first) for only_first in (False, True)))
    assert form is Form.ALIASED
    return aliased(inputs, written)


PREFERRED: dict[Form, Callable[[SampleCall], bool]] = {
    Form.TRANSPOSED: _changes(transposed),
    Form.SWITCHED: _changes(transposed),
    Form.SWITCHED_BACK: _changes(transposed),
    Form.CHANNELS_LAST: _changes(channels_last),
    Form.STEPPED: _changes(stepped),
    Form.EXPANDED: _changes(expanded),
    Form.ZERO_SIZE: lambda call: any(t.ndim > 0 and t.numel() > 0 for t in call.tensors),
    Form.ZERO_DIM: lambda call: any(t.ndim > 0 and t.numel() > 0 for t in call.tensors),
    Form.ALIASED: lambda call: len({(t.shape, t.dtype) for t in call.tensors}) < len(call.tensors),
}


def runs_of(form: Form, call: OpCall) -> list[tuple[str, Inputs]] | None:
    """The named calls of ``form``'s case, the module prepared on the first; ``None`` where the
    form does not apply to the sample."""
    model, written = call.model, written_inputs(call.model, call.first)
    if form is Form.SWITCHED:
        others = [(f.value, formed(f, model, call.first, written)) for f in (Form.TRANSPOSED, Form.STEPPED)]
        others += [(f.value, formed(f, model, call.first, written)) for f in (Form.OFFSET, Form.CHANNELS_LAST)]
        runs = [(name, inputs) for name, inputs in others if inputs is not None]
        return [("contiguous", call.first), *runs, ("contiguous again", call.first)] if runs else None
    if form is Form.SWITCHED_BACK:
        layout = next(
            (f for f in (Form.TRANSPOSED, Form.STEPPED) if formed(f, model, call.first, written) is not None), None
        )
        if layout is None:
            return None
        first, fresh = (formed(layout, model, inputs, written) for inputs in (call.first, call.fresh))
        assert first is not None and fresh is not None
        at_offset_too = laid_out(first, at_offset)
        runs = [(layout.value, first), ("contiguous", call.first), (f"{layout.value}, fresh values", fresh)]
        return runs + ([(f"{layout.value} at an offset", at_offset_too)] if at_offset_too is not None else [])
    first = formed(form, model, call.first, written)
    if first is None:
        return None
    fresh = formed(form, model, call.fresh, written) if call.fresh is not call.first else first
    other = formed(form, model, call.other, written_inputs(model, call.other)) if call.other is not None else None
    runs = [(form.value, first), (f"{form.value}, fresh values", fresh or first), (f"{form.value} again", first)]
    return runs + ([(f"{form.value}, another shape", other)] if other is not None else [])


def must_raise(call: Callable[[], Any], run: str, eager: Exception) -> None:
    """``call`` raises, as eager raised ``eager`` on the same inputs (any error: srbench may refuse
    at prepare time, with its own type, where eager's kernel refuses at the call)."""
    try:
        call()
    except Exception:
        return
    pytest.fail(f"{run}: eager raises {type(eager).__name__}: {eager}; srbench returned")


def check_forms(
    model: torch.nn.Module,
    runs: list[tuple[str, Inputs]],
    options: StaticOptions,
    aliasing: Callable[[Any, Inputs], Any],
) -> None:
    """Prepare on ``runs``' first call and run the protocol on the runs eager takes; where eager
    raises, srbench must raise too, and give eager's answer on the next call after."""
    refused = {name: error for name, inputs in runs if (error := _eager_runs(model, inputs.args)) is not None}
    name, prepared_on = runs[0]
    if name in refused:

        def prepare_and_call() -> Any:
            return prepared_on.clone().call(StaticModule(model, prepared_on.clone(), options, name="op").runtime())

        must_raise(prepare_and_call, f"{name} under {options}", refused[name])
        return
    module = StaticModule(model, prepared_on.clone(), options, name="op")
    taken = [(name, inputs) for name, inputs in runs if name not in refused]
    runtime, by_geometry = module.runtime(), unspecified_values(module, taken)
    check_runs(runtime, model, taken, options, aliasing, by_geometry, rtol=1e-5, atol=1e-6)
    for name, inputs in runs:
        if name in refused:
            must_raise(lambda inputs=inputs: inputs.clone().call(runtime), f"{name} under {options}", refused[name])
    if refused:
        check_runs(runtime, model, taken[:1], options, aliasing, by_geometry, rtol=1e-5, atol=1e-6)


@dataclass(frozen=True)
class FormCase:
    """One float32 OpInfo, one form of its inputs, the options it runs under."""

    op: Any  # an OpInfo
    form: Form
    options: StaticOptions

    @property
    def id(self) -> str:
        return f"{OpCase(self.op, torch.float32, self.options).id}-{self.form.value}"


def form_cases(full: bool) -> list[FormCase]:
    """Every float32 OpInfo in every form (options in turn over ops and forms); CI's share is every
    CI_EVERY-th of each form (another offset per form), in round robin over the forms."""
    ops = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    chosen = [
        [
            FormCase(op, form, OPTIONS[(index // CI_EVERY + number) % len(OPTIONS)])
            for index, op in enumerate(ops)
            if full or index % CI_EVERY == number * 7 % CI_EVERY
        ]
        for number, form in enumerate(Form)
    ]
    return [case for row in itertools.zip_longest(*chosen) for case in row if case is not None]


FORM_CASES = form_cases(FULL_SWEEP)

# torch's own failures on a form, by OpInfo name and form: not run, since eager's answer is not one
# (the process crashes, or the result is memory eager never wrote).
TORCH_FAILURES = {
    ("_chunk_cat", Form.ZERO_DIM): "eager's _chunk_cat crashes the process (segmentation fault) on 0-dim tensors",
    ("_segment_reduce.offsets", Form.ZERO_SIZE): "eager's _segment_reduce crashes the process (segmentation "
    "fault) on empty data with its offsets",
    ("masked.median", Form.EXPANDED): "eager's nanmedian along a dimension of an expanded (stride-0) tensor "
    "returns uninitialized memory (4.6e-41 for a row of -0.37), another value at each call",
}


def _param(case: FormCase) -> Any:
    failure = TORCH_FAILURES.get((OpCase(case.op, torch.float32, case.options).id.rsplit("-", 1)[0], case.form))
    marks = [pytest.mark.xfail(reason=f"torch 2.13: {failure}", run=False)] if failure else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")  # deprecated ops, experimental dtypes: eager's warnings, not srbench's
@pytest.mark.parametrize("case", [_param(case) for case in FORM_CASES])
def test_opinfo_input_forms_match_eager(
    case: FormCase, one_thread: None, output_aliasing: Callable[[Any, Inputs], Any]
) -> None:
    call = op_call(OpCase(case.op, torch.float32, case.options), PREFERRED.get(case.form, lambda _: True))
    runs = runs_of(case.form, call)
    if runs is None:
        pytest.skip(f"the sample chosen (one the form changes first) has no input the {case.form.value} form changes")
    with refusal_expected():
        check_forms(call.model, runs, case.options, output_aliasing)


def test_ci_meets_every_form_and_option() -> None:
    """CI's share meets every form under more than one option, and is a small share."""
    ci, full = form_cases(full=False), form_cases(full=True)
    assert {case.form for case in ci} == set(Form)
    assert all(len({c.options for c in ci if c.form is form}) > 1 for form in Form)
    assert len(ci) * CI_EVERY <= len(full) + CI_EVERY * len(Form)
    cases = {(OpCase(c.op, torch.float32, c.options).id.rsplit("-", 1)[0], c.form) for c in full}
    assert TORCH_FAILURES.keys() <= cases  # every entry names a case of the sweep
