"""The prepared, shared half of the static runtime (the per-thread half is ``runtime.py``)."""

from __future__ import annotations

import contextlib
import copy
import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import CodeType

import torch

from srbench.graph import CapturedGraph
from srbench.graph.ambient_autocast import ambient_autocast, leave_autocast
from srbench.graph.subgraph import Subgraph
from srbench.inputs import Inputs, KeywordOrder
from srbench.options import StaticOptions
from srbench.planners import get_planner
from srbench.schedulers.costs import machine_measured_once
from srbench.static.errors import FailureScope, InputSignatureError, UnsupportedOpError
from srbench.static.forms import Adapters, Rebinding, rebinding
from srbench.static.out_variants import OUT_VARIANTS, OutVariantRegistry
from srbench.static.passes import FUSED_LAYER_PASSES, PASSES, Pass
from srbench.static.peak import measured_peak
from srbench.static.placement import input_without_data, weights_device
from srbench.static.prepared import PreparedGraph, capture_graph, prepare_graph
from srbench.static.recency import keep_newest
from srbench.static.rewrite_choice import keep_faster_rewrites, prefer_lean_attention
from srbench.static.runtime import StaticRuntime
from srbench.static.signature import InputSignature, positional_names, state_storages
from srbench.static.stream_choice import keep_faster


@dataclass(frozen=True)
class _Program:
    """A cached program: the prepared graph and its generated functions, compiled."""

    prepared: PreparedGraph
    code: dict[str, CodeType]


@dataclass(frozen=True)
class _Refusal:
    """A signature no program can be prepared for, whatever the call's values (see
    :meth:`StaticModule._prepare_other`): the failure, and where the call differs from the
    example's in structure, a leaf's kind or dtype, the message naming that difference (raised as
    an :class:`InputSignatureError` caused by the failure); else a new copy of the failure is
    raised at each repeat. The failure is kept as a copy (:func:`_detached`) with neither its
    traceback nor the errors it came from: a traceback holds its frames and, through each frame's
    caller, every frame of the call, with the call's tensors and the resolver's intermediates, for
    as long as the refusal is kept. A repeat's traceback starts where it is refused again; the
    first refusal had the whole one."""

    message: str | None
    cause: BaseException

    def error(self) -> BaseException:
        if self.message is None:
            return _detached(self.cause)
        return _caused(InputSignatureError(self.message), self.cause)


def _detached(error: BaseException) -> BaseException:
    """A new ``error`` (``copy.copy``: made again from its arguments), without a traceback or the
    errors it came from. Raises where its class cannot be made so (it takes other arguments than
    it keeps)."""
    return copy.copy(error)


def _caused(error: BaseException, cause: BaseException) -> BaseException:
    """``error``, raised from ``cause`` (as ``raise error from cause`` makes it)."""
    error.__cause__ = cause
    return error


