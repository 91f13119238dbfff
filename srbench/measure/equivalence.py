"""The equivalence protocol: a runtime must give eager's answers, on every shape, every time,
and leave its inputs as eager leaves them (untouched, unless the model writes them in place: then
holding eager's values under the case's tolerance, as outputs do).

The runtime is prepared on the first inputs, then run on the first inputs, on inputs of a
second shape, and on the first inputs again (a runtime that plans memory for one shape must
neither give a wrong answer on another nor stay broken after it). Every output is compared with
eager's by ``torch.testing.assert_close`` under the case's tolerance, by its exact class (a
tensor subclass such as MONAI's ``MetaTensor`` is not a plain tensor: :func:`type_difference`)
and by whether it requires grad; a failure names the run, the output, and the largest absolute and relative difference.

Eager's answer is eager as the runtime calls the model (:class:`~srbench.runtimes.EagerMode`):
under ``torch.no_grad`` by default, what srbench's static runtime promises (it turns grad mode
off itself, and a model's own ``enable_grad`` block still records history there); under
``torch.inference_mode`` for the runtimes that run the model so (the eager plugin, the peers),
where such a block records nothing. See :func:`grad_difference`.

Outputs are matched by their path in the output structure, which must be eager's (container
types, dict keys as a set, lengths), so permuted or renamed outputs are caught, not compared
crosswise. Before any output is read, the protocol checks that its memory is still there: a
runtime that returns a view of memory it releases after the run would otherwise crash the check.
Tolerances that would switch the comparison off (infinite, NaN, negative) are refused.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs, flatten_with_paths
from srbench.runtimes import EagerMode


class EquivalenceError(AssertionError):
    """A runtime's answer differs from eager's, or the runtime modified its inputs."""


@dataclass(frozen=True)
class Difference:
    """The largest differences between one output and eager's (0 for exact, non-float outputs)."""

    output: str
    max_abs: float
    max_rel: float


@dataclass(frozen=True)
class EquivalenceReport:
    """What the protocol compared, and the largest differences it tolerated."""

    runs: int
    outputs: int
    max_abs: float
    max_rel: float

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "outputs": self.outputs, "max_abs_diff": self.max_abs, "max_rel_diff": self.max_rel}


def leaves(value: Any) -> list[tuple[str, Any]]:
    """The leaves of a (nested) output with their paths, e.g. ``[1]['logits']``."""
    flat, _ = flatten_with_paths(value)
    return [(pytree.keystr(path) or "output", leaf) for path, leaf in flat]


def _kind(spec: pytree.TreeSpec) -> str:
    if spec.is_leaf():
        return "value"
    kind = spec.context if isinstance(spec.context, type) else spec.type  # a namedtuple's class
    return getattr(kind, "__name__", str(kind))


def _keys(context: Any) -> bool:
    """Whether a node's context is its children's keys (a dict's, a ModelOutput's), compared as a
    set; other contexts (a registered dataclass's field lists, a namedtuple's class) must be equal."""
    return isinstance(context, list) and all(isinstance(key, Hashable) for key in context)


def structure_difference(actual: Any, expected: Any) -> str | None:
    """Where the runtime's output is shaped unlike eager's (container types, dict keys, lengths),
    the first place, or ``None``. Dict keys are compared as sets: their order is not semantics."""

    def walk(got: pytree.TreeSpec, want: pytree.TreeSpec, path: str) -> str | None:
        where = path or "the output"
        if got.is_leaf() or want.is_leaf() or got.type is not want.type:
            if got.is_leaf() and want.is_leaf():
                return None
            return f"{where} is a {_kind(got)} in the runtime's answer, a {_kind(want)} in eager's"
        if _keys(want.context) and _keys(got.context):  # dict-like: keys
            missing = [k for k in want.context if k not in got.context]
            extra = [k for k in got.context if k not in want.context]
            if missing or extra:
                return f"{where} has keys {got.context}, eager's {want.context}"
            children = dict(zip(got.context, got.children()))
            pairs = [(children[k], child, f"{path}[{k!r}]") for k, child in zip(want.context, want.children())]
        elif got.context != want.context:
            return f"{where} is a {_kind(got)} in the runtime's answer, a {_kind(want)} in eager's"
        elif got.num_children != want.num_children:
            return f"{where} has {got.num_children} elements, eager's {want.num_children}"
        else:
            pairs = [(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(got.children(), want.children()))]
        return next((d for a, b, p in pairs if (d := walk(a, b, p)) is not None), None)

    return walk(pytree.tree_structure(actual), pytree.tree_structure(expected), "")


