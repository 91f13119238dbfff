"""The outside-models sweep with srbench prepared first, on a freshly built model.

The sweep's own protocol (:func:`benchmarks.outside_models.sweep_one`) asks eager for its answers
and then prepares srbench on that same instance, so whatever a model's first call does (a cache
filled, a buffer built lazily, an attribute set, a hook registering something) is done before
srbench sees the model. A user writes ``model = Build(); StaticModule(model, inputs)``: here each
option set is prepared on an instance no one has called, and its answers are compared with a
twin built alike (same seed, so the same weights: checked) that eager calls in the protocol's
order (shape 0, shape 1, shape 0 again).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.outside_models import (
    CHECKS,
    RELAID_CHECKS,
    THREAD_CHECKS,
    Check,
    Outcome,
    OutsideModel,
    Row,
    _export_refusal,
    check_named,
    drifting_answers,
)
from srbench.formatting import error_summary


def _build(case: OutsideModel) -> Any:
    """The model built under one seed: torch's, Python's ``random``'s (hyper-connections, in
    tab-transformer-pytorch and local-attention, picks each layer's residual stream by
    ``random.randrange``: two builds under torch's seed alone differed) and numpy's global one
    (FrEIA's ``AllInOneBlock`` draws its channel permutation by ``np.random`` or scipy's
    ``special_ortho_group``)."""
    import random

    import numpy
    import torch

    from benchmarks.outside_globals import sweep_globals

    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)
    return sweep_globals().build(case.build).eval()


def _comparable(value: Any) -> Any:
    """A state-dict entry as compared between two builds: a tensor's copy (a quantized one's
    values), anything else (a dynamically quantized layer's dtype) as it is."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    return (value.dequantize() if value.is_quantized else value).detach().clone()


def _state(model: Any) -> dict[str, Any]:
    """A copy of the model's parameters and buffers, to compare two instances built alike."""
    return {name: _comparable(value) for name, value in model.state_dict(keep_vars=True).items()}


def _builds_alike(state: dict[str, Any], model: Any) -> str | None:
    """Why ``model`` is not the twin's equal (a builder not deterministic under its seed), or
    ``None``: the comparison would otherwise blame srbench for the builder's randomness."""
    import torch

    other = _state(model)
    if set(other) != set(state):
        return f"builder not deterministic: state names differ ({sorted(set(other) ^ set(state))[:3]})"
    for name, value in other.items():
        want = state[name]
        if isinstance(value, torch.Tensor) and isinstance(want, torch.Tensor):
            try:  # exactly, NaN as NaN (a model's buffer may hold one on purpose)
                torch.testing.assert_close(value, want, rtol=0, atol=0, equal_nan=True)
                same = True
            except AssertionError:
                same = False
        else:
            same = type(value) is type(want) and bool(value == want)
        if not same:
            return f"builder not deterministic under its seed: {name} differs between two builds"
    return None


def sweep_fresh(case: OutsideModel, checks: Sequence[str] = CHECKS) -> Row:
    """Check ``case`` under each of ``checks`` (names of :data:`~benchmarks.outside_models.CHECKS`),
    each prepared on its own fresh instance, against a twin's eager answers."""
    from srbench.measure.equivalence import eager_answer

    row = Row(case.name, case.description)
    try:
        twin = _build(case)
        state = _state(twin)
        calls = [case.make_inputs(0), case.make_inputs(1)]
        expected = [eager_answer(twin, call) for call in (*calls, calls[0])]
    except Exception as error:  # a model this environment cannot build, or eager cannot run, is reported
        row.checks["build"] = Check(Outcome.UNAVAILABLE, error_summary(error)[:200])
        return row
    refusal = _export_refusal(twin, calls[0])  # after eager's calls, as the sweep asks
    if refusal is not None:
        row.checks["export"] = Check(Outcome.NOT_CAPTURABLE, refusal)
        return row
    drift = drifting_answers(twin, case, calls[0])  # after the export's check: the twin is eager's alone
    for name in checks:
        # every call against one steady answer (the relaid check asks eager on its own instance)
        if drift is not None and (name in THREAD_CHECKS or name in RELAID_CHECKS):
            row.checks[name] = Check(Outcome.NOT_APPLICABLE, drift)
            continue
        model = _build(case)
        unlike = _builds_alike(state, model)
        if unlike is not None:
            row.checks[name] = Check(Outcome.ERROR, unlike)
            continue
        check, _ = check_named(model, case, calls, expected, name)
        if check.outcome is Outcome.ERROR:
            check = _unless_fresh_export_refuses(case, calls[0], check)
        row.checks[name] = check
    return row


def _unless_fresh_export_refuses(case: OutsideModel, call: Any, check: Check) -> Check:
    """srbench's refusal of a fresh instance, or export's own where export cannot capture a fresh
    instance either (a first call traced that reads a value, as gpytorch's Cholesky): that one is
    not srbench's to answer."""
    refusal = _export_refusal(_build(case), call)
    return check if refusal is None else Check(Outcome.NOT_CAPTURABLE, f"fresh: {refusal}")