class StaticModule:
    """A model prepared once for the static runtime: shared, read-only, safe across threads.

    ``example_inputs`` is one call of the model (:class:`~srbench.inputs.Inputs`: positional and
    keyword arguments, any pytrees of tensors and Python scalars, as ``torch.export`` takes them),
    or a tuple of positional arguments. Preparing captures the model with ``torch.export`` at that
    call, removes dead code, resolves every op (out variant, native, fallback), analyses
    lifetimes, plans the slab with ``options.planner`` and generates the code. Calls with other
    shapes, strides, scalar values, memory sharing, structure (an optional keyword given or not, a
    list of another length), leaf kinds (``None`` for a tensor, a float for an int) or dtypes are
    prepared the same way on first sight and cached by signature, as ``torch.compile`` compiles
    anew where a guard fails, so a plan is never reused for a call it was not made for. A tensor
    on another device than the example's is refused (:meth:`check_inputs`), and so is a call of
    another structure, leaf kind or dtype that cannot be prepared (the model does not take it),
    naming how it differs from the example, before any op of a program runs. Only the cache
    changes after construction, under a lock. It keeps the programs of at most
    ``options.max_signatures`` signatures, the example's always among them: past that, preparing a
    new one evicts the least recently used other (used: a runtime switched to it, on its slow path;
    calls of the signature a runtime ran last take no lock). Each runtime drops an evicted
    program, and gives back the memory only it needed, at its next switch of program.

    Like PyTorch's Static Runtime (which takes frozen modules), this assumes the model's
    parameters and buffers keep their values after preparing, except where the model itself
    updates a buffer in place: values computed from constants only (a transposed weight made
    contiguous, an ``arange``) are computed once, at prepare time. Preparing a new shape runs
    ``torch.export``, which must not overlap eager calls of modules in other threads. Where a
    program writes the model's parameters or buffers (a counter, a cache written then read), its
    runs on the module's runtimes take turns under :attr:`state_lock`, each call whole, as eager's
    calls under one lock: eager's calls at once race on that state, and so did the runtimes'.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        example_inputs: Inputs | tuple,
        options: StaticOptions = StaticOptions(),
        *,
        name: str = "model",
        out_variants: OutVariantRegistry | None = None,
    ):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"StaticModule needs a torch.nn.Module, got {type(model).__name__}")
        example = Inputs.coerce(example_inputs)
        if not isinstance(options, StaticOptions):
            raise TypeError(f"options must be StaticOptions, got {type(options).__name__}")
        get_planner(options.planner)  # an unknown planner fails now, with the nearest names
        bound = options.max_signatures
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 2:
            raise ValueError(f"max_signatures must be an integer of at least 2, got {bound!r}")
        self.model = model
        # the mode its programs are traced in: a call in the other one is refused (ModelModeError)
        self.training = model.training
        self.options = options
        self.name = name
        self.out_variants = out_variants if out_variants is not None else OUT_VARIANTS
        self.argument_names = tuple(positional_names(model.forward, len(example.args)))
        self.keyword_names = frozenset(example.kwargs)
        self.keyword_order = KeywordOrder.of(model)
        self.state_storages = state_storages(model)  # a call's tensors sharing memory with them: signature_of
        self._lock = threading.Lock()
        # taken by each run of a program that writes the model's parameters or buffers: that state
        # is the model's, one for every runtime of the module, so such runs take turns (re-entrant:
        # a run's slow path runs the program of the call's shape, holding it)
        self.state_lock = threading.RLock()
        self._programs: dict[tuple, _Program] = {}  # by signature key, the least recently used first
        self._refused: dict[tuple, _Refusal] = {}  # likewise, at most options.max_signatures
        self.adapters = Adapters(name)  # for calls in another form than their program's
        self.weights_device = weights_device(model, name=name)  # where a call's program runs: placement
        self.evictions = 0  # programs evicted so far: a runtime looks for them where this changed
        start = time.perf_counter()
        cache_enabled = torch.is_autocast_cache_enabled()
        example_signature = self.signature_of(example)
        problem = input_without_data(self.keyword_order.arrange(example), example_signature.paths)
        if problem is not None:
            raise InputSignatureError(f"model {name!r}: {problem}")
        self._example_key = example_signature.key
        try:
            self.prepared = self._prepare(example, example_signature)
        except BaseException as error:
            # preparing ran the model's ops, an autocast region of its own among them, with none
            # active (capture refuses an ambient one); a sub-block prepares within its parent's
            if not isinstance(model, Subgraph) and torch._C._is_any_autocast_enabled():
                leave_autocast(error, cache_enabled=cache_enabled)
            raise
        self.setup_seconds = time.perf_counter() - start
        self.signature: InputSignature = self.prepared.signature

    def signature_of(self, inputs: Inputs) -> InputSignature:
        return InputSignature.of(inputs, self.argument_names, self.keyword_order, self.state_storages)

    def _prepare(
        self, inputs: Inputs, signature: InputSignature, captured: CapturedGraph | None = None
    ) -> PreparedGraph:
        """The program for calls like ``inputs``, cached; ``captured``: the model captured at
        ``inputs`` (captured here if not given). Where choices are measured, several candidate
        programs may be prepared: all from one capture, each from a copy of it (a prepare changes
        its graph), so the capture's checks and its eager call run once."""
        if captured is None:
            captured = capture_graph(self.model, inputs, self.options, name=self.name)

        def prepared_under(options: StaticOptions, passes: Sequence[Pass] = PASSES) -> PreparedGraph:
            return prepare_graph(
                self.model,
                inputs,
                options,
                name=self.name,
                out_variants=self.out_variants,
                argument_names=self.argument_names,
                measure_peak=functools.partial(measured_peak, self, inputs=inputs) if options.measure_choices else None,
                passes=passes,
                captured=captured.copy() if self.options.measure_choices else captured,
            )

        with machine_measured_once():  # every candidate's streams planned for one measurement of it
            prepared = prepared_under(self.options)
            if self.options.measure_choices:  # rewrites, then several streams, only where measured faster
                fused_layers = functools.partial(prepared_under, self.options, FUSED_LAYER_PASSES)
                prepared = prefer_lean_attention(self, prepared, fused_layers, inputs)
                without_rewrites = replace(self.options, rewrite=False)
                prepared = keep_faster_rewrites(self, prepared, lambda: prepared_under(without_rewrites), inputs)
                prepared = keep_faster(self, prepared, inputs)
            else:
                prepared = replace(prepared, one_stream=None)
        self._programs[signature.key] = _Program(prepared, prepared.program.compiled(self.name))
        self._evict()
        return prepared

    def _evict(self) -> None:
        """Drop the least recently used programs past ``options.max_signatures``; never the
        example's, which :attr:`prepared` holds anyway (evicted, it would free nothing and be
        prepared again), nor the one just prepared (the bound is at least 2)."""
        over = len(self._programs) - self.options.max_signatures
        if over <= 0:
            return
        for key in [key for key in self._programs if key != self._example_key][:over]:
            del self._programs[key]
            self.evictions += 1

    def holds(self, prepared: PreparedGraph) -> bool:
        """Whether ``prepared`` is still the cached program of its signature (not evicted)."""
        found = self._programs.get(prepared.key)
        return found is not None and found.prepared is prepared

    def code(self, prepared: PreparedGraph) -> dict[str, CodeType]:
        """The compiled generated functions of a prepared graph, by name: compiled anew where
        it was evicted (a runtime binding it after another thread's call evicted it)."""
        found = self._programs.get(prepared.key)  # one read: the program and its code together
        if found is not None and found.prepared is prepared:
            return found.code
        return prepared.program.compiled(self.name)

    def prepared_for(self, inputs: Inputs | tuple) -> PreparedGraph:
        """The prepared graph for calls like ``inputs``, prepared now if new or evicted (after
        :meth:`check_inputs`); it becomes the most recently used. A signature refused before
        (:meth:`_prepare_other`) is refused again at once, with the same error."""
        inputs = Inputs.coerce(inputs)
        signature = self.check_inputs(inputs)
        found = self._cached(signature)
        if found is not None:
            return found
        # Preparing calls the model in eager and then puts its parameters and buffers back: a
        # state-writing run of another runtime in between would be put back too, so it waits for
        # the state lock, as such runs do (taken before the cache's lock, as a run that misses
        # holds them; another thread may have prepared the program meanwhile)
        with self.state_lock:
            found = self._cached(signature)
            if found is not None:
                return found
            with self._lock:
                return self._prepare_other(inputs, signature)

    def _cached(self, signature: InputSignature) -> PreparedGraph | None:
        """The cached program of ``signature``, made the most recently used; ``None`` if none.
        Raises the cached refusal of a signature whose capture failed."""
        with self._lock:
            found = self._programs.pop(signature.key, None)
            if found is None:
                refused = self._refused.pop(signature.key, None)
                if refused is None:
                    return None
                self._refused[signature.key] = refused  # put back last
                raise refused.error()
            self._programs[signature.key] = found  # put back last
            return found.prepared

    def _prepare_other(self, inputs: Inputs, signature: InputSignature) -> PreparedGraph:
        """The program for a call unlike every cached one. Where the call differs from the example
        in structure, a leaf's kind or dtype and cannot be prepared (the model does not take it:
        another number of arguments, a keyword it lacks; or an op does not run in that dtype), an
        :class:`InputSignatureError` names that difference beside the failure: the example's
        signature is what the user can compare the call with. Where it differs in shapes, strides,
        scalar values or sharing only, the failure is the model's own, raised as it is.

        Where the failure is a property of the signature, the refusal is cached by signature (the
        least recently used dropped past ``options.max_signatures``; programs are not counted), and
        a repeat is refused at once with the same error, nothing captured or run. So is a failure
        of the capture: it fails where torch.export, tracing with fake tensors, fails, or where its
        checks refuse the model's own state (an eager failure there is left to export), so its
        failure depends on the signature, the model and torch, not on the call's values (another
        shape a layer cannot take among them). So is an op's failure while preparing after the
        capture (whose checks run ops on the call's values) where the op's kernel fails the same
        way on other values of the signature (:mod:`srbench.static.failure_scope`: a dtype the
        weights refuse); not one that may depend on the values (an index out of range there would
        refuse the signature's valid calls), nor any other failure of the preparing, nor one under
        an autocast the caller entered (the capture refuses that, not the call) or out of memory.
        The module is a snapshot of the model as prepared (see the class docstring): a model or
        torch setting changed since is prepared anew, as a new module, which has refused nothing
        yet."""
        try:
            captured = capture_graph(self.model, inputs, self.options, name=self.name)
        except Exception as error:
            refused = self._refused_now(signature, error, FailureScope.SIGNATURE)
            if refused is error:
                raise
            raise refused from error
        try:
            return self._prepare(inputs, signature, captured)
        except Exception as error:
            refused = self._refused_now(
                signature, error, error.scope if isinstance(error, UnsupportedOpError) else FailureScope.VALUES
            )
            if refused is error:
                raise
            raise refused from error

    def _refused_now(self, signature: InputSignature, error: Exception, scope: FailureScope) -> BaseException:
        """What a call of ``signature`` whose preparing failed with ``error`` raises: ``error``
        itself where the call differs from the example in nothing but shapes, strides, scalar
        values or memory sharing (the model's own), else an :class:`InputSignatureError` naming
        how it differs (raised from ``error``). The refusal is kept where ``scope`` says the
        signature fails so."""
        difference = self.signature.difference(signature)
        message = None
        if difference is not None:
            problem = f"{difference}, and no program could be prepared for it ({type(error).__name__}: {error})"
            message = str(self._signature_error(signature, problem))
        if (
            scope is FailureScope.SIGNATURE
            and ambient_autocast() is None
            and not isinstance(error, (MemoryError, torch.OutOfMemoryError))
        ):
            with contextlib.suppress(Exception):  # it cannot be copied: not kept, prepared again at a repeat
                self._refused[signature.key] = _Refusal(message, _detached(error))
            keep_newest(self._refused, self.options.max_signatures)
        return error if message is None else InputSignatureError(message)

    @property
    def shapes_prepared(self) -> int:
        """How many input signatures have a program (shapes, strides, scalars, sharing, structure,
        dtypes): at most ``options.max_signatures``."""
        return len(self._programs)

    def expected_signature(self) -> str:
        return self.signature.describe()

    def rebinding(self, inputs: Inputs) -> Rebinding | None:
        """How ``inputs`` move between positional and keyword to the form the example passed
        them in (:func:`~srbench.static.forms.rebinding`): eager takes ``model(x, y=y)`` for
        ``model(x, y)``, and so does the runtime; ``None`` where they are in it."""
        return rebinding(self.model.forward, inputs, len(self.argument_names), self.keyword_names, self.keyword_order)

    def in_prepared_form(self, inputs: Inputs) -> Inputs:
        """``inputs`` moved to their program's form (:meth:`rebinding`)."""
        moved = self.rebinding(inputs)
        return inputs if moved is None else moved.apply(inputs)

    def check_inputs(self, inputs: Inputs | tuple) -> InputSignature:
        """The signature of ``inputs``; raise :class:`InputSignatureError` for what no program
        can serve: a tensor on another device than the example's (the runtime's memory is on one
        device), a sparse or nested tensor, a tensor without data (meta, fake:
        :meth:`InputSignature.of`). Everything else may
        differ: a call of another signature gets a program of its own."""
        inputs = Inputs.coerce(inputs)
        given = self.signature_of(inputs)
        problem = self.signature.device_difference(given, self.prepared.device, self.weights_device)
        # a FakeTensor tells a device
        problem = problem or input_without_data(self.keyword_order.arrange(inputs), given.paths)
        if problem:
            raise self._signature_error(given, problem)
        return given

    def _signature_error(self, given: InputSignature, problem: str) -> InputSignatureError:
        """The error for a call of signature ``given`` that no program serves, for ``problem``."""
        return InputSignatureError(
            f"model {self.name!r}: {problem}; expected signature {self.expected_signature()}, given {given.describe()}"
        )

    def runtime(self) -> StaticRuntime:
        """A new runtime for one thread."""
        return StaticRuntime(self)
