"""A per-thread runtime: its own slab, its own managed tensors, the prepared code bound to them.

Binding a :class:`~srbench.static.prepared.PreparedGraph` makes, once, every managed tensor as a
typed strided view into one ``uint8`` slab (and into the output arena when outputs are managed),
then the static views of those, then the generated functions with all of it as globals. A run is
then one call of generated code. One slab serves every input shape the runtime has seen: its
storage grows to the largest plan, and views made for smaller plans stay valid because resizing
a storage keeps its identity. With ``cleanup_activations`` the storage is resized to 0 after each
run and back before the next, a single call each way.

A program the module evicts (past ``max_signatures``) is dropped at the runtime's next switch of
program (its slow path): its bound state goes, and where the slab (or the output arena) is larger
than the programs left need, the runtime starts on fresh storage and binds those again on their
next use, so the evicted program's bytes are given back.
"""

from __future__ import annotations

import dataclasses
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any

import torch

from srbench.graph.ambient_autocast import leave_autocast
from srbench.inputs import Inputs
from srbench.static.calls import invoke
from srbench.static.codegen import CodeWriter, Entry, Hook, RuntimeHooks
from srbench.static.errors import ConcurrentUseError, ModelModeError, ambient_autocast_error
from srbench.static.forms import FORMS_KEPT, Rebinding
from srbench.static.page_release import release_pages
from srbench.static.prepared import ManagedTensor, PreparedGraph
from srbench.static.recency import keep_newest
from srbench.static.slab_schedule import Release, SlabLayout
from srbench.static.stream_runner import ThreadStreams, bind_streams

if TYPE_CHECKING:
    from srbench.static.module import StaticModule
    from srbench.static.profile import OpProfile


@dataclass
class BoundProgram:
    """A prepared graph bound to one runtime's memory."""

    prepared: PreparedGraph
    forward: Callable[..., Any]
    forward_unchecked: Callable[..., Any]
    forward_profiled: Callable[..., Any]
    forward_observed: Callable[..., Any]
    hooks: RuntimeHooks
    managed: Mapping[str, torch.Tensor]
    # the rebindings of calls in other forms than the program's that this runtime took (see
    # srbench.static.forms), the least recently used first, at most FORMS_KEPT; and the fast path
    # made of their adapters (``None`` until made, and where they changed)
    forms: dict[Rebinding, None] = dataclasses.field(default_factory=dict)
    chain: Callable[..., Any] | None = None

    def fast_path(
        self, rebinding: Rebinding | None, adapter: Callable[[Rebinding, Callable[..., Any]], Callable[..., Any]]
    ) -> Callable[..., Any]:
        """The runtime's fast path for this program: the adapter of each form seen, the most
        recently used first, each passing a call it does not move to the next, the last to
        :attr:`forward`; ``rebinding`` (the form of the call on the slow path, if not the
        program's) made the most recently used. ``adapter(form, passes_to)`` makes one link.
        Every form seen stays fast, and a switch between two of them takes no slow path; a call in
        the program's own form checks each form first (about 0.2 us each)."""
        if rebinding is not None and next(reversed(self.forms), None) != rebinding:
            self.forms.pop(rebinding, None)
            self.forms[rebinding] = None  # put back last
            keep_newest(self.forms, FORMS_KEPT)
            self.chain = None
        if self.chain is None:
            chain = self.forward
            for form in self.forms:  # the least recently used first: the most recently used outermost
                chain = adapter(form, chain)
            self.chain = chain
        return self.chain


_any_autocast = torch._C._is_any_autocast_enabled


def _grow(storage: torch.UntypedStorage, nbytes: int) -> None:
    if storage.nbytes() < nbytes:
        storage.resize_(nbytes)


def _views(
    tensors: Sequence[ManagedTensor], storage: torch.UntypedStorage, device: torch.device
) -> dict[str, torch.Tensor]:
    return {tensor.storage: tensor.view_of(storage, device) for tensor in tensors}


def _slab_views(
    tensors: Sequence[ManagedTensor], layout: SlabLayout, storages: Sequence[torch.UntypedStorage], device: torch.device
) -> dict[str, torch.Tensor]:
    """Views of the slab's tensors, each in the storage of the segment its plan offset falls in."""
    views = {}
    for tensor in tensors:
        segment, offset = layout.locate(tensor.offset)
        views[tensor.storage] = dataclasses.replace(tensor, offset=offset).view_of(storages[segment], device)
    return views


