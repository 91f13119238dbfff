"""Straight-line Python for a prepared graph: one line per op that does work, nothing else.

Per-node dispatch (an interpreter loop looking up what to do) costs more than many small ops
take, so, as ``torch.fx`` does, the prepared graph is written out as the source of one function
and compiled once. Every callable, constant and managed tensor is a global of that function,
bound when a runtime is created: the generated code does no lookups beyond those, calls the C
bindings (``torch.addmm(..., out=_m_addmm)``) directly, and deletes unmanaged intermediates after
their last use so memory is returned as eagerly as in eager mode. Views of constant or managed
tensors are not in the code at all: they are made once per runtime (*static views*).
"""

from __future__ import annotations

import abc
import enum
import math
import operator
import time
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch.profiler import record_function
from torch.utils import _pytree as pytree

from srbench.graph.ambient_autocast import GENERATED_CODE
from srbench.graph.nodes import enables_grad, enters_autocast, getitem_parts
from srbench.observe.record import node_label
from srbench.static.calls import Call, Const, OffsetFrom
from srbench.static.choose import NodePlan, RunAs
from srbench.static.errors import inference_only_error, managed_output_input_error
from srbench.static.hosting import RunBuffer
from srbench.static.page_release import release_pages
from srbench.static.serving import serving_library
from srbench.static.signature import InputSignature, TensorLeaf, sharing_of, state_sharing_of
from srbench.static.slab_schedule import Release, SlabLayout
from srbench.static.value_keys import equality_suffices, value_key, zero_signs
from srbench.static.view_tracking import AD_INPLACE_OR_VIEW, ViewTracking

if TYPE_CHECKING:
    from srbench.static.mid_op_release import ReleaseWithin
    from srbench.static.stream_code import StreamProgram

INDENT = "        "


class Hook:
    """Global names of the generated code that each runtime binds to its own objects (the fields
    of :class:`RuntimeHooks`, one name each): the whole contract between the code written here,
    the runtime that binds it (``runtime.py``) and the profiler that reads it (``profile.py``)."""

    MISS = "_miss"
    SLAB = "_slab"  # the slab's first segment; the others are _slab_1, _slab_2, ... (see ``slab``)
    TIMES = "_times"
    CLOCK = "_clock"
    CLAIM = "_claim"
    UNCLAIM = "_unclaim"
    BUSY = "_busy"
    # multistream programs (srbench.static.stream_code writes them, stream_runner binds them)
    STREAMS = "_streams"  # the runtime's streams: start/join/failure (threads), begin/end (CUDA)
    EVENT = "_ev_"  # prefix: one event per op that ops of other streams wait for
    SIDE_STREAM = "_cs_"  # prefix: the CUDA streams besides the caller's (_cs_1, _cs_2, ...)
    SET_STREAM = "_set_stream"
    CURRENT_STREAM = "_current_stream"
    RECORD_STREAM = "_record_stream"
    RELEASE_PAGES = "_release_pages"  # gives a storage's pages back to the OS lazily (page_release)
    ARENA = "_arena"  # the storage of the output arena (manage_output_tensors)

    @staticmethod
    def slab(segment: int) -> str:
        """The global holding the storage of the slab's ``segment``."""
        return Hook.SLAB if segment == 0 else f"{Hook.SLAB}_{segment}"


class Entry(enum.Enum):
    """The functions generated from one body, by name (see :class:`Program`)."""

    FORWARD = "forward"
    UNCHECKED = "forward_unchecked"
    PROFILED = "forward_profiled"
    OBSERVED = "forward_observed"


@dataclass(frozen=True)
class RuntimeHooks:
    """What one runtime binds into the generated code besides constants and managed tensors.

    ``miss`` takes the positional and keyword arguments of a call unlike the prepared signature
    (the slow path);
    ``slab`` is the storage of the slab (of its first segment; ``slab_segments`` are the others'),
    resized to its size during a run and to 0 after it with ``cleanup_activations``; ``times`` is
    where ``forward_profiled`` adds the seconds of each timing slot (slot 0: slab allocation, then
    one per :class:`TimedNode`, last: slab release);
    ``clock`` is the timer it reads. ``token`` is the runtime's one call token, a list that holds
    it while no call runs: ``forward`` and ``forward_profiled`` take it (``pop``, one atomic C
    call, about 4x cheaper than taking a ``threading.Lock`` without waiting) and give it back
    after the run (``forward_unchecked`` runs under the ``miss`` hook, which holds it); a call
    that finds no token raises ``busy()``. ``streams`` are the globals of a multistream program
    (its stream runner, events and streams: the ``Hook.STREAMS`` ... names).
    """

    miss: Callable[[tuple[Any, ...], dict[str, Any]], Any]
    slab: torch.UntypedStorage
    times: list[float]
    clock: Callable[[], float] = time.perf_counter
    token: list[bool] = field(default_factory=lambda: [True])
    busy: Callable[[], Exception] = RuntimeError
    streams: Mapping[str, Any] = field(default_factory=dict)
    slab_segments: tuple[torch.UntypedStorage, ...] = ()
    release_pages: Callable[[torch.UntypedStorage], None] = release_pages
    arena: torch.UntypedStorage | None = None

    def as_globals(self) -> dict[str, Any]:
        return {
            Hook.MISS: self.miss,
            Hook.RELEASE_PAGES: self.release_pages,
            **{Hook.slab(index): storage for index, storage in enumerate((self.slab, *self.slab_segments))},
            Hook.TIMES: self.times,
            Hook.CLOCK: self.clock,
            Hook.CLAIM: self.token.pop,
            Hook.UNCLAIM: self.token.append,
            Hook.BUSY: self.busy,
            Hook.ARENA: self.arena,
            **self.streams,
        }


class PerRuntime(abc.ABC):
    """A callable of the generated code that each runtime needs an instance of its own (a
    control-flow op, whose instance holds the runtimes of its sub-blocks): the code writer names
    it in :attr:`Program.per_runtime` instead of the shared globals, and each runtime binds
    ``bind()`` under that name."""

    @abc.abstractmethod
    def bind(self) -> Callable[..., Any]:
        """The instance one runtime calls."""


@dataclass(frozen=True)
class TimedNode:
    """One timing slot of the profiling variant: a node that runs code, its kind, how it runs and
    the call it makes (its label: ``torch.addmm``, ``aten.mm.out``, ``registered aten::tanh``)."""

    node: str
    kind: str
    how: RunAs
    call: str