def released_memory(tensor: torch.Tensor) -> str | None:
    """Why reading ``tensor`` would read memory it no longer has (a view into storage that was
    resized away, as a runtime's released slab is), or ``None``. Reading such a tensor can crash
    the process, so the protocol checks this before it reads any output."""
    if tensor.layout != torch.strided or tensor.numel() == 0:
        return None
    extent = tensor.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
    needed, held = extent * tensor.element_size(), tensor.untyped_storage().nbytes()
    if needed <= held:
        return None
    return f"it views {needed} bytes of a storage that now holds {held}: the runtime released memory it returned"


def _check_readable(value: Any, what: str, run: str) -> None:
    for path, leaf in leaves(value):
        problem = released_memory(leaf) if isinstance(leaf, torch.Tensor) else None
        if problem:
            raise EquivalenceError(f"{run}: {what} {path} cannot be read: {problem}")


def difference(output: str, actual: Any, expected: Any) -> Difference:
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or actual.shape != expected.shape:
        return Difference(output, float("nan"), float("nan"))
    if actual.numel() == 0:
        return Difference(output, 0.0, 0.0)
    a, e = (t.to_dense() if t.layout != torch.strided else t for t in (actual, expected))  # sparse: its values
    # complex values are compared as complex numbers: the difference's modulus (a float64 copy
    # would keep only the real parts)
    wide = torch.complex128 if a.is_complex() or e.is_complex() else torch.float64
    a = a.detach().to("cpu", wide)
    e = e.detach().to("cpu", wide)
    absolute = (a - e).abs()
    both_nan = a.isnan() & e.isnan()
    absolute = torch.where(both_nan, torch.zeros_like(absolute), absolute)
    relative = absolute / e.abs()
    relative = torch.where(absolute == 0, torch.zeros_like(relative), relative)
    return Difference(output, absolute.max().item(), relative.max().item())


def check_tolerance(rtol: float, atol: float) -> None:
    """Refuse tolerances that switch the comparison off (infinite, NaN) or make no sense (negative)."""
    for name, value in (("rtol", rtol), ("atol", atol)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def grad_difference(actual: Any, expected: Any) -> str | None:
    """Where an output tracks gradients unlike eager's (``requires_grad``), or ``None``.

    ``assert_close`` does not look at it. Eager under ``no_grad`` still gives outputs that require
    grad: a parameter returned (or a view of one), and what an ``enable_grad`` block in forward
    computes from parameters; a runtime that drops it gives a caller no gradient where eager's
    answer has one (and one that adds it, history eager's has not). ``is_leaf`` and ``grad_fn``
    are not compared: a returned parameter's view is a leaf or not by how it was made, which no
    caller relies on."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)):
        return None
    if actual.requires_grad == expected.requires_grad:
        return None
    if expected.requires_grad:
        return "it requires grad in eager's answer, not in the runtime's"
    return "it requires grad in the runtime's answer, not in eager's"


def type_difference(actual: Any, expected: Any) -> str | None:
    """How an output tensor's class differs from eager's (exactly: a subclass is not its base),
    or ``None``. ``assert_close`` takes a subclass for its base (``allow_subclasses``), so a
    runtime that answered a plain tensor where eager answers MONAI's ``MetaTensor`` (its
    ``affine`` and ``meta`` lost, the values right) passed. No runtime is excused: one that can
    only give plain tensors (ONNX Runtime, through numpy) fails such a case by this check, as
    one that drops ``requires_grad`` fails :func:`grad_difference`."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)):
        return None
    got, want = type(actual), type(expected)
    if got is want:
        return None
    return f"it is a {_qualified(got)} in the runtime's answer, a {_qualified(want)} in eager's"


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _assert_close(actual: Any, expected: Any, *, rtol: float, atol: float) -> None:
    """``torch.testing.assert_close`` for tensors and numbers; any other leaf a model returns (a
    string, an enum, a dtype) is compared by type and ``==``, which ``assert_close`` refuses
    with a TypeError."""
    if isinstance(expected, (torch.Tensor, numbers.Number)):
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_device=True)
    elif type(actual) is not type(expected) or actual != expected:
        raise AssertionError(f"got {actual!r} ({type(actual).__name__}), expected {expected!r}")