def _layout(prepared: PreparedGraph) -> SlabLayout:
    """The segments of ``prepared``'s slab (one, where its slab is not given back in parts)."""
    program = prepared.program
    return program.slab if program.slab is not None else SlabLayout.whole(prepared.slab_bytes)


def _same(a: Inputs, b: Inputs) -> bool:
    """Whether two calls pass the very same objects the same way."""
    return (
        len(a.args) == len(b.args)
        and all(x is y for x, y in zip(a.args, b.args))
        and a.kwargs.keys() == b.kwargs.keys()
        and all(a.kwargs[key] is b.kwargs[key] for key in a.kwargs)
    )


def _close(bound: BoundProgram) -> None:
    """Let a dropped program's stream threads end (they would wait for runs until the runtime
    is collected)."""
    runner = bound.hooks.streams.get(Hook.STREAMS)
    if isinstance(runner, ThreadStreams):
        runner.close()


def _taking_turns(
    function: Callable[..., Any], lock: threading.RLock, token: list[bool] | None, busy: Callable[[], Exception]
) -> Callable[..., Any]:
    """``function`` run holding ``lock``, the module's state lock: a program that writes the
    model's parameters or buffers writes what every runtime of the module reads, so two runtimes'
    runs at once read each other's writes (a buffer written then read: the other call's values).
    A call while this runtime's own call runs is still refused, not queued behind it: where
    ``function`` takes the runtime's call ``token`` (``None`` for one that runs holding it), a call
    that finds none raises ``busy()`` before waiting for the lock."""

    def run(*args: Any, **kwargs: Any) -> Any:
        if token is not None and not token:
            raise busy()
        with lock:
            return function(*args, **kwargs)

    return run