@dataclass(frozen=True)
class StaticView:
    """A view made once per runtime: ``call`` evaluated on the static values, stored as ``name``."""

    node: str
    name: str
    call: Call


@dataclass(frozen=True)
class ReturnedInput:
    """A graph output that eager returns as one of its inputs, or a buffer or parameter it writes
    (``view`` is ``None``), or as a view of it: ``view`` is the output's shape, strides and storage
    offset relative to the placeholder's."""

    input: str
    view: tuple[tuple[int, ...], tuple[int, ...], int] | None = None


@dataclass(frozen=True)
class Program:
    """Generated code and what it needs bound. ``shared`` globals are the same for every runtime
    (callables, constants, parameters); ``managed_globals`` names managed tensors (global name ->
    storage id), ``static_views`` the views each runtime makes once and ``per_runtime`` the
    callables each runtime binds an instance of its own of (:class:`PerRuntime`). ``static_nodes`` maps
    every node whose value is fixed per runtime to the global that holds it.

    Three functions (:class:`Entry`) are generated from one body: ``forward`` checks its inputs
    against the prepared signature and hands anything else to the runtime's ``miss`` hook;
    ``forward_unchecked`` is the same without the check; ``forward_profiled`` adds a timer after
    every line; ``forward_observed`` runs each node's lines inside a ``record_function`` range named
    by :func:`srbench.observe.record.node_label`, so the observer attributes every allocation to
    its node. Each refuses inputs that require grad while grad mode is on (inference only), and
    ``forward`` and ``forward_profiled`` refuse to run while another call holds the runtime's token.
    ``streams`` describes a program whose ops run on several streams (see
    :mod:`srbench.static.stream_code`): its ``forward`` functions run them so, and its profiled
    and observed variants run them one after the other in the schedule's issue order.
    """

    source: str
    shared: Mapping[str, Any]
    managed_globals: Mapping[str, str]
    static_views: tuple[StaticView, ...]
    static_nodes: Mapping[str, str]
    timed: tuple[TimedNode, ...]
    streams: StreamProgram | None = None  # how the ops run on several streams, if they do
    slab: SlabLayout | None = None  # the segments a run takes and gives back (None: one storage)
    per_runtime: Mapping[str, PerRuntime] = field(default_factory=dict)

    def function_source(self, entry: Entry = Entry.FORWARD) -> str:
        """The source of one generated function (``srbench profile --code`` prints ``forward``'s:
        what a call runs beyond the kernels)."""
        start = self.source.index(f"def {entry.value}(")
        end = self.source.find("\ndef ", start)
        return self.source[start:] if end < 0 else self.source[start : end + 1]

    def compiled(self, name: str) -> dict[str, CodeType]:
        """The generated functions' code objects, by function name (``name`` labels tracebacks)."""
        namespace: dict[str, Any] = {}
        exec(compile(self.source, f"{GENERATED_CODE}{name}>", "exec"), namespace)
        return {key: value.__code__ for key, value in namespace.items() if callable(value)}