def compare(actual: Any, expected: Any, *, rtol: float, atol: float, run: str) -> list[Difference]:
    """Compare every output leaf, matched by its path; raise :class:`EquivalenceError` on the
    first that differs (in structure, type, shape, dtype, device, values, a tensor's exact class
    or ``requires_grad``)."""
    check_tolerance(rtol, atol)
    _check_readable(actual, "output", run)
    got, want = leaves(actual), leaves(expected)
    if len(got) != len(want):
        raise EquivalenceError(
            f"{run}: the runtime returned {len(got)} output values ({', '.join(p for p, _ in got)}), "
            f"eager {len(want)} ({', '.join(p for p, _ in want)})"
        )
    shape = structure_difference(actual, expected)
    if shape is not None:
        raise EquivalenceError(f"{run}: the runtime's output is structured unlike eager's: {shape}")
    by_path = dict(got)
    differences = []
    for path, expected_leaf in want:
        actual_leaf = by_path[path]
        diff = difference(path, actual_leaf, expected_leaf)
        try:
            _assert_close(actual_leaf, expected_leaf, rtol=rtol, atol=atol)
        except AssertionError as error:
            raise EquivalenceError(
                f"{run}: output {path} differs from eager: largest absolute difference {diff.max_abs:.3g}, "
                f"largest relative difference {diff.max_rel:.3g} (rtol={rtol:g}, atol={atol:g})\n{error}"
            ) from None
        if (kind := type_difference(actual_leaf, expected_leaf)) is not None:
            raise EquivalenceError(f"{run}: output {path} is of another class than eager's: {kind}")
        if (grad := grad_difference(actual_leaf, expected_leaf)) is not None:
            raise EquivalenceError(f"{run}: output {path} tracks gradients unlike eager's: {grad}")
        differences.append(diff)
    return differences


def _snapshot(value: Any) -> Any:
    return pytree.tree_map(lambda leaf: leaf.detach().clone() if isinstance(leaf, torch.Tensor) else leaf, value)


def _check_unchanged(now: Any, before: Any, what: str, run: str) -> None:
    _check_readable(now, what, run)
    for (path, current), (_, saved) in zip(leaves(now), leaves(before)):
        try:
            _assert_close(current, saved, rtol=0, atol=0)
        except AssertionError as error:
            raise EquivalenceError(f"{run}: {what} {path} was modified\n{error}") from None


@dataclass(frozen=True)
class Expected:
    """Eager's answer to one call: what it returned, and the call's inputs as eager left them
    (equal to the inputs unless the model writes them in place)."""

    outputs: Any
    inputs_after: Inputs


def eager_answer(model: Callable[..., Any], inputs: Inputs | tuple, mode: EagerMode = EagerMode.NO_GRAD) -> Expected:
    """Run ``model`` (eager, in ``mode``: see the module's docstring) on a copy of ``inputs``."""
    call = Inputs.coerce(inputs).clone()
    with mode.context():
        outputs = call.call(model)
    return Expected(outputs, call)


def _check_inputs_after(got: Inputs, original: Inputs, expected: Inputs, run: str, *, rtol: float, atol: float) -> None:
    """The runtime's inputs after its call must be what eager left in them: exactly where eager
    leaves an input as it was, and under the outputs' tolerance where the model writes values
    into it. Values a model writes into its inputs are results like its outputs: a runtime that
    computes them otherwise (``decompose``'s attention, a fused kernel) rounds them otherwise, as
    it rounds its outputs (a decoder writing each layer's keys
    into a caller's static cache was reported wrong under ``decompose`` for a difference of 1e-7
    in the second layer's keys)."""
    _check_readable((got.args, dict(got.kwargs)), "input", run)
    _check_containers_after(got, expected, run)
    for (path, now), (_, before), (_, want) in zip(got.with_paths(), original.with_paths(), expected.with_paths()):
        if not isinstance(want, torch.Tensor):
            continue
        eager_writes = not torch.equal(before, want)
        relative, absolute = (rtol, atol) if eager_writes else (0.0, 0.0)
        try:
            torch.testing.assert_close(now, want, rtol=relative, atol=absolute, equal_nan=True)
        except AssertionError as error:
            what = (
                "differs from what eager leaves in it (the model writes it in place)"
                if eager_writes
                else ("was modified (eager leaves it unchanged)")
            )
            raise EquivalenceError(f"{run}: input {path} {what}\n{error}") from None


