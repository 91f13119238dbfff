"""Estimate a model (or a zoo case) on a device without allocating a real tensor.

The model is built and captured on fake tensors (:mod:`srbench.estimate.fake`) and its graph
estimated (:mod:`srbench.estimate.graph`). A model ``torch.export`` cannot capture even there (a
Python branch on a tensor's value) is traced as far as it goes (:mod:`srbench.estimate.partial`):
the estimate covers that part, marked incomplete, and names the node where tracing stopped and why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from srbench.estimate.graph import GraphEstimate, estimate_graph
from srbench.inputs import Inputs
from srbench.memory.records import DEFAULT_ALIGNMENT

if TYPE_CHECKING:
    from srbench.zoo import ModelCase


def estimate_model(
    build: Callable[[], torch.nn.Module],
    make_inputs: Callable[[], Inputs | tuple],
    *,
    name: str = "model",
    device: str = "cpu",
    planners: Sequence[str] = (),
    planner_options: Mapping[str, Mapping[str, Any]] | None = None,
    alignment: int = DEFAULT_ALIGNMENT,
    decompose: bool = False,
) -> GraphEstimate:
    """Estimate the model ``build()`` returns on the inputs ``make_inputs()`` returns; both are
    called under a fake mode, so they allocate nothing real (see :mod:`srbench.estimate.fake`)."""
    from srbench.estimate.fake import capture_on
    from srbench.estimate.partial import trace_partially
    from srbench.graph import CaptureError

    target = torch.device(device)
    try:
        fake = capture_on(build, make_inputs, target, name=name, decompose=decompose)
    except CaptureError as error:
        partial = trace_partially(build, make_inputs, target, capture_error=error.reason)
        return estimate_graph(
            partial.graph,
            name=name,
            user_inputs=partial.user_inputs,
            device=str(target),
            planners=planners,
            planner_options=planner_options,
            alignment=alignment,
            problems=partial.problems,
            complete=False,
            notes=(f"torch.export cannot capture it: {error.reason}",),
        )
    notes = []
    if fake.built_for_real:
        notes.append("its initialiser reads tensor values: built on real CPU tensors, then converted to fakes")
    if fake.retarget_reason:
        notes.append(
            f"captured on {fake.traced_on.type} and propagated to {target.type}, since capturing on "
            f"fake {target.type} tensors failed here: {fake.retarget_reason}"
        )
    signature = fake.captured.exported.graph_signature
    return estimate_graph(
        fake.captured.graph,
        name=name,
        user_inputs=set(signature.user_inputs),
        device=str(target),
        traced_on=str(fake.traced_on),
        planners=planners,
        planner_options=planner_options,
        alignment=alignment,
        notes=notes,
    )


def estimate_case(case: ModelCase, *, batch: int | None = None, **options: Any) -> GraphEstimate:
    """Estimate a zoo case at its default input shape (``batch`` overrides the batch size)."""
    return estimate_model(case.build, lambda: case.example_inputs(0, batch=batch), name=case.name, **options)


_EAGER_PEAKS: dict[tuple[str, int | None, str, int], int | None] = {}


def estimated_eager_peak(case: ModelCase, *, batch: int | None = None, device: str = "cpu") -> int | None:
    """Eager's peak for a zoo case (bytes of the device allocator's blocks, as the observed peak
    counts them: on the CPU the bytes requested), estimated once per model, batch, device and
    intra-op thread count (some kernels' workspaces depend on it) in this process: the suites'
    cases of one model share it. None, with a warning saying why, when
    the model cannot be estimated completely (``srbench estimate`` shows where it stops)."""
    key = (case.name, batch, device, torch.get_num_threads())
    if key not in _EAGER_PEAKS:
        try:
            estimate = estimate_case(case, batch=batch, device=device)
        except Exception as error:  # the estimate is a figure beside a measured case: never its failure
            warnings.warn(f"cannot estimate {case.name!r}: {type(error).__name__}: {error}", stacklevel=2)
            estimate = None
        complete = estimate is not None and estimate.complete
        _EAGER_PEAKS[key] = estimate.eager.peak_allocated if estimate is not None and complete else None
    return _EAGER_PEAKS[key]