class _Names:
    """Unique, readable global names."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, stem: str) -> str:
        stem = "".join(c if c.isalnum() or c == "_" else "_" for c in stem).lstrip("_") or "g"
        name, n = f"_{stem}", 1
        while name in self.used:
            n += 1
            name = f"_{stem}_{n}"
        self.used.add(name)
        return name


class CodeWriter:
    """Writes the forward function of one prepared graph; see the module docstring."""

    def __init__(
        self,
        graph: torch.fx.Graph,
        plans: Sequence[NodePlan],
        user_inputs: Sequence[str],
        constants: Mapping[str, Any],
        out_spec: pytree.TreeSpec,
        mutations: Mapping[int, str],
        signature: InputSignature,
        *,
        returned_inputs: Mapping[int, ReturnedInput] | None = None,
        disjoint_inputs: bool = False,
        guarded_state: Mapping[int, int] | None = None,
        arena_outputs: bool = False,
        run_buffers: Sequence[RunBuffer] = (),
        rebound: Mapping[str, tuple[dict[str, Any], str]] | None = None,
    ):
        """``run_buffers``: outputs the run allocates before the intermediates they host, and
        those intermediates (:mod:`srbench.static.hosting`): locals made at every run, each right
        before the first line that writes it. ``rebound``: placeholders of buffers forward assigns
        anew, each with its module's table and its name there: read from the table at every run,
        and the new value put there (see :meth:`epilogue`)."""
        self.graph = graph
        self.plans = {plan.node.name: plan for plan in plans}
        self.order = list(plans)
        self.user_inputs = list(user_inputs)
        self.constants = constants
        self.out_spec = out_spec
        self.mutations = mutations  # flat output index -> placeholder it must be copied into
        self.signature = signature
        self.cleanup_slab_bytes: int | None = None  # the slab's size, taken whole at the start (streams)
        self.slab_layout: SlabLayout | None = None  # set by assemble: the segments cleanup takes and gives back
        # served ops that give a slab segment back part-way (srbench.static.mid_op_release); set
        # before node_bodies
        self.releases_within: Mapping[str, ReleaseWithin] = {}
        self.returned_inputs = dict(returned_inputs or {})
        # a program made for inputs that share memory (torch.export folds the same tensor given
        # twice into one placeholder), or one that is exact only for inputs that do not, checks
        # on every call that the inputs share memory exactly as they did at prepare time
        self.disjoint_inputs = disjoint_inputs and len(signature.tensor_leaves) > 1
        # a program given the model's parameters and buffers by storage (one that writes a
        # placeholder, or one made for inputs sharing memory with them) checks on every call that
        # the inputs share memory with those exactly as at prepare time: the graph names an
        # argument and the buffer it is apart (a functionalized graph writes a buffer's new value
        # back at the end; streams order two placeholders' accesses only where they shared memory
        # at prepare time; torch.export traces a write of a buffer passed as an argument too as
        # the argument's)
        self.guarded_state = guarded_state if signature.tensor_leaves else None
        # outputs written into the runtime's arena (manage_output_tensors): a call given one of
        # them back is refused, since the run writes there while it reads it
        self.arena_outputs = arena_outputs
        self.names = _Names()
        self.shared: dict[str, Any] = {}
        self.per_runtime: dict[str, PerRuntime] = {}
        self._constant_names: dict[int, str] = {}
        self.expr: dict[str, str] = {}
        self.managed_globals: dict[str, str] = {}
        self.static_nodes: dict[str, str] = {}
        self.static_views: list[StaticView] = []
        self.locals: set[str] = set()
        self.run_buffers = {buffer.storage: buffer for buffer in run_buffers}
        self.rebound = dict(rebound or {})
        self.made: set[str] = set()  # run buffers whose line is written
        # below the autograd keys (see head), unless the model turns grad mode on within (an
        # enable_grad block records history under grad mode off, as eager's does) or enters an
        # autocast region by a call: the guard's exit restores the whole set of excluded dispatch
        # keys, so after an error within the region it switched autocast's key off and the
        # runtime no longer saw the region it must close (srbench.graph.ambient_autocast)
        module = graph.owning_module
        self.below_autograd = module is not None and not enables_grad(module) and not enters_autocast(module)

    # -- values ---------------------------------------------------------------------------------

    def constant(self, value: Any, stem: str = "c") -> str:
        name = self._constant_names.get(id(value))
        if name is None:
            name = self._constant_names[id(value)] = self.names.fresh(stem)
            # kept alive here, so the id stays unique
            (self.per_runtime if isinstance(value, PerRuntime) else self.shared)[name] = value
        return name

    def render(self, value: Any) -> str:
        if isinstance(value, torch.fx.Node):
            return self.expr[value.name]
        if isinstance(value, Const):
            return self.constant(value.value, "k")
        if isinstance(value, OffsetFrom):
            return f"{self.expr[value.node.name]}.storage_offset() + {value.delta}"
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else self.constant(value)
        if isinstance(value, list):
            return "[" + ", ".join(self.render(item) for item in value) + "]"
        if isinstance(value, tuple):
            return "(" + "".join(self.render(item) + ", " for item in value) + ")"
        return self.constant(value)

    def managed_name(self, storage: str | None) -> str:
        if storage is None:  # the chooser manages a node only when every result has a storage
            raise ValueError("a managed result without a storage")
        if storage in self.run_buffers:
            return self.run_buffer_name(storage)
        for name, owner in self.managed_globals.items():
            if owner == storage:
                return name
        name = self.names.fresh(f"m_{storage}")
        self.managed_globals[name] = storage
        return name

    def run_buffer_name(self, storage: str) -> str:
        name = "h_" + "".join(c if c.isalnum() or c == "_" else "_" for c in storage)
        self.locals.add(name)
        return name

    def make_run_buffers(self, storages: Sequence[str | None]) -> list[str]:
        """The lines making the run buffers among ``storages`` not made yet (a hosted tensor's
        host first): a host allocated as eager allocates the output, a hosted tensor the host
        tensor itself where it has the host's geometry (no call), else a tensor of its own set to
        the host's storage (not an autograd view, as the slab's tensors are not: an in-place
        ``detach_`` refuses views; three calls, four where the dtypes differ)."""
        lines: list[str] = []
        for storage in storages:
            buffer = self.run_buffers.get(storage) if storage is not None else None
            if buffer is None or storage in self.made:
                continue
            self.made.add(buffer.storage)
            name = self.run_buffer_name(buffer.storage)
            device = self.constant(buffer.device, "device")
            dtype = self.constant(buffer.dtype, "dtype")
            if buffer.host is None:
                empty = self.constant(torch.empty_strided, "empty_strided")
                lines.append(f"{name} = {empty}({buffer.shape!r}, {buffer.stride!r}, dtype={dtype}, device={device})")
                continue
            lines += self.make_run_buffers([buffer.host])
            host = self.run_buffers[buffer.host]
            start = buffer.offset // buffer.dtype.itemsize + buffer.storage_offset
            host_name = self.run_buffer_name(host.storage)
            if (buffer.dtype, buffer.shape, buffer.stride, start) == (host.dtype, host.shape, host.stride, 0):
                lines.append(f"{name} = {host_name}")  # the host's own geometry: the host tensor itself
            else:  # set_ to the host's storage, not to the host: set_(tensor) refuses a non-contiguous one
                empty = (
                    f"{host_name}.new()"
                    if buffer.dtype == host.dtype
                    else f"{self.constant(torch.empty, 'empty')}(0, dtype={dtype}, device={device})"
                )
                geometry = f"{start}, {buffer.shape!r}, {buffer.stride!r}"
                lines.append(f"{name} = {empty}.set_({host_name}.untyped_storage(), {geometry})")
        return lines

    def allocated_by(self, plan: NodePlan) -> list[str] | None:
        """The lines of an out-variant node that writes a run buffer first, where the op itself
        can allocate it: its one result is a host not made yet (or a tensor hosted at the start
        of one, with the host's geometry), and its allocating call (:attr:`NodePlan.allocating`)
        gives that geometry. The op's call without ``out=`` then makes the host: one call where
        ``torch.empty_strided`` and the out variant were two (about 1 µs of the MLP's 85)."""
        if plan.allocating is None or len(plan.result_storages) != 1:
            return None
        buffer = self.run_buffers.get(plan.result_storages[0] or "")
        if buffer is None or buffer.storage in self.made:
            return None
        host = buffer if buffer.host is None else self.run_buffers[buffer.host]
        meta = plan.node.meta.get("val")
        geometry = (host.dtype, host.shape, host.stride, host.storage_offset)
        if (
            host.storage in self.made
            or not isinstance(meta, torch.Tensor)
            or geometry != (meta.dtype, tuple(meta.shape), tuple(meta.stride()), 0)
            or (
                buffer is not host
                and (buffer.dtype, buffer.shape, buffer.stride, buffer.offset, buffer.storage_offset)
                != (*geometry[:3], 0, 0)
            )
        ):
            return None
        self.made.update((host.storage, buffer.storage))
        host_name, name = self.run_buffer_name(host.storage), self.run_buffer_name(buffer.storage)
        self.expr[plan.node.name] = name
        lines = [f"{host_name} = {self.call_text(plan.allocating)}"]
        return lines if name == host_name else [*lines, f"{name} = {host_name}"]

    # -- lines ----------------------------------------------------------------------------------

    def call_text(self, call: Call, outs: Sequence[str] = ()) -> str:
        fn = self.constant(call.fn, call.label.replace(".", "_"))
        parts = [self.render(arg) for arg in call.args]
        parts += [f"{key}={self.render(value)}" for key, value in call.kwargs.items()]
        if call.out == "out":
            parts.append(f"out={outs[0]}" if len(outs) == 1 else "out=(" + ", ".join(outs) + ")")
        elif call.out is not None:
            parts += [f"{key}={name}" for key, name in zip(call.out, outs)]
        return f"{fn}({', '.join(parts)})"

    def fresh_buffers(self, plan: NodePlan) -> tuple[list[str], str]:
        """``out_fresh``: results nobody manages get new tensors of the planned geometry."""
        meta = plan.node.meta["val"]
        results = list(meta) if isinstance(meta, (list, tuple)) else [meta]
        names, lines = [], []
        empty = self.constant(torch.empty_strided, "empty_strided")
        for index, fake in enumerate(results):
            local = f"v_{plan.node.name}_{index}"
            names.append(local)
            device = self.constant(fake.device, "device")
            dtype = self.constant(fake.dtype, "dtype")
            lines.append(f"{local} = {empty}({tuple(fake.shape)!r}, {fake.stride()!r}, dtype={dtype}, device={device})")
        return names, "; ".join(lines)

    def node_lines(self, plan: NodePlan) -> list[str]:
        node = plan.node
        name = node.name
        if plan.how is RunAs.SKIP:
            return []
        if plan.how is RunAs.CONSTANT:
            self.expr[name] = self.static_nodes[name] = self.constant(plan.constant, f"f_{name}")
            return []
        if plan.static:
            self.expr[name] = self.static_nodes[name]
            return []
        if plan.how is RunAs.OUT:
            allocated = self.allocated_by(plan)
            if allocated is not None:
                return allocated
            made = self.make_run_buffers(plan.result_storages)
            outs = [self.managed_name(storage) for storage in plan.result_storages]
            if len(outs) == 1:
                self.expr[name] = outs[0]
                if plan.result_storages[0] not in self.run_buffers:
                    self.static_nodes[name] = outs[0]
            return [*made, self.call_text(plan.runs, outs)]
        if plan.how is RunAs.SERVED:
            return self.served_lines(plan)
        if plan.how is RunAs.OUT_FRESH:
            outs, allocate = self.fresh_buffers(plan)
            self.locals.update(outs)
            local = f"v_{name}"
            self.locals.add(local)
            self.expr[name] = local
            packed = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"
            return [allocate, self.call_text(plan.runs, outs), f"{local} = {packed}"]
        if node.target is operator.getitem:
            parent, index = getitem_parts(node)
            if self.plans[parent.name].how is RunAs.OUT:
                storage = self.plans[parent.name].result_storages[index]
                self.expr[name] = self.managed_name(storage)
                self.static_nodes.setdefault(name, self.expr[name])
                return []
            local = f"v_{name}"
            self.locals.add(local)
            self.expr[name] = local
            return [f"{local} = {self.expr[parent.name]}[{index}]"]
        text = self.call_text(plan.runs)
        if plan.inplace_of is not None:
            self.expr[name] = self.expr[plan.inplace_of]
            if plan.inplace_of in self.static_nodes:
                self.static_nodes[name] = self.static_nodes[plan.inplace_of]
            return [text]
        local = f"v_{name}"
        self.locals.add(local)
        self.expr[name] = local
        return [f"{local} = {text}"]

    def served_lines(self, plan: NodePlan) -> list[str]:
        """A fallback whose results the slab serves (:mod:`srbench.static.serving`): the thread
        armed with the planned address of each served result right before the op, disarmed right
        after it (an armed allocation left for a later op could land on a live slab tensor),
        also when it raises. Two calls of about 0.1 µs each."""
        library = serving_library()
        if library is None:
            raise ValueError(f"node {plan.node.name!r} is served but the allocator hook is missing")
        arm, disarm = self.constant(library.arm, "arm"), self.constant(library.disarm, "disarm")
        within = self.releases_within.get(plan.node.name)
        handle = plan.serves.sequence(*((within.allocation, within.released) if within else ()))
        sequence = self.constant(handle, f"serve_{plan.node.name}")
        addresses = [f"{self.managed_name(region)}.data_ptr()" for region, _ in plan.served_regions]
        if within is not None:  # the storage the hook resets (the code gives it back after the op too)
            addresses.append(f"{Hook.slab(within.segment)}._cdata")
        local = f"v_{plan.node.name}"
        self.locals.add(local)
        self.expr[plan.node.name] = local
        call = self.call_text(plan.runs)
        return [
            f"{arm}({sequence}, {', '.join(addresses)})",
            "try:",
            f"    {local} = {call}",
            "finally:",
            f"    {disarm}()",
        ]

    # -- static values --------------------------------------------------------------------------

    def bind_inputs_and_constants(self) -> None:
        for node in self.graph.nodes:
            if node.op == "placeholder" and node.name in self.user_inputs:
                self.expr[node.name] = f"in_{self.user_inputs.index(node.name)}"
            elif node.name in self.rebound:
                self.expr[node.name] = self.rebound_entry(node.name)
            elif node.op in ("placeholder", "get_attr"):
                self.expr[node.name] = self.constant(self.constants[node.name], f"p_{node.name}")
                self.static_nodes[node.name] = self.expr[node.name]

    def plan_static_views(self) -> None:
        for plan in self.order:
            if plan.static:
                global_name = self.names.fresh(f"s_{plan.node.name}")
                self.static_nodes[plan.node.name] = global_name
                self.static_views.append(StaticView(plan.node.name, global_name, plan.runs))

    # -- the function ---------------------------------------------------------------------------

    def output_expr(self, spec: pytree.TreeSpec, flat: list[str]) -> str:
        if spec.is_leaf():
            return flat.pop(0)
        children = [self.output_expr(child, flat) for child in spec.children()]
        as_tuple = "(" + "".join(child + ", " for child in children) + ")"
        if spec.type is tuple:
            return as_tuple
        if spec.type is list:
            return "[" + ", ".join(children) + "]"
        if spec.type is dict:
            return "{" + ", ".join(f"{self.render(key)}: {child}" for key, child in zip(spec.context, children)) + "}"
        if spec.type is torch.Size:  # pytree's unflatten gives a plain tuple; eager returned a Size
            return f"{self.constant(torch.Size, 'Size')}({as_tuple})"
        # any other registered node (a namedtuple, a transformers ModelOutput, None) is built from
        # its children as pytree builds it: the children here are built values, not leaves
        build = self.constant(pytree.SUPPORTED_NODES[spec.type].unflatten_fn, "unflatten")
        return f"{build}([{', '.join(children)}], {self.constant(spec.context, 'out_context')})"

    def node_bodies(self) -> list[tuple[str, list[str]]]:
        """The lines of every node that runs code at each run, in graph order, by node name.

        Binds the inputs, constants and static views first; call once per writer."""
        self.bind_inputs_and_constants()
        self.plan_static_views()
        bodies = []
        for plan in self.order:
            lines = self.node_lines(plan)
            if lines:
                bodies.append((plan.node.name, lines))
        return bodies

    def epilogue(self) -> tuple[str, list[str], list[str]]:
        """What a run returns (one expression), the lines writing back the inputs and buffers a
        functionalized graph mutates (it returns their new values), and every output's expression.
        A buffer forward assigns anew (``rebound``) is not written into: its new value becomes the
        table's entry (copied where it lives in the slab or arena), and an output that is that
        value is the entry, as eager returns the buffer's new tensor."""
        output = next(node for node in self.graph.nodes if node.op == "output")
        flat = [self.render(value) for value in output.args[0]]
        user = [
            self._returned_input(self.returned_inputs[index]) if index in self.returned_inputs else expr
            for index, expr in enumerate(flat)
            if index not in self.mutations
        ]
        write_back, rebinds = [], {}
        for index, target in sorted(self.mutations.items()):
            if target not in self.rebound:
                write_back.append(f"{self.expr[target]}.copy_({flat[index]})")
                continue
            new = output.args[0][index]
            fresh = isinstance(new, torch.fx.Node) and self.fresh_at_each_run(new)
            write_back.append(f"{self.expr[target]} = {flat[index]}{'' if fresh else '.clone()'}")
            rebinds[flat[index]] = self.expr[target]
        # eager returns the buffer's new tensor itself: read back from the table, after the write
        user = [rebinds.get(expr, expr) for expr in user]
        returned = self.output_expr(self.out_spec, list(user))
        return returned, write_back, flat

    def rebound_entry(self, placeholder: str) -> str:
        """The expression of a buffer forward assigns anew: its entry in its module's table."""
        table, key = self.rebound[placeholder]
        return f"{self.constant(table, 'buffers')}[{key!r}]"

    def fresh_at_each_run(self, node: torch.fx.Node) -> bool:
        """Whether ``node``'s value is a tensor the run makes for itself, which may outlive it as
        the new tensor of a buffer: not in the slab or the output arena, no constant, no view of
        anything (else the buffer gets a copy)."""
        plan = self.plans.get(node.name)
        if plan is None or plan.static or plan.inplace_of is not None:
            return False
        if plan.how is RunAs.OUT_FRESH:
            return True
        if plan.how is RunAs.OUT:
            return all(storage in self.run_buffers for storage in plan.result_storages)
        target = node.target
        return (
            plan.how is RunAs.FALLBACK
            and isinstance(target, torch._ops.OpOverload)
            and all(result.alias_info is None for result in target._schema.returns)
        )

    def assemble(self, bodies: list[tuple[str, list[str]]], cleanup: SlabLayout | None) -> Program:
        """The program running ``bodies`` (from :meth:`node_bodies`) in their order; ``cleanup``:
        the slab's segments, each taken and given back during the run (``None``: the slab is kept
        between runs)."""
        self.slab_layout = cleanup
        body: list[tuple[str | None, list[str]]] = list(bodies)
        returned, write_back, flat = self.epilogue()
        if write_back:
            body.append((None, write_back))
        body = self.with_deletes(body, set(flat))
        timed = self.timed_nodes(body)
        self.bind_guards()
        source = "\n".join(
            self._function(
                body,
                returned,
                entry.value,
                guard=entry is Entry.FORWARD,
                profile=entry is Entry.PROFILED,
                observe=entry is Entry.OBSERVED,
            )
            for entry in Entry
        )
        return self.make_program(source, timed)

    def timed_nodes(self, body: list[tuple[str | None, list[str]]]) -> tuple[TimedNode, ...]:
        return tuple(
            TimedNode(name, plan.kind, plan.how, plan.runs.label)
            for name, _ in body
            if name is not None and (plan := self.plans[name])
        )

    def bind_guards(self) -> None:
        """The shared globals of the input guard, the grad-mode switch and the inference check."""
        for i, leaf in enumerate(self.signature.leaves):
            if isinstance(leaf, TensorLeaf):
                self.shared.update(
                    {f"_g{i}_shape": leaf.shape, f"_g{i}_stride": leaf.stride, f"_g{i}_dtype": leaf.dtype}
                )
                self.shared[f"_g{i}_device"] = leaf.device
                self.shared[f"_g{i}_cls"] = leaf.cls
        self.shared.setdefault("_is_grad_enabled", torch.is_grad_enabled)
        self.shared.setdefault("_set_grad_enabled", torch._C._set_grad_enabled)
        self.shared.setdefault("_below_autograd", torch._C._AutoDispatchBelowAutograd)
        self.shared.setdefault("_tls_is_excluded", torch._C._dispatch_tls_is_dispatch_key_excluded)
        self.shared.setdefault("_tls_set_excluded", torch._C._dispatch_tls_set_dispatch_key_excluded)
        self.shared.setdefault("_ad_inplace_or_view", AD_INPLACE_OR_VIEW)
        self.shared.setdefault("_inference_only", inference_only_error)
        self.shared.setdefault("_managed_output_input", managed_output_input_error)
        self.shared.setdefault("_input_names", self.signature.paths)
        self.shared.setdefault("_sharing_of", sharing_of)
        self.shared.setdefault("_zero_signs", zero_signs)
        self.shared.setdefault("_value_key", value_key)
        self.shared.setdefault("_g_sharing", self.signature.sharing)
        self.shared.setdefault("_state_sharing_of", state_sharing_of)
        self.shared.setdefault("_get_default_dtype", torch.get_default_dtype)
        self.shared.setdefault("_g_state_sharing", self.signature.state_sharing)
        self.shared.setdefault("_g_state", self.guarded_state)
        self.shared.setdefault("_record_function", record_function)

    def make_program(self, source: str, timed: tuple[TimedNode, ...], streams: StreamProgram | None = None) -> Program:
        return Program(
            source=source,
            shared=dict(self.shared),
            managed_globals=dict(self.managed_globals),
            static_views=tuple(self.static_views),
            static_nodes=dict(self.static_nodes),
            timed=timed,
            streams=streams,
            slab=self.slab_layout,
            per_runtime=dict(self.per_runtime),
        )

    def with_deletes(
        self, body: list[tuple[str | None, list[str]]], keep: set[str]
    ) -> list[tuple[str | None, list[str]]]:
        """Append ``del`` of each unmanaged local after the last line that reads it."""
        last: dict[str, int] = {}
        for index, (_, lines) in enumerate(body):
            for line in lines:
                for token in identifiers(line):
                    if token in self.locals:
                        last[token] = index
        result = []
        for index, (name, lines) in enumerate(body):
            dead = sorted(local for local, at in last.items() if at == index and local not in keep)
            result.append((name, lines + ([f"del {', '.join(dead)}"] if dead else [])))
        return result

    def _returned_input(self, returned: ReturnedInput) -> str:
        """The expression of an output eager returns as (a view of) an input."""
        base = self.expr[returned.input]
        if returned.view is None:
            return base
        shape, stride, offset = returned.view
        return f"{base}.as_strided({shape!r}, {stride!r}, {base}.storage_offset() + {offset})"

    def _device_mismatch(self, i: int, device: torch.device) -> str:
        """The cheapest exact device test: ``is_cpu``/``is_cuda`` are attributes, ``.device``
        builds an object."""
        if device.type == "cpu":
            return f"not in_{i}.is_cpu"
        if device.type == "cuda":
            return f"not in_{i}.is_cuda or in_{i}.get_device() != {device.index or 0}"
        return f"in_{i}.device != _g{i}_device"

    def _dict_keys_differ(self, temp: str, keys: list[Any]) -> str:
        """The check that the dict ``temp`` has ``keys`` in their order and of their types: the
        lookups alone passed a dict of the same keys in another order (``torch.cat(list(d.values()))``
        then joined them in the prepared order, not the call's) and ``True`` for a key ``1``
        (``torch.full((1,), k)`` gave int64 where eager gives bool): a program is traced through
        the forward's iteration over the keys, and their values are baked into it."""
        if equality_suffices(keys):  # str keys, the common case: a list comparison
            return f"list({temp}) != {self.constant(keys, 'in_keys')}"
        return f"_value_key(list({temp})) != {self.constant(value_key(keys), 'in_keys_key')}"

    @staticmethod
    def claims(name: str) -> bool:
        """Whether a generated function takes the runtime's call token (``forward_unchecked`` runs
        under the miss hook, which holds it)."""
        return name != Entry.UNCHECKED.value

    @property
    def leaves(self) -> str:
        """The call's leaves as one tuple expression, ``(in_0, in_1, )``."""
        return "(" + "".join(f"in_{i}, " for i in range(len(self.signature.leaves))) + ")"

    def unpack(self, guard: bool) -> list[str]:
        """Lines binding ``in_0, in_1, ...`` (one per leaf of the signature, in flattening order)
        from ``args`` and ``kwargs``. With ``guard``, a call unlike the signature goes to the
        miss hook: every container's type and length (a dict's keys in order; the keyword
        arguments' through the lookups, and the order of those the model sees), every
        scalar's type and value, every tensor's shape, strides, dtype and device, and, for a
        program that needs it, that the tensors share memory as they did at prepare time.
        Tuples, lists, dicts and named tuples are read directly; other registered containers
        (dataclasses, ...) through their registered flatten, one level at a time (the whole
        ``pytree.tree_flatten`` and a spec comparison took about 5 us each)."""
        lines: list[str] = []
        checks: list[str] = []
        leaf = iter(range(len(self.signature.leaves)))
        temps = iter(range(1_000_000))

        def bind(spec: pytree.TreeSpec, expr: str) -> None:
            if spec.is_leaf():
                lines.append(f"in_{next(leaf)} = {expr}")
                return
            temp = f"_a{next(temps)}"
            if spec.type in (tuple, list, dict):
                lines.append(f"{temp} = {expr}")
                checks.append(f"type({temp}) is not {spec.type.__name__} or len({temp}) != {spec.num_children}")
                if spec.type is dict:
                    checks.append(self._dict_keys_differ(temp, list(spec.context)))
                keys = spec.context if spec.type is dict else range(spec.num_children)
                for key, child in zip(keys, spec.children()):
                    bind(child, f"{temp}[{self.render(key)}]")
                return
            if spec.type is namedtuple:  # every named tuple's node type: its class is the context
                lines.append(f"{temp} = {expr}")
                named = self.constant(spec.context, "type")
                checks.append(f"type({temp}) is not {named} or len({temp}) != {spec.num_children}")
                for index, child in enumerate(spec.children()):
                    bind(child, f"{temp}[{index}]")
                return
            # one level of pytree.tree_flatten, as the spec's own comparison checks it: the node's
            # type (exact: tree_flatten looks it up by type), its registered flatten applied to it
            # only where that type matches, then the context and the count of children
            node_type = self.constant(spec.type, "type")
            flatten = self.constant(pytree.SUPPORTED_NODES[spec.type].flatten_fn, "flatten")
            lines.append(f"{temp}_node = {expr}")
            lines.append(
                f"{temp}, {temp}_context = {flatten}({temp}_node) if type({temp}_node) is {node_type} else ((), None)"
            )
            checks.append(f"type({temp}_node) is not {node_type} or len({temp}) != {spec.num_children}")
            checks.append(f"{temp}_context != {self.constant(spec.context, 'in_context')}")
            if not equality_suffices(spec.context):  # then by its value key: a constant's zeros, types
                key = self.constant(value_key(spec.context), "in_context_key")
                checks.append(f"_value_key({temp}_context) != {key}")
            for index, child in enumerate(spec.children()):
                bind(child, f"{temp}[{index}]")

        args_spec, kwargs_spec = self.signature.structure.children()
        checks.append(f"len(args) != {args_spec.num_children}")
        checks.append(f"len(kwargs) != {kwargs_spec.num_children}" if kwargs_spec.num_children else "kwargs")
        for index, child in enumerate(args_spec.children()):
            bind(child, f"args[{index}]")
        for key, child in zip(kwargs_spec.context, kwargs_spec.children()):
            bind(child, f"kwargs[{key!r}]")
        if len(self.signature.ordered_keywords) > 1:  # the keywords a **kwargs takes in the call's order
            ordered = self.signature.ordered_keywords
            checks.append(
                f"[key for key in kwargs if key in {self.constant(frozenset(ordered), 'in_ordered')}] != "
                f"{self.constant(list(ordered), 'in_order')}"
            )
        if not guard:
            return ["    " + line for line in lines]
        for i, value in enumerate(self.signature.leaves):
            if isinstance(value, TensorLeaf):
                checks.append(
                    f"in_{i}.shape != _g{i}_shape or in_{i}.stride() != _g{i}_stride "
                    f"or in_{i}.dtype is not _g{i}_dtype or {self._device_mismatch(i, value.device)} "
                    f"or type(in_{i}) is not _g{i}_cls"
                )
                if value.lazy_bits:
                    if value.dtype.is_complex:
                        checks.append(f"in_{i}.is_conj() is not {value.conjugated}")
                    checks.append(f"in_{i}.is_neg() is not {value.negated}")
            elif value.value is None:
                checks.append(f"in_{i} is not None")
            else:
                checks.append(f"type(in_{i}) is not {self.constant(type(value.value), 'type')}")
                if value.is_nan:  # the one value unequal to itself: a NaN matches a NaN
                    checks.append(f"in_{i} == in_{i}")
                else:
                    checks.append(f"in_{i} != {self.render(value.value)}")
                    if signs := zero_signs(value.value):  # a zero: equal to the other zero, not the same
                        checks.append(f"_zero_signs(in_{i}) != {signs!r}")
        if self.disjoint_inputs or self.signature.shares_memory:
            checks.append(f"_sharing_of(*{self.leaves}) != _g_sharing")
        if self.guarded_state is not None:
            checks.append(f"_state_sharing_of({self.leaves}, _g_state) != _g_state_sharing")
        # torch.set_default_dtype since: forward's factory calls make other tensors (about 40 ns)
        checks.append(f"_get_default_dtype() is not {self.constant(self.signature.default_dtype, 'default_dtype')}")
        miss = f"return {Hook.MISS}(args, kwargs)"
        return [
            "    try:",
            *(INDENT + line for line in lines),
            f"{INDENT}if {' or '.join(checks)}:",
            f"{INDENT}    {miss}",
            "    except (AttributeError, IndexError, KeyError, TypeError, ValueError):",
            f"{INDENT}{miss}",
        ]

    def head(self, name: str, *, guard: bool) -> list[str]:
        """A generated function's first lines: its signature (the model's: ``*args, **kwargs``),
        the call unpacked as ``in_0, in_1, ...`` and guarded (``guard``, see :meth:`unpack`), the
        inference-only check, the check that no input lies in the runtime's output arena
        (:class:`~srbench.static.errors.ManagedOutputInputError`), the runtime's call token taken
        (see :meth:`claims`), grad mode turned off (``_grad`` keeps it; the caller's ``finally``
        restores it, :meth:`grad_restored`, and gives the token back) and the autograd dispatch
        keys left out of this thread's dispatch, as inference mode leaves them out but without
        making inference tensors: under ``no_grad`` every op still passed through its autograd
        kernel, which records nothing there. On models
        of many small composite ops (losses) that was 10-15% of a call (eager under
        ``inference_mode`` skips it); the guard costs about 0.5 µs a call. The program's results
        are the ones grad mode off gives: no history, views of parameters still their views. A
        model that turns grad mode on within (``enable_grad``: there eager's results carry
        history) or enters an autocast region by a call runs without the guard
        (:attr:`below_autograd`)."""
        head = [f"def {name}(*args, **kwargs):", *self.unpack(guard)]
        head.append("    _grad = _is_grad_enabled()")
        tensors = [f"in_{i}" for i, leaf in enumerate(self.signature.leaves) if isinstance(leaf, TensorLeaf)]
        if tensors:
            head += [
                f"    if _grad and ({' or '.join(f'{t}.requires_grad' for t in tensors)}):",
                f"        raise _inference_only(_input_names, {self.leaves})",
            ]
        if tensors and self.arena_outputs:
            starts = " or ".join(f"{t}.untyped_storage().data_ptr() == _a" for t in tensors)
            head += [
                f"    if (_a := {Hook.ARENA}.data_ptr()) and ({starts}):",
                f"        raise _managed_output_input(_input_names, {self.leaves}, _a)",
            ]
        if self.claims(name):
            head += [
                "    try:",
                f"        {Hook.CLAIM}()",
                "    except IndexError:",
                f"        raise {Hook.BUSY}() from None",
            ]
        head.append("    _set_grad_enabled(False)")
        if self.below_autograd:
            head += ["    _below = _below_autograd()", "    _below.__enter__()"]
        return head

    def grad_restored(self) -> list[str]:
        """The ``finally`` clause's first lines: what :meth:`head` turned off, back on."""
        below = [f"{INDENT}_below.__exit__(None, None, None)"] if self.below_autograd else []
        return ["    finally:", *below, f"{INDENT}_set_grad_enabled(_grad)"]

    def tracking_of(self, node: str | None) -> ViewTracking | None:
        """Whether a body entry (:meth:`node_bodies`, by node name) must run with ``ADInplaceOrView``
        or below it (:mod:`srbench.static.view_tracking`); ``None`` for an entry that dispatches
        nothing, which runs either way (a ``getitem`` of a multi-result op's tuple), whose result
        nobody can tell tracked from untracked (:meth:`read_only_below`), or a functional op that
        gains nothing either way (:attr:`ViewTracking.EITHER`). Entries of no node (the
        write-back into mutated inputs: ``copy_`` must bump their version counters) keep it."""
        plan = self.plans.get(node) if node is not None else None
        if plan is None:
            return ViewTracking.KEPT
        if plan.node.target is operator.getitem or plan.tracking is ViewTracking.EITHER or self.read_only_below(plan):
            return None
        return plan.tracking

    def read_only_below(self, plan: NodePlan) -> bool:
        """Whether ``plan`` is a view (or a reshape that copies) that no output is and that only
        nodes below ``ADInplaceOrView`` read: its ``_base`` and version counter are then read by
        nobody, so it runs either way, and a run of skipped nodes needs no switch around it
        (Wide & Deep's ``as_strided`` of the input before each ``embedding_bag``: one switch
        instead of four)."""
        node, target = plan.node, plan.node.target
        if plan.how is not RunAs.NATIVE or plan.inplace_of is not None or not isinstance(target, torch._ops.OpOverload):
            return False
        schema = target._schema
        if schema.is_mutable or not schema.returns or any(r.alias_info is None for r in schema.returns):
            return False
        readers = [self.plans.get(user.name) for user in node.users]
        return bool(readers) and all(
            reader is not None and reader.tracking is ViewTracking.SKIPPED for reader in readers
        )

    def tracking_switch(self, tracking: ViewTracking) -> str:
        """The line switching this thread's dispatch to ``tracking``: below ``ADInplaceOrView``, or
        back to what the caller had (``_views_excluded``, read by :meth:`_function`'s first lines:
        under the caller's inference mode it stays excluded)."""
        state = "True" if tracking is ViewTracking.SKIPPED else "_views_excluded"
        return f"_tls_set_excluded(_ad_inplace_or_view, {state})"

    def _function(
        self,
        body: list[tuple[str | None, list[str]]],
        returned: str,
        name: str,
        *,
        guard: bool,
        profile: bool,
        observe: bool = False,
    ) -> str:
        head = self.head(name, guard=guard)
        claims = self.claims(name)
        switches = TrackingSwitches.along(self, [n for n, _ in body])
        head += ["    " + line for line in switches.state_read()]
        lines = []
        tick = "; ".join([f"_t1 = {Hook.CLOCK}()", f"{Hook.TIMES}[{{slot}}] += _t1 - _t0", "_t0 = _t1"])
        if profile:
            lines.append(f"_t0 = {Hook.CLOCK}()")
        free_slot = len(body) + 1
        layout = self.slab_layout
        if layout is None and self.cleanup_slab_bytes is not None:
            layout = SlabLayout.whole(self.cleanup_slab_bytes)
        segments = list(enumerate(layout.segments)) if layout is not None else []
        takes: dict[str | None, list[str]] = {}
        releases: dict[str | None, list[str]] = {}
        finally_lines = []
        for index, segment in segments:
            storage = Hook.slab(index)
            if segment.release is Release.LAZY:  # kept: resized only if another program of the runtime did
                take = f"{storage}.nbytes() == {segment.size} or {storage}.resize_({segment.size})"
                finally_lines.append(f"{INDENT}{Hook.RELEASE_PAGES}({storage})")
            else:
                take = f"{storage}.resize_({segment.size})"
                releases.setdefault(segment.release_after, []).append(f"{storage}.resize_(0)")
                finally_lines.append(f"{INDENT}{storage}.resize_(0)")
            takes.setdefault(segment.take_before, []).append(take)
        lines += takes.get(None, [])
        if profile:
            lines.append(tick.format(slot=0))
        for slot, (node_name, node_lines) in enumerate(body, start=1):
            if node_name is not None and node_name in takes:  # a segment taken right before its first writer
                lines += takes[node_name] + ([tick.format(slot=0)] if profile else [])
            lines += switches.before(node_name)
            if observe and node_name is not None:
                lines.append(f"_range = _record_function({node_label(node_name)!r}); _range.__enter__()")
            lines += node_lines
            if observe and node_name is not None:
                lines.append("_range.__exit__(None, None, None)")
            if profile:
                lines.append(tick.format(slot=slot))
            if node_name is not None and node_name in releases:  # given back early: the release below is then free
                lines += releases[node_name] + ([tick.format(slot=free_slot)] if profile else [])
        lines += switches.back()
        lines.append(f"_result = {returned}")
        tail = self.grad_restored() + [INDENT + line for line in switches.restored()]
        if segments:
            if profile:
                tail.append(f"{INDENT}_t0 = {Hook.CLOCK}()")
            tail += finally_lines
            if profile:
                tail.append(f"{INDENT}{Hook.TIMES}[{len(body) + 1}] += {Hook.CLOCK}() - _t0")
        if claims:
            tail.append(f"{INDENT}{Hook.UNCLAIM}(True)")
        return "\n".join(head + ["    try:"] + [INDENT + line for line in lines] + tail + ["    return _result", ""])


@dataclass
class TrackingSwitches:
    """The lines switching one thread's dispatch into and out of runs of nodes below
    ``ADInplaceOrView`` along the body entries it runs (:mod:`srbench.static.view_tracking`):
    into it before the first node of a run, back before the next node that keeps the key (two
    calls of about 0.07 µs each); an entry that runs either way (:meth:`CodeWriter.tracking_of`
    says ``None``) leaves the state as it is. The state is per thread, so every thread running
    nodes needs switches of its own: a stream program's worker thread starts with the default
    state, whatever its caller switched (:mod:`srbench.static.stream_code`).

    ``on``: whether any entry runs below the key (where the run is below the autograd keys); then
    the thread reads its own state first (:meth:`state_read`) and gives it back in its
    ``finally`` (:meth:`restored`), after a node that raised below the key as after a run."""

    writer: CodeWriter
    on: bool
    tracking: ViewTracking = ViewTracking.KEPT

    @classmethod
    def along(cls, writer: CodeWriter, names: Sequence[str | None]) -> TrackingSwitches:
        """The switches of a thread running the entries ``names`` in this order."""
        return cls(writer, writer.below_autograd and any(writer.tracking_of(n) is ViewTracking.SKIPPED for n in names))

    def state_read(self) -> list[str]:
        """The thread's dispatch state as its run found it (what :meth:`back` restores)."""
        return ["_views_excluded = _tls_is_excluded(_ad_inplace_or_view)"] if self.on else []

    def before(self, name: str | None) -> list[str]:
        """The switch (if any) to write before the entry ``name``'s lines."""
        wanted = self.writer.tracking_of(name) if self.on else None
        if wanted is None or wanted is self.tracking:
            return []
        self.tracking = wanted
        return [self.writer.tracking_switch(wanted)]

    def back(self) -> list[str]:
        """After the thread's last entry: its state back, if a run below the key is still open."""
        return self.before(None)

    def restored(self) -> list[str]:
        """The thread's ``finally`` line giving its state back (a node that raised below it)."""
        return [self.writer.tracking_switch(ViewTracking.KEPT)] if self.on else []


def identifiers(line: str) -> set[str]:
    token, found = [], set()
    for char in line + " ":
        if char.isalnum() or char == "_":
            token.append(char)
        elif token:
            found.add("".join(token))
            token = []
    return found
