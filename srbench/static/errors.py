"""Errors of the static runtime: bad inputs, concurrent use and gradients at run time, unrunnable
ops at prepare time; and the warning for a user's out variant that prepare found wrong."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import torch

from srbench.graph.ambient_autocast import ambient_autocast, ambient_autocast_reason


class InputSignatureError(TypeError):
    """Inputs no program can serve: a tensor on another device than the example's, one the static
    runtime does not take (a sparse tensor), or a call of another structure, leaf kind or dtype
    than the example's that cannot be prepared (the model does not take it; the message names
    the first difference and the failure, which is the error's ``__cause__``).

    Raised before any op of a program runs; the message shows the expected (the example's) and
    the given signature.
    """


class FailureScope(enum.Enum):
    """What a failure at prepare time depends on (:mod:`srbench.static.failure_scope`)."""

    SIGNATURE = "every call of the signature fails so: the refusal is kept"
    VALUES = "it may depend on the call's values: a later call of the signature is prepared again"


class UnsupportedOpError(RuntimeError):
    """An op that has no out variant and cannot run as fallback either, found at prepare time;
    ``scope``: whether every call of the signature would fail so (the op's own kernel refuses
    arguments of that signature whatever their values)."""

    def __init__(self, op: str, node: str, reason: str, scope: FailureScope = FailureScope.VALUES):
        super().__init__(f"op {op} (node {node!r}) can run neither with an out variant nor as fallback: {reason}")
        self.op = op
        self.node = node
        self.reason = reason
        self.scope = scope

    def __reduce__(self) -> tuple[type, tuple[str, str, str, FailureScope]]:
        """Made again from its parts, not its message (see ``CaptureError.__reduce__``)."""
        return type(self), (self.op, self.node, self.reason, self.scope)

    def torch_lowering_fails_too(self, failure: str) -> UnsupportedOpError:
        """This refusal, saying that the program torch's lowering made fails by itself on the same
        inputs (``failure``, its error: see :mod:`srbench.graph.lowered_program`), so the user
        knows the fault is the lowering's and that preparing without ``decompose`` avoids it."""
        error = "with the same error" if failure in self.reason else f"({failure})"
        return UnsupportedOpError(
            self.op,
            self.node,
            f"{self.reason}; torch's own lowered program (ExportedProgram.run_decompositions(), run by torch "
            f"as .module()) fails on these inputs too, {error}: torch's lowering to core ATen "
            "(decompose=True) breaks the model; it can be prepared without decompose",
            self.scope,
        )


class OutVariantWarning(UserWarning):
    """A registered out variant failed its prepare-time check (it raised, wrote elsewhere or gave
    other values than the op); the message names it and the reason, and the op runs another way."""


class ConcurrentUseError(RuntimeError):
    """A :class:`~srbench.static.StaticRuntime` called while it is already running, from another
    thread (or re-entered from its own). A runtime owns one slab and its managed tensors, so two
    calls at once would write each other's memory: the second call is refused instead."""

    def __init__(self, model: str):
        super().__init__(
            f"the StaticRuntime of model {model!r} is already running a call (in another thread, or "
            "re-entered): a runtime serves one call at a time; give each thread its own runtime "
            "(StaticModule.runtime() or RuntimePool)"
        )


class InferenceOnlyError(RuntimeError):
    """Inputs that require grad while grad mode is on: the static runtime is for inference only
    (it runs without autograd, so its outputs would silently carry no gradient)."""


def inference_only_error(names: Sequence[str], inputs: Sequence[object]) -> InferenceOnlyError:
    """The error for ``inputs`` (named ``names``) of which one requires grad."""
    which = [name for name, value in zip(names, inputs) if getattr(value, "requires_grad", False)]
    return InferenceOnlyError(
        f"input {', '.join(which)} requires grad while grad mode is on, but srbench's static runtime is for "
        "inference only (its outputs never track gradients); call it under torch.no_grad() or "
        "torch.inference_mode(), or pass the input detached"
    )


class ModelModeError(RuntimeError):
    """A call while the model is in another mode (``model.train()``/``model.eval()``) than it was
    prepared in: the program is the graph ``torch.export`` traced in that mode (dropout applied
    or not, batch norm reading its running statistics or updating them), so it would answer as
    the other mode silently."""

    def __init__(self, model: str, prepared_training: bool):
        prepared, now = ("training", "eval") if prepared_training else ("eval", "training")
        super().__init__(
            f"model {model!r} was prepared in {prepared} mode and is now in {now} mode: its program runs the "
            f"{prepared}-mode graph (dropout, batch norm's statistics); switch the model back "
            f"(model.{'train' if prepared_training else 'eval'}()), or prepare a new StaticModule in {now} mode"
        )


class ManagedOutputInputError(RuntimeError):
    """A call given an output of the runtime's own earlier run where outputs are managed
    (``manage_output_tensors``): the run writes its outputs into the arena that output lies in
    while it reads it, so it would answer from half-overwritten values (``x = runtime(x)``)."""


def managed_output_input_error(names: Sequence[str], inputs: Sequence[object], arena: int) -> ManagedOutputInputError:
    """The error for ``inputs`` (named ``names``) of which one lies in the output arena, whose
    storage starts at ``arena``."""
    which = [
        name
        for name, value in zip(names, inputs)
        if isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() == arena
    ]
    return ManagedOutputInputError(
        f"input {', '.join(which)} is an output of this runtime's earlier run, in the memory its outputs are "
        "managed in (manage_output_tensors=True), which this run writes its outputs into while it reads the "
        "input; pass a copy (.clone()), or prepare without manage_output_tensors"
    )


class AmbientAutocastError(RuntimeError):
    """A call under a ``torch.autocast`` the caller entered: the prepared program cannot follow it
    (see :mod:`srbench.graph.ambient_autocast`), so it refuses rather than answer in other dtypes."""


def ambient_autocast_error() -> AmbientAutocastError:
    """The error for a call made under the autocast active now."""
    return AmbientAutocastError(ambient_autocast_reason(ambient_autocast() or "torch.autocast"))