class StaticRuntime:
    """Runs a :class:`~srbench.static.StaticModule` from one thread; create one per thread with
    ``module.runtime()``. ``run(*args, **kwargs)`` (or calling the runtime) takes what the model
    takes and returns what the model returns.

    A runtime serves one call at a time: a call while another is running (from another thread,
    or re-entered) raises :class:`~srbench.static.errors.ConcurrentUseError` instead of sharing
    the slab. The check takes the runtime's call token (one atomic ``list.pop``) and gives it back
    after the run.
    """

    def __init__(self, module: StaticModule, device: torch.device | None = None):
        """``device``: where the slab lives (the module's device; given while the module is still
        preparing its first shape)."""
        self.module = module
        self._model, self._training = module.model, module.training
        device = device if device is not None else module.prepared.device
        with torch.inference_mode(False):  # see _bind
            self._slab = torch.empty(0, dtype=torch.uint8, device=device)
            self._arena = torch.empty(0, dtype=torch.uint8, device=device)
        self._segments: list[torch.Tensor] = []  # the slab's other segments (see slab_schedule)
        self._bound: dict[tuple, BoundProgram] = {}
        self._evictions_seen = 0  # the module's evictions when this runtime last dropped its own
        self._forward: Callable[..., Any] | None = None
        self._moved: list[tuple[Rebinding, tuple, dict[str, Any]] | None] = [None]  # see forms.Rebinding.source
        self._token = [True]  # present while no call runs: see codegen.RuntimeHooks
        self._launcher: ThreadPoolExecutor | None = None

    @property
    def slab_bytes(self) -> int:
        """Bytes the slab holds right now, all segments (0 between runs with ``cleanup_activations``)."""
        return sum(tensor.untyped_storage().nbytes() for tensor in (self._slab, *self._segments))

    @property
    def arena_bytes(self) -> int:
        return self._arena.untyped_storage().nbytes()

    @property
    def slab(self) -> torch.Tensor:
        return self._slab

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """One call of the model, refused under an autocast the caller entered (see
        :mod:`srbench.graph.ambient_autocast`) and while the model is in another mode than it was
        prepared in (:class:`~srbench.static.errors.ModelModeError`: a model prepared before its
        ``.eval()`` ran dropout and moved batch norm's statistics, silently; only the root
        module's flag is read, about 40 ns); an error leaves no autocast region of the model's
        open."""
        if _any_autocast():
            raise ambient_autocast_error()
        if self._model.training is not self._training:
            raise ModelModeError(self.module.name, self._training)
        try:  # run_within's body, inline: a frame less on the per-call path
            forward = self._forward
            if forward is None:
                return self._miss(args, kwargs)
            return forward(*args, **kwargs)
        except BaseException as error:
            if _any_autocast():
                leave_autocast(error)
            raise

    def run_within(self, *args: Any, **kwargs: Any) -> Any:
        """One call, as a program containing this one calls it (a control-flow op's sub-block,
        perhaps within an autocast region the outer program entered)."""
        forward = self._forward
        if forward is None:
            return self._miss(args, kwargs)
        return forward(*args, **kwargs)

    __call__ = run

    def run_async(self, *args: Any, **kwargs: Any) -> Future[Any]:
        """Start a run on a thread of this runtime and return at once, as PyTorch Static Runtime's
        ``runAsync`` does: the future holds what ``run`` returns, or its error. Calls queue up and
        run one at a time, in order, since the runtime's slab serves one run at a time; with
        ``manage_output_tensors`` a result stays valid until the next run. The run uses the
        caller's intra-op thread count (a new thread's OpenMP count is the machine's, not
        ``torch.set_num_threads``'s). A call under an autocast the caller entered is refused here,
        as ``run`` refuses it: the runtime's thread does not have it, and would run it uncast."""
        if _any_autocast():
            raise ambient_autocast_error()
        if self._launcher is None:
            self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="srbench-run")
        return self._launcher.submit(self._run_with_threads, torch.get_num_threads(), args, kwargs)

    def _run_with_threads(self, threads: int, args: tuple, kwargs: dict[str, Any]) -> Any:
        torch.set_num_threads(threads)
        return self.run(*args, **kwargs)

    def _miss(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        """The slow path: inputs unlike the last program's. Check them, find or prepare the
        program for their shapes, make it the fast path, run it; all holding the runtime's call
        token (binding grows the slab, which a running call must not see). A call in another form
        than its program's (``model(x, mask)`` for ``model(x, attention_mask=mask)``) is moved to
        it, and the fast path is then the program's adapter for that form (see
        :mod:`srbench.static.forms`), which moves the next such call and calls the program, and
        passes calls of the program's own form to it as they are: the two forms mixed take no
        slow path. An adapter's call whose program's guard fails (another shape) reaches this
        moved, and is taken as its caller wrote it (:meth:`_as_written`). Each form a program was
        called in keeps its adapter (:meth:`BoundProgram.fast_path`, bounded): a switch between
        two forms, neither the program's, takes no slow path either."""
        try:
            self._token.pop()
        except IndexError:
            raise self._busy() from None
        try:
            inputs = self._as_written(Inputs(args, kwargs))
            rebinding = self.module.rebinding(inputs)
            if rebinding is not None:
                inputs = rebinding.apply(inputs)
            bound = self.bind(inputs)
            self._forward = bound.fast_path(
                rebinding, lambda form, after: self.module.adapters.bind(form, bound.forward, self._moved, after)
            )
            return bound.forward_unchecked(*inputs.args, **inputs.kwargs)
        finally:
            self._token.append(True)

    def _as_written(self, inputs: Inputs) -> Inputs:
        """``inputs`` as their caller wrote them where an adapter moved them (the call it runs,
        moved to exactly these objects), so that the new program's fast path keeps an adapter for
        that form; else ``inputs``."""
        moved = self._moved[0]
        if moved is None:
            return inputs
        rebinding, args, kwargs = moved
        written = Inputs(args, kwargs)
        return written if _same(rebinding.apply(written), inputs) else inputs

    def _busy(self) -> ConcurrentUseError:
        return ConcurrentUseError(self.module.name)

    def bind(self, inputs: Inputs | tuple) -> BoundProgram:
        """The program for calls like ``inputs``, bound to this runtime (made on first use, and
        again where the module evicted and prepared it anew)."""
        prepared = self.module.prepared_for(inputs)  # the most recently used now
        self._drop_evicted()
        bound = self._bound.get(prepared.key)
        if bound is None or bound.prepared is not prepared:
            bound = self._bound[prepared.key] = self._bind(prepared)
        return bound

    def _drop_evicted(self) -> None:
        """Drop the programs the module evicted; where the storage is then larger than the
        programs left need, start on fresh storage (see the module docstring)."""
        evictions = self.module.evictions
        if evictions == self._evictions_seen:
            return
        self._evictions_seen = evictions
        evicted = [key for key, bound in self._bound.items() if not self.module.holds(bound.prepared)]
        if not evicted:
            return
        for key in evicted:
            _close(self._bound.pop(key))
        self._forward = None  # perhaps an evicted program's: the next call finds its own
        if self._holds_more_than_needed():
            for bound in self._bound.values():
                _close(bound)
            self._bound = {}
            device = self._slab.device
            with torch.inference_mode(False):  # see _bind
                self._slab = torch.empty(0, dtype=torch.uint8, device=device)
                self._arena = torch.empty(0, dtype=torch.uint8, device=device)
            self._segments = []

    def _holds_more_than_needed(self) -> bool:
        """Whether a storage (the slab's segments, the output arena) holds more bytes than the
        largest bound program needs of it."""
        held = [tensor.untyped_storage().nbytes() for tensor in (self._slab, *self._segments)]
        needed = [0] * len(held)
        arena = 0
        for bound in self._bound.values():
            for index, segment in enumerate(_layout(bound.prepared).segments):
                needed[index] = max(needed[index], segment.size)
            arena = max(arena, bound.prepared.arena_bytes)
        return any(h > n for h, n in zip(held, needed)) or self.arena_bytes > arena

    def _bind(self, prepared: PreparedGraph, code: Mapping[str, CodeType] | None = None) -> BoundProgram:
        """``prepared`` bound to this runtime's memory; ``code``: its compiled functions, when not
        the module's (a program tried at prepare time). Made outside ``torch.inference_mode``
        whatever the caller's mode: the first call binds, and tensors made under it are inference
        tensors, which no later call outside it may write (the slab's views are written at every
        call)."""
        with torch.inference_mode(False):
            return self._bind_now(prepared, code)

    def _bind_now(self, prepared: PreparedGraph, code: Mapping[str, CodeType] | None) -> BoundProgram:
        program = prepared.program
        layout = _layout(prepared)
        while len(self._segments) < len(layout.segments) - 1:
            self._segments.append(torch.empty(0, dtype=torch.uint8, device=prepared.device))
        storages = [tensor.untyped_storage() for tensor in (self._slab, *self._segments)]
        for storage, segment in zip(storages, layout.segments):
            _grow(storage, segment.size)
        slab, arena = storages[0], self._arena.untyped_storage()
        _grow(arena, prepared.arena_bytes)
        managed = _slab_views(prepared.managed, layout, storages, prepared.device)
        managed.update(_views(prepared.output_arena, arena, prepared.device))
        namespace: dict[str, Any] = dict(program.shared)
        namespace.update({name: callable_.bind() for name, callable_ in program.per_runtime.items()})
        namespace.update({name: managed[storage] for name, storage in program.managed_globals.items()})
        hooks = RuntimeHooks(
            miss=self._miss,
            slab=slab,
            times=[],
            token=self._token,
            busy=self._busy,
            slab_segments=tuple(storages[1:]),
            arena=arena,
        )
        namespace.update(hooks.as_globals())
        holders: dict[str, list[str]] = {}
        for node, name in program.static_nodes.items():
            holders.setdefault(name, []).append(node)
        env = {node: namespace[name] for node, name in program.static_nodes.items() if name in namespace}
        with torch.no_grad():
            for view in program.static_views:
                namespace[view.name] = invoke(view.call, env)
                env.update({node: namespace[view.name] for node in holders[view.name]})
        if self.module.options.cleanup_activations:
            for storage, segment in zip(storages, layout.segments):
                if segment.release is Release.LAZY:
                    release_pages(storage)  # kept between runs, its pages the OS's until the first run
                else:
                    storage.resize_(0)
        code = code if code is not None else self.module.code(prepared)
        if program.streams is not None:
            streams = bind_streams(program.streams, namespace, code, prepared.device, self)
            hooks = dataclasses.replace(hooks, streams=streams)
            namespace.update(streams)

        writes_state = bool(prepared.written_state or prepared.rebound_state)

        def function(entry: Entry) -> Callable[..., Any]:
            generated = types.FunctionType(code[entry.value], namespace, entry.value)
            if not writes_state:
                return generated
            token = self._token if CodeWriter.claims(entry.value) else None
            return _taking_turns(generated, self.module.state_lock, token, self._busy)

        return BoundProgram(
            prepared,
            forward=function(Entry.FORWARD),
            forward_unchecked=function(Entry.UNCHECKED),
            forward_profiled=function(Entry.PROFILED),
            forward_observed=function(Entry.OBSERVED),
            hooks=hooks,
            managed=managed,
        )

    def profile(self, inputs: Inputs | tuple, iterations: int = 100, warmup: int = 10) -> OpProfile:
        """Time every node, as PyTorch's ``benchmark_individual_ops`` does (see
        :func:`srbench.static.profile.profile_runtime`)."""
        from srbench.static.profile import profile_runtime

        return profile_runtime(self.module, inputs, iterations=iterations, warmup=warmup)