_PLAIN_VALUES = (bool, int, float, complex, str, type(None))


def _check_containers_after(got: Inputs, expected: Inputs, run: str) -> None:
    """The runtime's call must hold, after it, the items eager's holds: a model may change the
    lists and dicts it is called with in Python (``trace.append(h)``, ``state["h"] = h``), and the
    leaf-by-leaf comparison below pairs leaves in order, so an item eager added (or removed) went
    unseen, and a runtime that left the caller's list as it was passed (round 23's
    ``list_argument_appended``). Plain values put in a leaf's place (a step count) must be equal."""
    now, want = got.with_paths(), expected.with_paths()
    now_paths, want_paths = [path for path, _ in now], [path for path, _ in want]
    if now_paths != want_paths:
        missing = [path for path in want_paths if path not in now_paths]
        extra = [path for path in now_paths if path not in want_paths]
        sides = (("eager's only", missing), ("the runtime's only", extra))
        detail = "; ".join(f"{what}: {', '.join(paths[:3])}" + (" ..." if len(paths) > 3 else "")
                           for what, paths in sides if paths)  # fmt: skip
        raise EquivalenceError(
            f"{run}: the call's containers hold other items than eager leaves in them (the model changes "
            f"its arguments in Python: appends, removes or sets items): {detail or 'items in another order'}"
        )
    for (path, value), (_, eager_value) in zip(now, want):
        if isinstance(eager_value, _PLAIN_VALUES) and not _equal_plain(value, eager_value):
            raise EquivalenceError(f"{run}: input {path} is {value!r} after the call, eager leaves {eager_value!r}")


def _equal_plain(value: Any, eager_value: Any) -> bool:
    """Equal plain values of one type, NaN equal to NaN."""
    if type(value) is not type(eager_value):
        return False
    return bool(value == eager_value) or (value != value and eager_value != eager_value)


def check_equivalence(
    runtime: Callable[..., Any],
    first_inputs: Inputs | tuple,
    second_inputs: Inputs | tuple,
    expected_first: Expected,
    expected_second: Expected,
    *,
    rtol: float,
    atol: float,
    outputs_may_be_reused: bool = False,
    expected_third: Expected | None = None,
) -> EquivalenceReport:
    """Run the protocol on a prepared ``runtime``; ``expected_*`` are eager's answers to the two
    calls (:func:`eager_answer`). Each run calls the runtime on a fresh copy of its inputs, so a
    model that writes its inputs gets the same inputs every time, and after each run the copy
    must hold exactly what eager left in its own copy.

    Unless ``outputs_may_be_reused`` (a runtime managing its output tensors may hand out the same
    buffers again), the outputs of the first run must survive the second run unchanged: a runtime
    must not return memory it overwrites on the next call.

    ``expected_third`` is eager's answer to its own third call (the first inputs again) where it
    was asked: a model whose first call fills state (a cache, a buffer) may answer a later call
    otherwise than its first; by default run 3 must give ``expected_first``.
    """
    check_tolerance(rtol, atol)
    differences: list[Difference] = []

    def run(name: str, inputs: Inputs, expected: Expected) -> Any:
        call = inputs.clone()
        output = call.call(runtime)
        differences.extend(compare(output, expected.outputs, rtol=rtol, atol=atol, run=name))
        _check_inputs_after(call, inputs, expected.inputs_after, name, rtol=rtol, atol=atol)
        return output

    first, second = Inputs.coerce(first_inputs), Inputs.coerce(second_inputs)
    first_output = run("run 1 (first shape)", first, expected_first)
    first_saved = _snapshot(first_output)
    run("run 2 (second shape)", second, expected_second)
    if not outputs_may_be_reused:
        _check_unchanged(
            first_output, first_saved, "an output of run 1, still held by the caller,", "run 2 (second shape)"
        )
    run("run 3 (first shape again)", first, expected_first if expected_third is None else expected_third)
    return EquivalenceReport(
        runs=3,
        outputs=len(leaves(expected_first.outputs)),
        max_abs=max((d.max_abs for d in differences), default=0.0),
        max_rel=max((d.max_rel for d in differences), default=0.0),
    )
