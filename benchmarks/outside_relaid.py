"""The outside-models sweep's check of inputs in other layouts: one runtime, the caller's strides.

The sweep's calls pass contiguous tensors, so srbench's handling of a caller's non-contiguous
tensors (the signature's strides, a program per layout, the probe copies, ``decompose``'s views
of inputs, writes into a caller's strided memory) went unexercised on most models; the
twenty-sixth round found a silent wrong answer there (a written sliced input read as if
contiguous). Here srbench is prepared under the defaults on the contiguous shape-0 call, as in
the sweep, and the same runtime is then called with every floating tensor argument of rank 2 or
more laid out otherwise, holding the same values (:data:`LAYOUTS`): transposed storage, a slice of
a wider buffer whose margins hold NaN, channels-last (rank 4). Each answer is compared with
eager's on an identically laid-out copy (some models branch on layout, so never the contiguous
answer): the outputs' values, their memory sharing with the inputs and their strides, the inputs
after the call, and the whole storage of each relaid argument (a write must land in the caller's
strided memory, and nowhere beside it, as eager's does).

Integer and boolean tensors (ids, masks, indices) are left contiguous: srbench's guard and
relayout of an argument do not depend on its dtype, and a NaN margin says nothing in them.
Each layout is tried once, on shape 0, or on shape 1 where it changes no argument of shape 0 (at
batch 1 a ``(1, n)`` argument transposed is the same tensor): each layout is an input signature
of its own, so a capture of its own, and one per layout keeps the sweep's time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.outside_models import Check, Outcome, OutsideModel
from srbench.formatting import error_summary

MARGIN = 3  # elements before the slice of the wider buffer (and after it), holding NaN


def _transposed(tensor: Any) -> Any:
    """The same values with the last two dimensions' strides swapped (column-major storage)."""
    return tensor.transpose(-1, -2).contiguous().transpose(-1, -2)


def _sliced(tensor: Any) -> Any:
    """The same values as a slice ``wide[..., MARGIN:MARGIN + n]`` of a wider NaN buffer: a
    runtime that reads the argument as contiguous reads NaN."""
    import torch

    wide = torch.full((*tensor.shape[:-1], tensor.shape[-1] + 2 * MARGIN), float("nan"), dtype=tensor.dtype)
    view = wide[..., MARGIN : MARGIN + tensor.shape[-1]]
    view.copy_(tensor)
    return view


def _channels_last(tensor: Any) -> Any:
    import torch

    return tensor.contiguous(memory_format=torch.channels_last) if tensor.dim() == 4 else tensor


# each layout: how a tensor argument is relaid (one it does not apply to is returned as it is)
LAYOUTS: dict[str, Callable[[Any], Any]] = {
    "transposed": _transposed,
    "sliced": _sliced,
    "channels_last": _channels_last,
}


def _relaid_tensor(tensor: Any) -> bool:
    """Whether ``tensor`` is an argument this check lays out otherwise: a plain dense floating
    tensor of rank 2 or more with elements (a subclass keeps its own layout rules)."""
    import torch

    return (
        type(tensor) is torch.Tensor
        and tensor.layout == torch.strided
        and tensor.is_floating_point()
        and not tensor.is_quantized
        and tensor.dim() >= 2
        and tensor.numel() > 0
    )


