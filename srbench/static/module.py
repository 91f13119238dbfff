"""The prepared, shared half of the static runtime (the per-thread half is ``runtime.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from types import CodeType
from typing import Any

import torch

from srbench.options import StaticOptions
from srbench.planners import get_planner
from srbench.static.errors import InputSignatureError
from srbench.static.out_variants import OUT_VARIANTS, OutVariantRegistry
from srbench.static.prepared import InputSpec, PreparedGraph, input_key, prepare_graph
from srbench.static.runtime import StaticRuntime
from srbench.static.stream_choice import keep_faster


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return InputSpec.of(value).describe()
    return type(value).__name__


class StaticModule:
    """A model prepared once for the static runtime: shared, read-only, safe across threads.

    Preparing captures the model with ``torch.export`` at ``example_inputs``, removes dead code,
    resolves every op (out variant, native, fallback), analyses lifetimes, plans the slab with
    ``options.planner`` and generates the code. Inputs of other shapes (or strides) are prepared
    the same way on first sight and cached by shape, so a plan is never reused for a shape it was
    not made for. Only the cache changes after construction, under a lock.

    Like PyTorch's Static Runtime (which takes frozen modules), this assumes the model's
    parameters and buffers keep their values after preparing, except where the model itself
    updates a buffer in place: values computed from constants only (a transposed weight made
    contiguous, an ``arange``) are computed once, at prepare time. Preparing a new shape runs
    ``torch.export``, which must not overlap eager calls of modules in other threads.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        example_inputs: tuple,
        options: StaticOptions = StaticOptions(),
        *,
        name: str = "model",
        out_variants: OutVariantRegistry | None = None,
    ):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"StaticModule needs a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(example_inputs, tuple) or not all(isinstance(x, torch.Tensor) for x in example_inputs):
            given = (
                ", ".join(_describe(x) for x in example_inputs)
                if isinstance(example_inputs, tuple)
                else type(example_inputs).__name__
            )
            raise TypeError(f"example_inputs must be a tuple of tensors, got ({given})")
        if not isinstance(options, StaticOptions):
            raise TypeError(f"options must be StaticOptions, got {type(options).__name__}")
        get_planner(options.planner)  # an unknown planner fails now, with the nearest names
        self.model = model
        self.options = options
        self.name = name
        self.out_variants = out_variants if out_variants is not None else OUT_VARIANTS
        self._lock = threading.Lock()
        self._prepared: dict[tuple, PreparedGraph] = {}
        self._code: dict[tuple, dict[str, CodeType]] = {}
        start = time.perf_counter()
        self.prepared = self._prepare(example_inputs)
        self.setup_seconds = time.perf_counter() - start
        self.signature: tuple[InputSpec, ...] = self.prepared.inputs

    def _prepare(self, inputs: tuple) -> PreparedGraph:
        prepared = prepare_graph(self.model, inputs, self.options, name=self.name, out_variants=self.out_variants)
        prepared = keep_faster(self, prepared, inputs)  # several streams only where measured faster
        self._code[prepared.key] = prepared.program.compiled(self.name)
        self._prepared[prepared.key] = prepared
        return prepared

    def code(self, prepared: PreparedGraph) -> dict[str, CodeType]:
        """The compiled generated functions of a prepared graph, by name."""
        return self._code[prepared.key]

    def prepared_for(self, inputs: Sequence[torch.Tensor]) -> PreparedGraph:
        """The prepared graph for inputs shaped like ``inputs``, prepared now if new."""
        key = input_key(inputs)
        with self._lock:
            found = self._prepared.get(key)
            if found is None:
                found = self._prepare(tuple(inputs))
            return found

    @property
    def shapes_prepared(self) -> int:
        return len(self._prepared)

    def expected_signature(self) -> str:
        names = self.prepared.input_names
        return "(" + ", ".join(f"{n}: {s.describe()}" for n, s in zip(names, self.signature)) + ")"

    def check_inputs(self, inputs: Sequence[Any]) -> None:
        """Raise :class:`InputSignatureError` unless ``inputs`` match the prepared signature in
        number, type, dtype and device (shapes and strides may differ: they get their own plan)."""
        given = "(" + ", ".join(_describe(x) for x in inputs) + ")"
        problem = None
        if len(inputs) != len(self.signature):
            problem = f"expected {len(self.signature)} inputs, got {len(inputs)}"
        else:
            for index, (value, spec) in enumerate(zip(inputs, self.signature)):
                name = self.prepared.input_names[index]
                if not isinstance(value, torch.Tensor):
                    problem = f"input {index} ({name}) must be a tensor, got {type(value).__name__}"
                elif value.dtype != spec.dtype:
                    problem = f"input {index} ({name}) must have dtype {spec.dtype}, got {value.dtype}"
                elif value.device != spec.device:
                    problem = f"input {index} ({name}) must be on {spec.device}, got {value.device}"
                if problem:
                    break
        if problem:
            raise InputSignatureError(
                f"model {self.name!r}: {problem}; expected signature {self.expected_signature()}, given {given}"
            )

    def runtime(self) -> StaticRuntime:
        """A new runtime for one thread."""
        return StaticRuntime(self)
