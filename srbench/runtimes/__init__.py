"""Runtimes: plugins that prepare a model once and then run it, compared side by side by suites.

A runtime is a class registered under the entry-point group ``srbench.runtimes``. Constructing it,
``Runtime(model, example_inputs, options)``, is the prepare step (scripting, capturing, planning
memory), where ``example_inputs`` is one call of the model (:class:`srbench.inputs.Inputs`:
positional and keyword arguments, any pytrees of tensors and Python scalars); calling it,
``runtime(*args, **kwargs)``, runs the prepared model as the model itself is called and returns
what the model returns. A runtime that cannot take keyword arguments flattens them if it can. A
runtime that cannot handle a model, a call or an option raises :class:`UnsupportedRuntime` with
the reason, which suites report as an expected failure rather than an error.

Class attributes tell the suite loader which axes of a sweep matter to a runtime, so that a
sweep over planners does not multiply the eager cases (see ``srbench.suites.expand``):
``honours`` names the :class:`~srbench.options.StaticOptions` fields (the options of memory
planning, :data:`~srbench.options.STATIC_OPTION_NAMES`) that the runtime reads, and ``devices``
the devices it can run on. ``slow`` marks runtimes whose prepare step is slow (compilation).
``eager_mode`` (an :class:`EagerMode`; optional, ``NO_GRAD`` where absent) says how eager is called
for the answers the runtime's are compared with: as the runtime calls the model.
Optional methods feed the measurements (``srbench.measure``): ``planned_memory() ->
PlannedMemory | None`` for runtimes that plan memory, and ``op_profile(inputs, iterations) ->
{node kind: ms per call}`` (``inputs`` an :class:`~srbench.inputs.Inputs`) for runtimes that time
their own nodes.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Protocol

from srbench.inputs import Inputs
from srbench.options import STATIC_OPTION_NAMES, RuntimeOptions
from srbench.registry import Registry

__all__ = [
    "RUNTIMES",
    "STATIC_OPTION_NAMES",
    "EagerMode",
    "PlannedMemory",
    "Runtime",
    "RuntimeOptions",
    "UnsupportedRuntime",
    "eager_mode_of",
    "get_runtime",
    "intra_op_threads",
    "quiet_jit",
    "runtime_names",
]

RUNTIMES = Registry("srbench.runtimes", "runtime")


class UnsupportedRuntime(RuntimeError):
    """This runtime cannot run this model or option combination; the message says why."""


class RuntimeUnavailable(UnsupportedRuntime):
    """This runtime cannot work on this machine at all (an optional package is not installed);
    suites skip its cases with the reason instead of counting them as expected failures."""


@dataclass(frozen=True)
class PlannedMemory:
    """A runtime's own memory plan: slab bytes, the lower bound for the tensors it planned, and
    the lower bound for every intermediate of the graph (the yardstick for observed peaks)."""

    planned_bytes: int
    lower_bound: int
    graph_lower_bound: int


class EagerMode(Enum):
    """How eager is called for the answers a runtime's are compared with (``requires_grad`` is
    compared too: :func:`srbench.measure.equivalence.grad_difference`). The two differ only on a
    model that turns grad mode on within (``enable_grad``): under ``no_grad`` that block's results
    carry history, as srbench's static runtime keeps it; under ``inference_mode``, the mode the
    peer runtimes and the eager plugin run in (their measured mode), it records nothing."""

    NO_GRAD = "no_grad"
    INFERENCE_MODE = "inference_mode"

    def context(self) -> Any:
        """The context manager that calls eager this way."""
        import torch

        return torch.no_grad() if self is EagerMode.NO_GRAD else torch.inference_mode()


class Runtime(Protocol):
    honours: ClassVar[tuple[str, ...]]
    devices: ClassVar[tuple[str, ...]]
    slow: ClassVar[bool]

    def __init__(self, model: Any, example_inputs: Inputs, options: RuntimeOptions) -> None: ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def runtime_names() -> list[str]:
    return RUNTIMES.names()


def eager_mode_of(runtime: type[Runtime]) -> EagerMode:
    """The runtime's :class:`EagerMode`; ``NO_GRAD`` for a plugin that does not say."""
    mode = getattr(runtime, "eager_mode", EagerMode.NO_GRAD)
    assert isinstance(mode, EagerMode), f"{runtime.__name__}.eager_mode must be an EagerMode, got {mode!r}"
    return mode


def get_runtime(name: str) -> type[Runtime]:
    """The runtime class registered as ``name``; unknown names fail with the nearest ones."""
    return RUNTIMES.load(name)


@contextmanager
def intra_op_threads(threads: int) -> Iterator[None]:
    """Run the body with ``threads`` intra-op threads, restoring the previous count after."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextmanager
def quiet_jit() -> Iterator[None]:
    """torch.jit warns that it is deprecated on every call (srbench uses it on purpose, as a
    baseline, and torch.compile uses it internally), and tracing warns where a traced graph may
    not fit other shapes (the equivalence protocol runs a second shape and fails such a case)."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*torch\.jit")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        yield