def relaid(call: Any, layout: Callable[[Any], Any]) -> tuple[Any, int]:
    """``call`` with each argument :func:`_relaid_tensor` selects laid out by ``layout`` (one
    tensor passed twice stays one tensor), and how many arguments changed strides."""
    import torch

    done: dict[int, torch.Tensor] = {}
    changed = 0

    def relay(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal changed
        if not _relaid_tensor(tensor):
            return tensor
        if id(tensor) not in done:
            with torch.no_grad():
                other = layout(tensor.detach())
            if other.stride() == tensor.stride() and other.storage_offset() == tensor.storage_offset():
                done[id(tensor)] = tensor
            else:
                changed += 1
                done[id(tensor)] = other.requires_grad_(tensor.requires_grad)
        return done[id(tensor)]

    return call.map_tensors(relay), changed


def _storages(call: Any) -> list[tuple[str, Any]]:
    """Every tensor argument's whole storage as a flat tensor of its dtype, by the argument's
    path: what a call leaves in the caller's memory, beside the argument's own elements too."""
    import torch

    flat = []
    for path, leaf in call.with_paths():
        if _relaid_tensor(leaf):
            storage = leaf.untyped_storage()
            count = storage.nbytes() // leaf.element_size()
            flat.append((path, torch.empty(0, dtype=leaf.dtype).set_(storage, 0, (count,), (1,))))
    return flat


def _compare_call(runtime: Any, call: Any, answer: Any, case: OutsideModel) -> str | None:
    """How the runtime's answer to a copy of ``call`` differs from eager's ``answer`` (to its own
    copy), or ``None``: values and the inputs after the call (raising
    :class:`~srbench.measure.equivalence.EquivalenceError`), the relaid arguments' whole storages,
    then the outputs' memory sharing and strides (the sweep's checks of those, on runs of their own)."""
    import torch

    from benchmarks.outside_models import _aliasing_check, _layout_check
    from srbench.measure.equivalence import _check_inputs_after, compare

    mine = call.clone()
    outputs = mine.call(runtime)
    compare(outputs, answer.outputs, rtol=case.rtol, atol=case.atol, run="relaid call")
    _check_inputs_after(mine, call, answer.inputs_after, "relaid call", rtol=case.rtol, atol=case.atol)
    for (path, now), (_, want) in zip(_storages(mine), _storages(answer.inputs_after)):
        if not torch.equal(now.isnan(), want.isnan()) or not torch.allclose(
            now.nan_to_num(), want.nan_to_num(), rtol=case.rtol, atol=case.atol
        ):
            return f"the storage of input {path} differs from eager's after the call"
    wrong = _aliasing_check(runtime, call, answer) or _layout_check(runtime, [call], [answer])
    return None if wrong is None else wrong.detail


def relaid_answers(model: Any, calls: Sequence[Any]) -> tuple[dict[str, tuple[Any, Any]], list[str]]:
    """Eager's answer to the first of ``calls`` that each of :data:`LAYOUTS` changes (shape 0, or
    shape 1 where shape 0's arguments keep their strides so: a ``(1, n)`` tensor transposed), by
    the layout's name (and shape, where 1), with the relaid call; and why eager refused the others
    (the model's own refusal of that layout: not srbench's to answer)."""
    from srbench.measure.equivalence import eager_answer

    answers = {}
    refused = []
    for layout_name, layout in LAYOUTS.items():
        relaid_calls = [
            (shape, other) for shape, (other, changed) in enumerate(relaid(c, layout) for c in calls) if changed
        ]
        if not relaid_calls:
            continue
        shape, other = relaid_calls[0]
        name = f"{layout_name} at shape {shape}" if shape else layout_name
        try:
            answers[name] = (other, eager_answer(model, other))
        except Exception as error:  # the model itself refuses the layout in eager (said short: one per layout)
            refused.append(f"eager refuses {name}: {error_summary(error)[:80]}")
    return answers, refused


def check_runtime_relaid(runtime: Callable[..., Any], answers: dict[str, tuple[Any, Any]],
                         case: OutsideModel) -> Check | None:  # fmt: skip
    """A wrong result or an error where ``runtime`` answers a relaid call (:func:`relaid_answers`)
    otherwise than eager, or ``None``."""
    from srbench.measure.equivalence import EquivalenceError

    for name, (call, answer) in answers.items():
        try:
            wrong = _compare_call(runtime, call, answer, case)
        except EquivalenceError as error:
            wrong = error_summary(error)
        except Exception as error:  # srbench failing on a layout eager runs is srbench's
            return Check(Outcome.ERROR, f"{name}: {error_summary(error)}"[:200])
        if wrong is not None:
            return Check(Outcome.WRONG, f"{name}: {wrong}"[:200])
    return None


def check_relaid(model: Any, case: OutsideModel, calls: Sequence[Any], options: Any) -> Check:
    """Eager's answers to the calls relaid, then srbench prepared on the contiguous shape 0 under
    ``options`` and called with each relaid call (see the module's docstring). A layout eager
    refuses, or ``torch.export`` itself cannot capture (srbench then fails to prepare it: round
    19's ``func_derivatives``, whose ``jvp`` export asserts on a sliced primal), is left out and
    said; not applicable (not capturable) where every layout is left out so."""
    from benchmarks.outside_models import _export_refusal
    from srbench.static import StaticModule

    answers, refused = relaid_answers(model, calls)
    if not answers:
        reason = "; ".join(refused) or "no floating argument of rank 2 or more"
        return Check(Outcome.NOT_APPLICABLE, reason[:200])
    try:
        runtime = StaticModule(model, calls[0], options, name=case.name).runtime()
    except Exception as error:  # a refusal to prepare is the check's answer, as in the others
        return Check(Outcome.ERROR, error_summary(error)[:200])
    ran = []
    for name, answer in answers.items():
        wrong = check_runtime_relaid(runtime, {name: answer}, case)
        export_refusal = None if wrong is None or wrong.outcome is Outcome.WRONG else _export_refusal(model, answer[0])
        if export_refusal is not None:  # torch's to answer, not srbench's (said short: one per layout)
            refused.append(f"export refuses {name}: {export_refusal[:80]}")
        elif wrong is not None:
            return wrong
        else:
            ran.append(name)
    if not ran:
        return Check(Outcome.NOT_CAPTURABLE, "; ".join(refused)[:200])
    return Check(Outcome.EQUIVALENT, "; ".join([f"layouts run: {', '.join(ran)}", *refused])[:200])
