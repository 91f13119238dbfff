"""Op resolution at prepare time: for every node, the calls that run it correctly, checked once.

The resolver walks the graph once with real example values (a dry run). For each op it computes
the reference result with the ATen overload itself (what ``torch.export``'s graph module does),
then tries the candidates in order of speed and keeps the first that gives the same result:

* **out variant** (functional ops): a user-registered one, a rewrite (2-D ``linear`` with a
  constant weight becomes ``torch.addmm`` on the weight transposed once), the C binding with
  ``out=`` (``torch.addmm(..., out=buf)``), then the ``.out`` overload found from the schema.
  The candidate must write into the buffers it is given (same data pointer, shape and strides).
* **native** (views and in-place ops, which allocate nothing): the ``Tensor`` method, the C
  binding, then the raw overload. A view candidate must alias the same bytes with the same
  geometry; an in-place candidate is checked on clones.
* **fallback** (the op as is, its result allocated by the op): the C binding, then the overload.

Reads at positions the input signature fixes take one call (:mod:`srbench.static.gathers`): a
view of views of an input is one ``as_strided`` of the input, a copy of such views and indexing
with constant index tensors one ``torch.take``. Views that no chosen call reads any more are then
left out (:attr:`Category.SKIP`).

A registered out variant that works is used as is. Among the other candidates that work, the
quickest on the example values is kept (best of a few
runs; ops slower than a millisecond keep the first, their kernel dominates), and the time of the
best out variant and the best fallback is recorded so the module can see when an out variant
reachable only through a slow path costs more than the allocation it saves.

Checking candidates on real values catches bindings that pick another overload, out kernels that
reallocate, and functional ops that secretly return their input (``dropout`` in eval mode returns
it as is): those are reported in ``aliases`` so the lifetime analysis treats them as views.
An op whose reference call fails and for which no out variant runs is reported at prepare time.

Values are compared only where they are specified: the results of ``empty``-like ops are whatever
the memory held, and random ops draw new values at every call, so comparing those with the
reference would pass or fail by chance. For them a candidate must give a result of the same
shape, dtype, device and strides (:class:`ResultCheck`). Whether an op draws is told per node from
what it does: an op carrying torch's nondeterministic tag is run twice more on the example inputs,
under two seeds, and one whose answers agree (``dropout(train=False)``, an eval-mode ``lstm``) has
its candidates' values checked as any other op's. A registered out variant that fails its
check is not used, and the user is told why (:class:`~srbench.static.errors.OutVariantWarning`).
"""

from __future__ import annotations

import contextlib
import enum
import operator
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
import torch.fx
from torch.utils import _pytree as pytree

from srbench.formatting import error_summary
from srbench.graph.nodes import written_arguments
from srbench.inputs import copy_with_layout
from srbench.memory.lifetimes import element_name, has_static_geometry
from srbench.memory.records import align_up
from srbench.static import scalar_ops
from srbench.static.calls import (
    Call,
    Const,
    binding_calls,
    function_binding,
    invoke,
    materialize,
    method_binding,
    op_kind,
    overload_call,
    read_nodes,
)
from srbench.static.eager_kernels import eager_out_call, has_backend_kernel
from srbench.static.errors import OutVariantWarning, UnsupportedOpError
from srbench.static.failure_scope import failure_scope
from srbench.static.gathers import constant_index_gather, folded_view, gathered_copy, view_chain
from srbench.static.out_variants import OutVariantRegistry
from srbench.static.region_calls import LEANER_CALLS
from srbench.static.serving import Serving, find_serving
from srbench.static.timing import device_barrier
from srbench.static.view_tracking import ViewTracking, measured_tracking


class Category(enum.Enum):
    """What kind of op a node is, as the resolver found it on real values (decides how it can run)."""

    VIEW = "view"  # returns an alias of an argument (per schema, confirmed on the example inputs)
    COPYING_VIEW = "copying_view"  # a view op that copied for this signature (reshape, contiguous)
    INPLACE = "inplace"  # writes an argument and returns it
    MUTATING = "mutating"  # writes an argument and returns something else
    FUNCTIONAL = "functional"  # allocates its results: out variant or fallback
    ALIASING = "aliasing"  # functional per schema, but returned an input as is (eval-mode dropout)
    GETITEM = "getitem"  # one element of a multi-output result
    OPAQUE = "opaque"  # not an ATen op (a Python callable): run as is
    SKIP = "skip"  # asserts what the runtime guarantees: not run


# Ops that only assert metadata the runtime already guarantees by keying programs on input
# shapes, strides, dtypes and devices.
_SKIPPED = {"aten::_assert_tensor_metadata"}
# What a node that nothing reads can be left out as: it writes nothing and allocates nothing that stays.
_UNREAD_SKIPPABLE = frozenset({Category.VIEW, Category.COPYING_VIEW, Category.GETITEM})
# The graph's spellings of ``torch.sparse_coo_tensor`` (see Resolver._sparse_coo_binding).
_SPARSE_COO = frozenset({"aten.sparse_coo_tensor.indices", "aten.sparse_coo_tensor.indices_size"})
# Conversions that return their input itself when it already has the dtype and device asked
# for (see Resolver._returns_its_input).
_CONVERSIONS = frozenset(
    {"aten.to.dtype", "aten.to.device", "aten.to.dtype_layout", "aten.to.other", "aten.type_as.default"}
)
# The ``to`` overloads whose arguments the ``Tensor.to`` binding cannot take as the graph spells
# them (see Resolver._to_binding), and where those passing a memory format positionally have it.
_MEMORY_FORMAT_AT = {
    op: [argument.name for argument in op._schema.arguments].index("memory_format")
    for op in (torch.ops.aten.to.dtype, torch.ops.aten.to.device, torch.ops.aten.to.other)
}
_TO_BINDABLE = frozenset({torch.ops.aten.to.dtype_layout, *_MEMORY_FORMAT_AT})
# Ops slower than this (seconds) are dominated by their kernel, not by how they are called.
TIME_ONLY_BELOW = 1e-3
# An out variant this many times slower than the fallback is timed again before the chooser sees it.
CONFIRM_SLOWER = 1.25
REGISTERED_LABEL = "registered "  # how the label of a user-registered out variant starts
# Arguments an ``.out`` overload may lack: the out tensor already carries them.
_TENSOR_OPTIONS = {"dtype", "layout", "device", "pin_memory"}
# ATen ops whose result is allocated and left as the memory was (no tag says so; ``empty``'s
# documentation and the deterministic-algorithms mode, which fills exactly these, do). ``resize_``
# leaves the elements it adds so (the OpInfo sweep found eager's and srbench's differing there), and
# so does its functional form, which ``decompose`` makes of a result written into a tensor of
# another size (``out=``: the twentieth round's ``out_arguments``).
UNINITIALIZED = frozenset(
    {
        "aten::resize_",
        "aten::resize_as_",
        "aten::resize",
        "aten::resize_as",
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::empty_permuted",
        "aten::new_empty",
        "aten::new_empty_strided",
    }
)


SEEDS = (1, 2)  # the seeds a tagged op's answers are drawn under, to tell whether they are random


def changes_with_seed(draw: Callable[[], Any], devices: Iterable[torch.device] = ()) -> bool:
    """Whether ``draw``'s answers may change with the random generators' seed: it is run under
    each of :data:`SEEDS`, with the CPU's generator and those of the CUDA ``devices`` forked, so
    the caller's random state is as it was. Its answers are fixed where they agree bit for bit
    (NaN where NaN, tensors and other leaves) and no draw moved a generator: answers that agree by
    chance (a coin flip, ``randint(0, 2, (1,))``, agrees under two seeds half the time) would be
    checked by value and fail by chance later. Errors are the caller's to handle."""
    cuda = sorted(
        {d.index if d.index is not None else torch.cuda.current_device() for d in devices if d.type == "cuda"}
    )
    generators = [torch.default_generator, *(torch.cuda.default_generators[index] for index in cuda)]
    answers = []
    for seed in SEEDS:
        with torch.random.fork_rng(devices=cuda):
            states = [generator.manual_seed(seed).get_state() for generator in generators]
            answers.append(pytree.tree_leaves(draw()))
            if not all(torch.equal(state, generator.get_state()) for state, generator in zip(states, generators)):
                return True
    return not _same_values(answers[0], answers[1], ResultCheck.EXACT)


class ResultCheck(enum.Enum):
    """What a candidate must reproduce of the op's own result on the example inputs."""

    VALUES = "values"  # the same values (``allclose`` for floating point, equal otherwise)
    EXACT = "exact"  # the same values bit for bit (NaN where the op gives NaN)
    GEOMETRY = "geometry"  # values unspecified or random: the same shape, dtype, device and strides

    @classmethod
    def of(cls, op: torch._ops.OpOverload, draw: Callable[[], Any], devices: Iterable[torch.device]) -> ResultCheck:
        """The check of one node of ``op``, whose call on the example inputs is ``draw``. Torch's
        ``nondeterministic_seeded`` tag says an op may draw, not that it does on these inputs:
        ``dropout(train=False)``, an eval-mode ``lstm`` with dropout 0, carry it and answer
        fixed values, which a wrong candidate would not be held to. So a tagged op is drawn
        under two seeds (:func:`changes_with_seed`; untagged ops cost nothing) and its values are
        checked where its answers agree. ``empty``-like ops (:data:`UNINITIALIZED`) answer what
        memory held, which two draws may or may not agree on: geometry only. An op that fails
        on the example inputs is checked by geometry (what is left to check of it)."""
        if op._schema.name in UNINITIALIZED:
            return cls.GEOMETRY
        if torch.Tag.nondeterministic_seeded not in op.tags:
            return cls.VALUES
        ok, changes = _try(partial(changes_with_seed, draw, devices))
        return cls.VALUES if ok and not changes else cls.GEOMETRY

    def for_candidate(self, registered: bool) -> ResultCheck:
        """What one candidate must give. srbench's own candidates call the op's kernel, or the
        kernel eager's composite op ends in: they must give its values bit for bit, so that the
        runtime answers exactly as eager (a different kernel, such as ``adaptive_avg_pool2d``'s
        out kernel where eager takes a mean, rounds differently, and over a deep network such
        differences compound). A user's registered out variant may be another kernel: it is held
        to ``allclose``."""
        return ResultCheck.EXACT if self is ResultCheck.VALUES and not registered else self


@dataclass(frozen=True)
class Resolution:
    """What the resolver found for one node; the module chooses among them once lifetimes are known.

    ``native`` runs views, in-place ops, ``getitem`` and opaque callables; ``out`` writes into
    given buffers; ``fallback`` allocates its result. ``aliases`` names the argument node that a
    functional op was found to return as is; ``element_aliases`` does so per result of a
    multi-output op, as (the result's storage id, :func:`~srbench.memory.lifetimes.element_name`,
    and the argument node it shares memory with): ``broadcast_tensors`` returns a view of each
    of its arguments, which one result's base cannot say.
    """

    node: str
    kind: str
    category: Category
    native: Call | None = None
    out: Call | None = None
    fallback: Call | None = None
    aliases: str | None = None
    element_aliases: tuple[tuple[str, str], ...] = ()
    constant: Any = None  # the value, when every input is a constant: computed once, at prepare time
    foldable: bool = False
    out_seconds: float | None = None  # best time of the chosen out variant on the example inputs
    fallback_seconds: float | None = None
    # the fallback's result has the op's geometry (shape, strides, dtype): it can stand for an
    # allocation of the result followed by the out variant (see codegen's run buffers)
    fallback_allocates_as_planned: bool = False
    # which of the fallback's allocations become its results, where the slab can serve them
    # (:mod:`srbench.static.serving`); found only where the fallback may be chosen
    serving: Serving | None = None
    # whether the out variant and the fallback each run below ADInplaceOrView (view_tracking.py)
    out_tracking: ViewTracking = ViewTracking.KEPT
    fallback_tracking: ViewTracking = ViewTracking.KEPT
    # the op's answers on the example inputs change with the random generators' seed (or could
    # not be told): srbench's one decision of which ops draw, read by the checks of candidates
    # and by the multistream scheduler, which keeps such ops in eager's order (they share the
    # generator, so their order is which numbers each draws)
    draws: bool = False


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _disagreement(a: Any, b: Any, check: ResultCheck = ResultCheck.EXACT) -> str | None:
    """How candidate result ``a`` differs from reference ``b`` under ``check``; ``None`` if it agrees."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        for what, got, want in (
            ("shape", a.shape, b.shape),
            ("dtype", a.dtype, b.dtype),
            ("device", a.device, b.device),
        ):
            if got != want:
                return f"its result has {what} {got}, the op's {want}"
        if a.layout != b.layout:
            return f"its result has layout {a.layout}, the op's {b.layout}"
        if a.layout != torch.strided:  # sparse: no strides; values compared densely
            return _disagreement(a.to_dense(), b.to_dense(), check)
        if check is ResultCheck.GEOMETRY:
            return None if a.stride() == b.stride() else f"its result has strides {a.stride()}, the op's {b.stride()}"
        if a.numel() == 0:
            return None
        if a.is_complex():  # as pairs of reals: not every complex dtype has ``equal`` (complex32 has not)
            a, b = (torch.view_as_real(t.resolve_conj()) for t in (a, b))  # a lazy conjugate: its values
        if check is ResultCheck.EXACT:
            if _bitwise_equal(a, b):
                return None
            if a.is_floating_point():
                largest = (a - b).abs().nan_to_num(nan=float("inf")).max().item()
                return f"its values differ from the op's in the last bits (largest absolute difference {largest:.3g})"
            return "its values differ from the op's"
        if a.is_floating_point() or a.is_complex():
            rtol = 1e-3 if a.element_size() <= 2 else 1e-5
            if torch.allclose(a, b, rtol=rtol, atol=rtol * 1e-1, equal_nan=True):
                return None
            largest = (a - b).abs().nan_to_num(nan=float("inf")).max().item()
            return f"its values differ from the op's (largest absolute difference {largest:.3g})"
        return None if torch.equal(a, b) else "its values differ from the op's"
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"it gives {len(a)} results, the op {len(b)}"
        return next((d for x, y in zip(a, b) if (d := _disagreement(x, y, check)) is not None), None)
    try:
        return None if bool(a == b) else f"it gives {a!r}, the op {b!r}"
    except (RuntimeError, TypeError):
        return f"it gives {type(a).__name__}, the op {type(b).__name__}"


def _same_values(a: Any, b: Any, check: ResultCheck = ResultCheck.EXACT) -> bool:
    return _disagreement(a, b, check) is None


def _same_view(a: Any, b: Any) -> bool:
    """``a`` views the same bytes as ``b``, with the same geometry."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (
            a.shape == b.shape
            and a.stride() == b.stride()
            and a.storage_offset() == b.storage_offset()
            and a.dtype == b.dtype
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_view(x, y) for x, y in zip(a, b))
    return False


def _same_copy(a: Any, b: Any) -> bool:
    """``a`` has ``b``'s values bit for bit and its strides (a copying view's result)."""
    if (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and (a.layout != b.layout or (a.layout == torch.strided and a.stride() != b.stride()))
    ):
        return False
    return _same_values(a, b)


def _same_geometry(result: Any, reference: Any) -> bool:
    """Whether ``result`` is one strided tensor of ``reference``'s shape, strides, dtype and
    device (a sparse or otherwise unstrided result has no strides to compare: never)."""
    return (
        isinstance(result, torch.Tensor)
        and isinstance(reference, torch.Tensor)
        and result.layout == reference.layout == torch.strided
        and (result.shape, result.stride(), result.dtype, result.device)
        == (reference.shape, reference.stride(), reference.dtype, reference.device)
    )


def storage_pointer(tensor: torch.Tensor) -> int | None:
    """Where a tensor's storage starts; ``None`` for an empty storage or an opaque tensor (a
    oneDNN weight packed at prepare time has no storage to alias)."""
    if tensor.is_mkldnn or tensor.layout != torch.strided or not tensor.untyped_storage().nbytes():
        return None
    return tensor.untyped_storage().data_ptr()


def _shares_storage(result: Any, arguments: list[torch.Tensor]) -> torch.Tensor | None:
    pointers = {storage_pointer(t): t for t in arguments}
    pointers.pop(None, None)
    for tensor in _tensors(result):
        pointer = storage_pointer(tensor)
        if pointer is not None and pointer in pointers:
            return pointers[pointer]
    return None


def _results(node: torch.fx.Node, buffers: tuple[torch.Tensor, ...]) -> Any:
    """Out buffers shaped like the node's result: one tensor, or the tuple of them."""
    return buffers[0] if isinstance(node.meta.get("val"), torch.Tensor) else buffers


def _best_time(run: Callable[[], Any], barrier: Callable[[], None], runs: int = 5) -> float:
    """The best of ``runs`` calls of ``run``, each timed from ``barrier`` to ``barrier``
    (:func:`~srbench.static.timing.device_barrier`: on CUDA, to the end of its kernels)."""
    best = float("inf")
    for _ in range(runs):
        barrier()
        start = time.perf_counter()
        run()
        barrier()
        best = min(best, time.perf_counter() - start)
        if best > TIME_ONLY_BELOW:
            break
    return best


def _try_same(call: Call, env: Mapping[str, Any], reference: Any, same: Callable[[Any, Any], bool]) -> bool:
    """Whether ``call`` runs on ``env`` and its result is ``same`` as ``reference``."""
    ran, result = _try(partial(invoke, call, env))
    return ran and same(result, reference)


def _failure_on_examples(op: torch._ops.OpOverload, error: BaseException) -> str:
    """Why an op whose own kernel raised on the example inputs is refused.

    A graph's ``_assert_*`` and ``sym_constrain_range*`` nodes are checks torch.export adds on
    sizes it could not decide while tracing (a data-dependent size bounded by an input's, say):
    one that fails on the very inputs the model was captured on is torch.export's own limit,
    and the exported program refuses them the same way, so the reason says so rather than
    reading as a failing op of the model's.
    """
    failure = f"{type(error).__name__}: {error}"
    if op._schema.name.startswith(("aten::_assert", "aten::sym_constrain_range")):
        return (
            "it is a runtime check torch.export put in the graph, and the example inputs fail it "
            f"(as they fail the exported program itself): {failure}"
        )
    return f"it failed on the example inputs ({failure})"


def _trial_copies(env: Mapping[str, Any], written: Sequence[str]) -> dict[str, torch.Tensor]:
    """Copies of the tensors a candidate writes, for trying it before the reference writes the
    real ones, laid out as the real ones (shape, strides, offset; written views of one storage
    stay views of one copy), so a candidate is judged on the layout it will be given. ``clone()``
    made a sliced tensor contiguous: a candidate judged by its result's geometry (an in-place
    random op on a slice) then failed on strides alone, and the op's raw overload was kept."""
    storages: dict[int, torch.UntypedStorage] = {}
    copies = {}
    for name in written:
        copied = copy_with_layout(env[name], storages)
        copies[name] = env[name].clone() if copied is None else copied
    return copies


def _try(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """Run one trial of resolving: its result, or the error it raised (see :func:`_trial`)."""
    ok, value, _ = _trial(fn)
    return ok, value


def _trial(fn: Callable[[], Any]) -> tuple[bool, Any, list[str]]:
    """Run one trial of resolving: its result or the error it raised, and what torch warned.
    The warnings are not shown: the op's own show when the model runs, and what they say about a
    candidate is the resolver's to judge (:data:`_RESIZED`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: tuple[bool, Any] = (True, fn())
        except Exception as error:  # a candidate that cannot run is just not chosen
            result = (False, error)
    return (*result, [str(warning.message) for warning in caught])


# What torch warns when an out variant resizes the out tensor it was given, even if it gives it
# back its shape (``linear.out`` on a 1-D input goes through a [1, n] result): deprecated, so
# such a call would warn at every run and break in a later torch. Only calls through torch's
# Python bindings raise it as a Python warning; the op's other out candidates are judged by it.
_RESIZED = "was resized"


def _matching_out_overload(op: torch._ops.OpOverload) -> tuple[torch._ops.OpOverload, tuple[str, ...]] | None:
    """The ``.out`` overload of ``op``'s packet whose other arguments match ``op``'s, per schema."""
    schema = op._schema
    wanted = [(a.name, str(a.type)) for a in schema.arguments if a.name not in _TENSOR_OPTIONS]
    packet = op.overloadpacket
    for overload_name in packet.overloads():
        candidate = getattr(packet, overload_name)
        outs = [a for a in candidate._schema.arguments if a.is_out]
        if not outs or len(outs) != len(schema.returns):
            continue
        others = [(a.name, str(a.type)) for a in candidate._schema.arguments if not a.is_out]
        if [x for x in others if x[0] not in _TENSOR_OPTIONS] == wanted:
            return candidate, tuple(a.name for a in outs)
    return None


def _copies_into_out(op: torch._ops.OpOverload, out_op: torch._ops.OpOverload, device: torch.device) -> bool:
    """Whether ``out_op`` is an out variant generated from a functional op with a kernel of its
    own (``autogen`` in ATen's native_functions.yaml): it runs the functional kernel, which
    allocates its result, then copies into ``out``. Planning its result saves no allocation and
    costs a copy plus slab bytes held all run (``_transformer_encoder_layer_fwd.out``: same
    allocations as the op itself, measured with torch.profiler). Recognised by the dispatcher's
    tables: the out overload has only a backend-independent kernel while the op has one for the
    device."""
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    return (
        has_kernel(out_op.name(), "CompositeExplicitAutograd")
        and not has_backend_kernel(out_op, device)
        and has_backend_kernel(op, device)
    )


class Resolver:
    """One dry run over ``graph`` with real values; see the module docstring."""

    def __init__(
        self,
        graph: torch.fx.Graph,
        values: Mapping[str, Any],
        constant_nodes: frozenset[str],
        out_variants: OutVariantRegistry,
        serve: bool = False,
    ):
        """``serve``: find, for fallbacks that may be chosen, what the slab can serve of them."""
        self.graph = graph
        self.serve = serve
        self.env: dict[str, Any] = dict(values)
        self.constant_nodes = constant_nodes
        self.constant_values: set[str] = set(constant_nodes)  # grows with views and folded ops (_fixed)
        self.out_variants = out_variants
        self.resolutions: dict[str, Resolution] = {}
        self.checks: dict[str, ResultCheck] = {}  # by node, once found (a tagged op is drawn twice)
        # the working fallbacks of the node being resolved whose result has the op's geometry
        self.allocates_as_planned: list[Call] = []

    def run(self) -> dict[str, Resolution]:
        nodes = list(self.graph.nodes)
        position = {node: index for index, node in enumerate(nodes)}
        dying: dict[int, list[str]] = {}  # step -> values no later node reads (freed as we go)
        for node in nodes:
            if node.op == "call_function" and node.users:
                dying.setdefault(max(position[user] for user in node.users), []).append(node.name)
        for index, node in enumerate(nodes):
            if node.op == "call_function":
                resolution = self._resolve(node)
                if self._draws(node):
                    resolution = replace(resolution, draws=True)
                if self._reads_only_constants(node) and self._fixed(node, resolution):
                    self.constant_values.add(node.name)
                    if resolution.category in (Category.COPYING_VIEW, Category.FUNCTIONAL):
                        resolution = replace(
                            resolution, constant=self.env.get(node.name), foldable=node.name in self.env
                        )
                self.resolutions[node.name] = resolution
                if not node.users:
                    self.env.pop(node.name, None)
            elif node.op == "get_attr" and node.name not in self.env:
                raise UnsupportedOpError("get_attr", node.name, "the graph module has no such attribute")
            for name in dying.get(index, ()):
                self.env.pop(name, None)
        self._skip_unread(nodes)
        return self.resolutions

    def _skip_unread(self, nodes: Sequence[torch.fx.Node]) -> None:
        """Views and ``getitem``s no chosen call reads (a view of an input that a later view now
        reads past, see :mod:`srbench.static.gathers`) are not run: they have no effect."""
        read: set[str] = set()
        for node in reversed(nodes):
            resolution = self.resolutions.get(node.name)
            if resolution is None:  # the output, placeholders
                read |= {arg.name for arg in node.all_input_nodes}
                continue
            if node.name not in read and resolution.category in _UNREAD_SKIPPABLE:
                self.resolutions[node.name] = Resolution(node.name, resolution.kind, Category.SKIP)
                continue
            calls = (resolution.native, resolution.out, resolution.fallback)
            read |= {name for call in calls if call is not None for name in read_nodes(call)}
            read |= {resolution.aliases} if resolution.aliases else set()
            read |= {base for _, base in resolution.element_aliases}

    def _fixed(self, node: torch.fx.Node, resolution: Resolution) -> bool:
        """Whether ``node``, reading only constants, is a constant too: a view or ``getitem`` of
        them, or an op whose values follow from them. Not a random op (``torch.rand(3)`` reads no
        tensor at all) nor an ``empty``-like one: an op reading such a result would be folded
        to the numbers drawn at prepare time (``torch.rand(3) * 2`` gave the same numbers at
        every call)."""
        if resolution.category in (Category.VIEW, Category.GETITEM):
            return True
        return resolution.category in (Category.COPYING_VIEW, Category.FUNCTIONAL) and self._is_function_of_inputs(node)

    def _is_view(self, node: torch.fx.Node) -> bool:
        resolution = self.resolutions.get(node.name)
        return resolution is not None and resolution.category is Category.VIEW

    def _reads_only_constants(self, node: torch.fx.Node) -> bool:
        return all(arg.name in self.constant_values for arg in node.all_input_nodes)

    def _is_function_of_inputs(self, node: torch.fx.Node) -> bool:
        """Whether ``node``'s values follow from its inputs, so computing it once is computing it
        at every run (not so for random ops, ``empty``-like ops, callables srbench cannot see into,
        and ops that return nothing: ``aten._print`` is called for its effect, at every call)."""
        target = node.target
        return (
            isinstance(target, torch._ops.OpOverload)
            and bool(target._schema.returns)
            and self._check(node, target) is ResultCheck.VALUES
        )

    def _draws(self, node: torch.fx.Node) -> bool:
        """Whether ``node`` draws random numbers: an op torch tags ``nondeterministic_seeded``
        whose answers on the example inputs change with the seed (:meth:`ResultCheck.of`, found
        once per node; a mutating op's was found before its reference call wrote anything, a
        functional op writes nothing). ``empty``-like ops are checked by geometry too, but draw
        nothing."""
        target = node.target
        return (
            isinstance(target, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded in target.tags
            and target._schema.name not in UNINITIALIZED
            and self._check(node, target) is ResultCheck.GEOMETRY
        )

    def _check(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> ResultCheck:
        """What ``node``'s candidates must reproduce (:meth:`ResultCheck.of`), found once, before
        the op's reference call writes anything: a draw writes clones of what the op writes."""
        if node.name not in self.checks:
            written = [n.name for n in written_arguments(node) if isinstance(self.env.get(n.name), torch.Tensor)]

            def draw() -> Any:
                trial = {**self.env, **_trial_copies(self.env, written)}
                result = op(*materialize(node.args, trial), **materialize(dict(node.kwargs), trial))
                return result, [trial[name] for name in written]

            arguments = _tensors(materialize(list(node.args) + list(node.kwargs.values()), self.env))
            devices = {t.device for t in arguments + _tensors(node.meta.get("val"))}
            self.checks[node.name] = ResultCheck.of(op, draw, devices)
        return self.checks[node.name]

    # -- one node ---------------------------------------------------------------------------

    def _resolve(self, node: torch.fx.Node) -> Resolution:
        target = node.target
        if target is operator.getitem:
            self.env[node.name] = operator.getitem(*materialize(node.args, self.env))
            return Resolution(
                node.name, "getitem", Category.GETITEM, native=Call("getitem", operator.getitem, node.args)
            )
        if not isinstance(target, torch._ops.OpOverload):
            return self._opaque(node)
        kind = op_kind(target)
        if kind in _SKIPPED:
            return Resolution(node.name, kind, Category.SKIP)
        schema = target._schema
        aliasing_returns = [r for r in schema.returns if r.alias_info is not None]
        if schema.is_mutable:
            return self._mutating(node, target, all_alias=len(aliasing_returns) == len(schema.returns) > 0)
        if aliasing_returns and len(aliasing_returns) == len(schema.returns):
            return self._view(node, target)
        return self._functional(node, target)

    def _reference(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> tuple[bool, Any]:
        return _try(lambda: op(*materialize(node.args, self.env), **materialize(dict(node.kwargs), self.env)))

    def _refused(self, node: torch.fx.Node, op: torch._ops.OpOverload, reason: str, error: Any) -> UnsupportedOpError:
        """The refusal of ``node``, whose op's own kernel raised ``error`` on the call's values,
        saying whether it would on any values of their signature (:mod:`srbench.static.failure_scope`)."""
        args, kwargs = materialize(node.args, self.env), materialize(dict(node.kwargs), self.env)
        return UnsupportedOpError(op_kind(op), node.name, reason, failure_scope(op, args, kwargs, error, self.graph))

    def _no_match_reason(self, node: torch.fx.Node, op: torch._ops.OpOverload, reference: Any) -> str:
        """Why no candidate call of ``op`` matched its own result on the example inputs: where the
        op's own kernel answers otherwise when called again on the same inputs, it draws random
        numbers (or reads memory it never wrote) without the tag that has srbench check it by
        geometry (a ``torch.library`` op defined without it), and the reason says so."""
        check = self._check(node, op).for_candidate(registered=False)
        ok, again = self._reference(node, op)
        if ok and not _same_values(again, reference, check):
            return (
                "its own kernel answers otherwise when called again on the same inputs, so no call of "
                "it could be checked; an op that draws random numbers is run and checked as such only "
                "where it carries the nondeterministic_seeded tag (a torch.library op: "
                "tags=torch.Tag.nondeterministic_seeded where it is defined)"
            )
        return "no out variant found, and no candidate matched"

    def _opaque(self, node: torch.fx.Node) -> Resolution:
        target = node.target
        if not callable(target):
            raise UnsupportedOpError(str(target), node.name, "its target is not callable")
        kind = op_kind(target)
        call = Call(kind, LEANER_CALLS.get(target, target), node.args, dict(node.kwargs))
        ok, result = _try(lambda: invoke(call, self.env))
        if not ok:
            raise UnsupportedOpError(kind, node.name, f"calling it failed: {result}")
        self.env[node.name] = result
        return Resolution(node.name, kind, Category.OPAQUE, native=call)

    @staticmethod
    def _as_is(node: torch.fx.Node, op: torch._ops.OpOverload) -> Call:
        """The op through its overload, as ``torch.export``'s graph module calls it."""
        return Call(str(op), op, node.args, dict(node.kwargs))

    def _native_candidates(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> list[Call]:
        calls = []
        for binding in (method_binding(op), function_binding(op)):
            if binding is not None:
                calls += binding_calls(op, binding, node.args, node.kwargs)
        calls.append(overload_call(op, node.args, node.kwargs))
        return calls

    def _view(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> Resolution:
        """Ops whose schema says they return an alias. Most do; some (``contiguous``,
        ``reshape``, ``to``) copy when they must, which the example run shows for this signature:
        those run as they are at every run and are never made once."""
        kind = op_kind(op)
        ok, reference = self._reference(node, op)
        if not ok and self._reshapes_in_another_layout(node, op):
            reshape = Call("aten.reshape.default", torch.ops.aten.reshape.default, node.args)
            ok, reference = _try(partial(invoke, reshape, self.env))
            if ok:
                self.env[node.name] = reference
                return Resolution(node.name, kind, Category.COPYING_VIEW, native=reshape)
        if not ok:
            raise self._refused(node, op, f"the view failed on the example inputs: {reference}", reference)
        self.env[node.name] = reference
        if self._returns_its_input(node, op, reference):
            return Resolution(
                node.name, kind, Category.VIEW, native=Call("returns its input", returns_its_input, node.args[:1])
            )
        arguments = _tensors(materialize(list(node.args) + list(node.kwargs.values()), self.env))
        aliases = _shares_storage(reference, arguments) is not None
        same = _same_view if aliases else _same_copy
        category = Category.VIEW if aliases else Category.COPYING_VIEW
        candidates = self._native_candidates(node, op)
        if aliases and str(op) == "aten.reshape.default" and not node.kwargs:
            # a reshape that views for this signature views at every run (strides are guarded)
            candidates.insert(0, Call("Tensor.view", torch._C.TensorBase.view, node.args))
        if op in _TO_BINDABLE:
            candidates[:0] = self._to_binding(node, op)
        if op is torch.ops.aten.alias.default:  # no binding; indexing with ``...`` is at::alias (0.6 µs, 0.8 raw)
            candidates.insert(0, Call("Tensor.__getitem__", torch._C.TensorBase.__getitem__, (node.args[0], ...)))
        one, private = self._one_call_view(node, op, reference, aliases)
        if one is not None and private and _try_same(one, self.env, reference, same):
            return Resolution(node.name, kind, category, native=one)
        candidates[:0] = [one] if one is not None else []
        working: list[tuple[Call, tuple[torch.Tensor, ...]]] = []
        for call in candidates:
            ran, result = _try(partial(invoke, call, self.env))
            if ran and same(result, reference):
                working.append((call, ()))
        fastest, _ = self._fastest(working, self._barrier(node))
        return Resolution(node.name, kind, category, native=fastest or self._as_is(node, op))

    def _reshapes_in_another_layout(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> bool:
        """Whether a ``view`` that failed asks only for its input's values in another shape, its
        input laid out otherwise than captured: a kernel's result can have other strides than its
        metadata says (``_native_batch_norm_legit_no_training`` on a transposed input is contiguous,
        its fake result strided like the input), and ``decompose`` lowers ``linear`` to a ``view``
        that holds only for the fake strides. It then runs as ``reshape`` (a copy), where nothing
        writes through the view or its input, so no one can tell a copy from a view."""
        viewed = node.args[0]
        if op is not torch.ops.aten.view.default or not isinstance(viewed, torch.fx.Node):
            return False
        captured, real = viewed.meta.get("val"), self.env.get(viewed.name)
        if not isinstance(captured, torch.Tensor) or not isinstance(real, torch.Tensor):
            return False
        if tuple(captured.shape) != tuple(real.shape) or tuple(captured.stride()) == tuple(real.stride()):
            return False
        return not any(
            written in (node, viewed) for user in (*node.users, *viewed.users) for written in written_arguments(user)
        )

    def _one_call_view(
        self, node: torch.fx.Node, op: torch._ops.OpOverload, reference: Any, aliases: bool
    ) -> tuple[Call | None, bool]:
        """A view op on views of an input as one call reading the input (:mod:`srbench.static.gathers`),
        if there is one, and whether nothing else reads those views."""
        chain = view_chain(node, self._is_view)
        if chain is None or chain.root.name in self.constant_values:  # views of constants are made once
            return None, False
        root, viewed = chain.root, node.args[0]
        assert isinstance(viewed, torch.fx.Node)  # view_chain found views there
        if aliases:
            return folded_view(root, self.env[root.name], reference), chain.private
        return gathered_copy(node, root, self.env[root.name], self.env[viewed.name], op, out=False), chain.private

    def _mutating(self, node: torch.fx.Node, op: torch._ops.OpOverload, all_alias: bool) -> Resolution:
        """In-place ops (and other mutating ops) run as they are; candidates are tried on clones of
        the arguments they write, before the reference mutates the real values."""
        kind = op_kind(op)
        check = self._check(node, op).for_candidate(registered=False)
        written: list[str] = []
        for index, argument in enumerate(op._schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            value = (
                node.args[index]
                if index < len(node.args) and not argument.kwarg_only
                else node.kwargs.get(argument.name)
            )
            if isinstance(value, torch.fx.Node) and isinstance(self.env.get(value.name), torch.Tensor):
                written.append(value.name)
        attempts = []
        for call in self._native_candidates(node, op):
            trial = dict(self.env)
            trial.update(_trial_copies(self.env, written))
            attempts.append((call, trial, _try(partial(invoke, call, trial))))
        ok, reference = self._reference(node, op)
        if not ok:
            raise self._refused(node, op, _failure_on_examples(op, reference), reference)
        self.env[node.name] = reference
        category = Category.INPLACE if all_alias else Category.MUTATING
        for call, trial, (ran, result) in attempts:
            if (
                ran
                and _same_values(result, reference, check)
                and all(_same_values(trial[n], self.env[n], check) for n in written)
            ):
                return Resolution(node.name, kind, category, native=call)
        return Resolution(node.name, kind, category, native=self._as_is(node, op))

    def _functional(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> Resolution:
        kind = op_kind(op)
        ok, reference = self._reference(node, op)
        arguments = _tensors(materialize(list(node.args) + list(node.kwargs.values()), self.env))
        if ok:
            aliased = _shares_storage(reference, arguments)
            if aliased is not None:  # a "functional" op that returned an input as is, or views
                self.env[node.name] = reference
                if self._returns_its_input(node, op, reference):
                    call = Call("returns its input", returns_its_input, node.args[:1])
                else:
                    working = self._working_fallbacks(node, op, reference)
                    call = working[0] if working else self._as_is(node, op)
                if isinstance(reference, torch.Tensor):
                    base = self._argument_sharing(node, reference)
                    return Resolution(node.name, kind, Category.ALIASING, native=call, aliases=base)
                elements = tuple(
                    (element_name(node, index), base)
                    for index, result in enumerate(reference)
                    if isinstance(result, torch.Tensor) and (base := self._argument_sharing(node, result)) is not None
                )
                return Resolution(node.name, kind, Category.ALIASING, native=call, element_aliases=elements)
        outs = self._working_out_variants(node, op, reference if ok else None)
        if not ok:
            # The op's own kernel refuses these inputs, so eager raises on them; a built-in out
            # kernel may run anyway (max.unary_out gives -inf for an empty tensor where max refuses)
            # and would answer where eager raises. Only a registered out variant (the user's, for an
            # op with no eager kernel on the device) may stand in; else the op is refused, with
            # eager's error.
            outs = [(call, buffers) for call, buffers in outs if call.label.startswith(REGISTERED_LABEL)]
        fallbacks = self._working_fallbacks(node, op, reference) if ok else []
        if not outs and not fallbacks:
            if not ok:
                raise self._refused(node, op, _failure_on_examples(op, reference), reference)
            raise UnsupportedOpError(kind, node.name, self._no_match_reason(node, op, reference))
        registered = [call for call, _ in outs if call.label.startswith(REGISTERED_LABEL)]
        barrier = self._barrier(node)
        out_call: Call | None
        if registered:  # the user's choice is taken as is, not raced against the others
            out_call, out_seconds = registered[0], None
        else:
            out_call, out_seconds = self._fastest(outs, barrier)
        fallback, fallback_seconds = self._fastest([(call, ()) for call in fallbacks], barrier)
        if out_call is not None and fallback is not None and out_seconds and fallback_seconds:
            out_seconds, fallback_seconds = self._confirm_slower(
                out_call, outs, fallback, (out_seconds, fallback_seconds), barrier
            )
        best_time = partial(_best_time, barrier=barrier)
        out_tracking = fallback_tracking = ViewTracking.KEPT
        if out_call is not None:
            buffers = next(found for call, found in outs if call is out_call)
            out_run = partial(invoke, out_call, self.env, buffers)
            out_tracking = measured_tracking(op, out_run, out_seconds, best_time, _same_copy)
        if fallback is not None:
            fallback_run = partial(invoke, fallback, self.env)
            fallback_tracking = measured_tracking(op, fallback_run, fallback_seconds, best_time, _same_copy)
        serving = None
        if (
            self.serve
            and fallback is not None
            and (out_call is None or (out_seconds or 0.0) > (fallback_seconds or 0.0))
            and self._device(node, reference) == torch.device("cpu")
        ):
            serving = find_serving(fallback, self.env)
        self.env[node.name] = reference if ok else _results(node, outs[0][1])
        return Resolution(
            node.name,
            kind,
            Category.FUNCTIONAL,
            out=out_call,
            fallback=fallback,
            out_seconds=out_seconds,
            fallback_seconds=fallback_seconds,
            fallback_allocates_as_planned=any(call is fallback for call in self.allocates_as_planned),
            serving=serving,
            out_tracking=out_tracking,
            fallback_tracking=fallback_tracking,
        )

    def _returns_its_input(self, node: torch.fx.Node, op: torch._ops.OpOverload, reference: Any) -> bool:
        """A conversion that returned its input itself (``x.to(torch.float32)`` of a float tensor,
        ``x.type_as(x)``): whether it does follows from its arguments' dtypes and devices and its
        constant arguments, which are the same at every run of the program, so the program passes
        the input on instead of calling it (about 1 µs a call). Not with a ``memory_format``
        other than ``preserve_format``: whether the input already has it follows from strides."""
        if str(op) not in _CONVERSIONS:
            return False
        names = [argument.name for argument in op._schema.arguments]
        if "memory_format" in names:
            index = names.index("memory_format")
            given = node.args[index] if index < len(node.args) else node.kwargs.get("memory_format")
            if given not in (None, torch.preserve_format):
                return False
        source = node.args[0]
        return isinstance(source, torch.fx.Node) and reference is self.env.get(source.name)

    def _argument_sharing(self, node: torch.fx.Node, result: torch.Tensor) -> str | None:
        """The argument node whose storage ``result`` shares, if any."""
        pointer = storage_pointer(result)
        return next(
            (
                arg.name
                for arg in node.all_input_nodes
                if isinstance(self.env.get(arg.name), torch.Tensor) and storage_pointer(self.env[arg.name]) == pointer
            ),
            None,
        )

    def _confirm_slower(
        self,
        out_call: Call,
        outs: Sequence[tuple[Call, tuple[torch.Tensor, ...]]],
        fallback: Call,
        seconds: tuple[float, float],
        barrier: Callable[[], None],
    ) -> tuple[float, float]:
        """An out variant that looked :data:`CONFIRM_SLOWER` times slower than the fallback is
        timed again, interleaved with it, and each keeps its best time: on a loaded machine one
        descheduled sample must not send an op's result out of the slab."""
        out_seconds, fallback_seconds = seconds
        if out_seconds <= CONFIRM_SLOWER * fallback_seconds:
            return out_seconds, fallback_seconds
        buffers = next(found for call, found in outs if call is out_call)
        for _ in range(3):
            out_seconds = min(out_seconds, _best_time(partial(invoke, out_call, self.env, buffers), barrier))
            fallback_seconds = min(fallback_seconds, _best_time(partial(invoke, fallback, self.env), barrier))
        return out_seconds, fallback_seconds

    def _fastest(
        self, candidates: Sequence[tuple[Call, tuple[torch.Tensor, ...]]], barrier: Callable[[], None]
    ) -> tuple[Call | None, float | None]:
        """The quickest of the working candidates, timed on the example values (best of a few
        runs). Ops that take longer than :data:`TIME_ONLY_BELOW` are dominated by their kernel:
        the first candidate, in order of preference, is kept without comparing. A raw overload
        (:attr:`Call.parses_schema`) is not timed once a candidate without that cost works: it
        runs the kernel a binding runs, plus microseconds of matching its arguments to the schema,
        so on an op whose kernel takes tens of microseconds it won only by the noise of a loaded
        machine (the MLP's last ``linear`` went through ``aten.linear.out`` in some
        preparations: about 3 µs of an 85 µs call)."""
        best: tuple[Call | None, float | None] = (None, None)
        for call, buffers in candidates:
            if call.parses_schema and best[0] is not None and not best[0].parses_schema:
                continue
            seconds = _best_time(partial(invoke, call, self.env, buffers), barrier)
            if best[1] is None or seconds < best[1]:
                best = (call, seconds)
            if seconds > TIME_ONLY_BELOW:
                break
        return best

    def _working_fallbacks(self, node: torch.fx.Node, op: torch._ops.OpOverload, reference: Any) -> list[Call]:
        check = self._check(node, op).for_candidate(registered=False)
        candidates = self._rewrites(node, op, out=False)
        binding = function_binding(op) or method_binding(op)
        if binding is not None:
            candidates += binding_calls(op, binding, node.args, node.kwargs)
        candidates.append(overload_call(op, node.args, node.kwargs))
        working: list[Call] = []
        self.allocates_as_planned = []
        for call in candidates:
            if _spells_working_defaults(call, working):
                continue
            ok, result = _try(partial(invoke, call, self.env))
            if ok and _same_values(result, reference, check):
                working.append(call)
                if _same_geometry(result, reference):
                    self.allocates_as_planned.append(call)
        return working

    def _out_candidates(self, node: torch.fx.Node, op: torch._ops.OpOverload) -> list[Call]:
        calls = []
        registered = self.out_variants.get(op)
        if registered is not None:
            calls.append(Call(f"{REGISTERED_LABEL}{op_kind(op)}", registered, node.args, dict(node.kwargs), out="out"))
        calls += self._rewrites(node, op, out=True)
        binding = function_binding(op)
        if binding is not None:
            calls += binding_calls(op, binding, node.args, node.kwargs, out="out")
        overload = _matching_out_overload(op)
        if overload is not None and not _copies_into_out(op, overload[0], self._device(node, None)):
            out_op, names = overload
            kwargs = {
                k: v
                for k, v in node.kwargs.items()
                if k not in _TENSOR_OPTIONS or any(a.name == k for a in out_op._schema.arguments)
            }
            calls.append(overload_call(out_op, node.args, kwargs, out=names))
        return calls

    def _rewrites(self, node: torch.fx.Node, op: torch._ops.OpOverload, *, out: bool) -> list[Call]:
        """Faster equivalent calls for common ops, checked like every other candidate.

        ``linear(x, W, b)`` on a 2-D ``x`` with a constant ``W`` is ``addmm(b, x, W.t())``, the
        kernel ``linear`` calls anyway, minus its dispatch, with ``W.t()`` made once; ``relu``
        is ``clamp_min(x, 0)``, whose binding takes ``out=`` where ``torch.relu``'s does not;
        ``embedding_bag`` is what it calls without autograd, ``_embedding_bag_forward_only``
        (as a fallback: its out overload is generated); ``index`` (no binding) is indexing with
        ``[]``; the scalar ops export writes where sizes come from the data (``sym_size``,
        ``_assert_scalar``) are ``Tensor`` methods and a Python test (:mod:`srbench.static.scalar_ops`).
        Composite ops without an out kernel of their own (``conv2d``, ``batch_norm``)
        write into the slab through the kernel eager ends in
        (:func:`srbench.static.eager_kernels.eager_out_call`).
        """
        name = str(op)
        functions = torch._C._VariableFunctions
        if out:
            own = eager_out_call(node, op, self.env)
            if own is not None:
                return [own]
        if name in _SPARSE_COO and not out:
            return self._sparse_coo_binding(node)
        if node.kwargs:
            return []
        if name in scalar_ops.EQUIVALENTS:
            return [] if out else [Call(*scalar_ops.EQUIVALENTS[name], node.args)]
        if name == "aten.relu.default":
            call = Call("torch.clamp_min", functions.clamp_min, (node.args[0], 0))
            return [replace(call, out="out") if out else call]
        if name in ("aten.embedding_bag.default", "aten.embedding_bag.padding_idx"):
            forward_only = torch.ops.aten._embedding_bag_forward_only
            if out and _copies_into_out(forward_only.default, forward_only.out, self._device(node, None)):
                return []  # its out overload is generated: it allocates the results anyway, then copies
            return [self._embedding_bag_forward_only(node, out)]
        if name == "aten.index.Tensor":
            source, indices = node.args
            assert isinstance(source, torch.fx.Node) and isinstance(indices, (list, tuple))  # Tensor, Tensor?[]
            gather = self._index_gather(node, source, indices, out)
            calls = [gather] if gather is not None else []
            if not out:
                key = tuple(slice(None) if index is None else index for index in indices)
                calls.append(Call("Tensor.__getitem__", torch._C.TensorBase.__getitem__, (source, key)))
            return calls
        if name != "aten.linear.default":
            return []
        x, weight, bias = ([*list(node.args), None])[:3]
        if not isinstance(weight, torch.fx.Node) or weight.name not in self.constant_nodes:
            return []
        x_value = self.env.get(x.name) if isinstance(x, torch.fx.Node) else None
        if not isinstance(x_value, torch.Tensor) or x_value.dim() != 2:
            return []
        transposed = Const(self.env[weight.name].t())
        call = (
            Call("torch.mm", functions.mm, (x, transposed))
            if bias is None
            else Call("torch.addmm", functions.addmm, (bias, x, transposed))
        )
        return [replace(call, out="out") if out else call]

    @staticmethod
    def _sparse_coo_binding(node: torch.fx.Node) -> list[Call]:
        """``torch.sparse_coo_tensor``, as the model called it, for the graph's
        ``sparse_coo_tensor``: the binding takes no ``layout`` (the op's name says it) nor a
        ``pin_memory`` of ``None``, so as the graph spells it the op ran through its raw overload
        (about 10 µs on a 5-node graph against 4.5)."""
        layout = node.kwargs.get("layout")
        if layout not in (None, torch.sparse_coo):
            return []
        kwargs = {k: v for k, v in node.kwargs.items() if k != "layout" and not (k == "pin_memory" and v is None)}
        return [Call("torch.sparse_coo_tensor", torch._C._VariableFunctions.sparse_coo_tensor, node.args, kwargs)]

    @staticmethod
    def _to_binding(node: torch.fx.Node, op: torch._ops.OpOverload) -> list[Call]:
        """``Tensor.to`` for the graph's ``to`` where the binding cannot take the arguments as the
        graph spells them, so that the op ran through its raw overload (3.4 µs a call against 0.4
        on the outside sweep's ``noop_conversions``). ``to.dtype_layout``
        (``x.to(memory_format=...)``): the binding takes no ``layout`` nor ``pin_memory``; where
        the graph asks for a strided tensor, not pinned, which is what ``Tensor.to`` gives, the
        binding is the same op. ``to.dtype``, ``to.device`` and ``to.other`` with a memory format:
        the graph passes it positionally, after ``non_blocking`` and ``copy``, and the binding
        takes it by keyword only; given so, the binding is the same op."""
        if op is not torch.ops.aten.to.dtype_layout:
            at = _MEMORY_FORMAT_AT[op]
            if len(node.args) <= at:
                return []  # no memory format given: the binding takes the graph's arguments as they are
            kwargs = {**node.kwargs, "memory_format": node.args[at]}
            return [Call("Tensor.to", torch._C.TensorBase.to, node.args[:at], kwargs)]
        layout, pinned = node.kwargs.get("layout"), node.kwargs.get("pin_memory")
        if node.args[1:] or layout not in (None, torch.strided) or pinned not in (None, False):
            return []
        kwargs = {key: value for key, value in node.kwargs.items() if key not in ("layout", "pin_memory")}
        return [Call("Tensor.to", torch._C.TensorBase.to, node.args, kwargs)]

    def _index_gather(
        self, node: torch.fx.Node, source: torch.fx.Node, indices: Sequence[Any], out: bool
    ) -> Call | None:
        """Indexing with constant index tensors as one gather (:mod:`srbench.static.gathers`)."""
        values = []
        for index in indices:
            if index is not None and not (isinstance(index, torch.fx.Node) and index.name in self.constant_values):
                return None
            values.append(None if index is None else self.env[index.name])
        return constant_index_gather(node, self.env.get(source.name), values, out)

    @staticmethod
    def _embedding_bag_forward_only(node: torch.fx.Node, out: bool) -> Call:
        schema = torch.ops.aten.embedding_bag.padding_idx._schema
        args = list(node.args) + [a.default_value for a in schema.arguments[len(node.args) :]]
        if args[8] is None:
            args[8] = -1  # _embedding_bag_forward_only spells "no padding index" -1
        target = torch.ops.aten._embedding_bag_forward_only
        if out:
            return overload_call(target.out, tuple(args), out=("out0", "out1", "out2", "out3"))
        return Call(
            "torch._embedding_bag_forward_only", torch._C._VariableFunctions._embedding_bag_forward_only, tuple(args)
        )

    def _working_out_variants(
        self, node: torch.fx.Node, op: torch._ops.OpOverload, reference: Any
    ) -> list[tuple[Call, tuple[torch.Tensor, ...]]]:
        """Out-variant candidates that write the reference result into the buffers they are
        given, with those buffers (same data pointer, shape and strides after the call).

        Results whose size depends on values (``nonzero``, boolean-mask indexing) have no fixed
        geometry to give: they get none. A registered out variant that fails is reported with
        an :class:`OutVariantWarning` saying why, and the op runs another way."""
        meta = node.meta.get("val")
        results = list(meta) if isinstance(meta, (list, tuple)) else [meta]
        tensors = [r for r in results if isinstance(r, torch.Tensor) and has_static_geometry(r)]
        if not results or len(tensors) != len(results):
            return []
        if reference is not None and len(_tensors(reference)) != len(results):
            return []
        check = self._check(node, op)
        device = self._device(node, reference)
        working: list[tuple[Call, tuple[torch.Tensor, ...]]] = []
        for call in self._out_candidates(node, op):
            if _spells_working_defaults(call, [found for found, _ in working]):
                continue
            registered = call.label.startswith(REGISTERED_LABEL)
            buffers = _poisoned_buffers(tensors, device, _tensors(reference))
            geometry = [(b.data_ptr(), b.shape, b.stride()) for b in buffers]
            ok, error, warned = _trial(partial(invoke, call, self.env, buffers))
            resized = any(_RESIZED in message for message in warned)
            if resized and not registered:  # the op's own out kernel: every built-in candidate reaches it
                return [(call, buffers) for call, buffers in working if call.label.startswith(REGISTERED_LABEL)]
            if not ok:
                problem: str | None = f"it raised {error_summary(error)}"
            elif error is NotImplemented:  # a Python operator's binding (torch.__and__) refusing out=
                problem = "it returned NotImplemented"
            elif geometry != [(b.data_ptr(), b.shape, b.stride()) for b in buffers]:
                problem = "it did not write into the out tensor it was given (it resized or replaced it)"
            elif resized:
                problem = "it resized the out tensor it was given (deprecated in torch: it would warn at every run)"
            elif reference is not None:
                problem = _disagreement(_results(node, buffers), reference, check.for_candidate(registered))
            else:
                problem = None
            if problem is None:
                working.append((call, buffers))
            elif registered:
                name = getattr(call.fn, "__qualname__", repr(call.fn))
                warnings.warn(
                    f"registered out variant {name} for {op_kind(op)} (node {node.name!r}) is not used: "
                    f"{problem} on the example inputs",
                    OutVariantWarning,
                    stacklevel=2,
                )
        return working

    def _barrier(self, node: torch.fx.Node) -> Callable[[], None]:
        return device_barrier(self._device(node, None))

    def _device(self, node: torch.fx.Node, reference: Any) -> torch.device:
        tensors = _tensors(reference)
        if tensors:
            return tensors[0].device
        meta = node.meta.get("val")
        fake = _tensors(meta)
        return fake[0].device if fake else torch.device("cpu")


def returns_its_input(value: Any) -> Any:
    """A conversion that returns its input at every run (:meth:`Resolver._returns_its_input`)."""
    return value


def _spells_working_defaults(call: Call, working: Sequence[Call]) -> bool:
    """``call`` is a binding given the schema's defaults whose call as the graph makes it works
    already (:func:`~srbench.static.calls.binding_calls`): not tried."""
    return call.spells_defaults and any(found.fn is call.fn and not found.spells_defaults for found in working)


def _poisoned_buffers(
    likes: Sequence[torch.Tensor], device: torch.device, references: Sequence[torch.Tensor] = ()
) -> tuple[torch.Tensor, ...]:
    """Out buffers of ``likes``' geometries, as the slab gives them: views into one storage, each
    at an aligned offset, filled with a value an op rarely produces (NaN, the largest integer) or,
    for booleans, which have no such value, the opposite of the op's own result (``references``),
    so a candidate that leaves a buffer unwritten fails the check whatever the memory held. One
    storage because some kernels decide by storage identity (``linalg_qr``'s out kernel takes
    ``Q.is_alias_of(R)`` to mean that it computed in ``R``): buffers of their own would pass a
    check that the slab's views then fail."""
    offsets, total = [], 0
    for like in likes:
        offsets.append(total)
        span = 1 + sum((n - 1) * stride for n, stride in zip(like.shape, like.stride())) if like.numel() else 0
        total += align_up(span * like.element_size())
    storage = torch.empty(total, dtype=torch.uint8, device=device).untyped_storage()
    return tuple(
        _poison(
            torch.empty(0, dtype=like.dtype, device=device).set_(
                storage, offset // like.element_size(), like.shape, like.stride()
            ),
            references[index] if index < len(references) else None,
        )
        for index, (like, offset) in enumerate(zip(likes, offsets))
    )


def _poison(buffer: torch.Tensor, reference: torch.Tensor | None) -> torch.Tensor:
    if buffer.is_floating_point() or buffer.is_complex():
        buffer.fill_(float("nan"))
    elif buffer.dtype == torch.bool:  # either value is a result: the one the op did not give
        if isinstance(reference, torch.Tensor) and reference.shape == buffer.shape:
            buffer.copy_(reference.logical_not())
        else:
            buffer.fill_(True)
    else:
        with contextlib.suppress(TypeError, RuntimeError):  # dtypes without integer limits stay as they are
            buffer.fill_(torch.iinfo(buffer.dtype).max)
    return buffer


def resolve(
    graph: torch.fx.Graph,
    values: Mapping[str, Any],
    constant_nodes: frozenset[str],
    out_variants: OutVariantRegistry,
    *,
    serve: bool = False,
) -> dict[str, Resolution]:
    """Resolve every ``call_function`` node of ``graph``, starting from ``values`` (every
    placeholder and ``get_attr`` node's real value). ``constant_nodes`` are the nodes whose value
    never changes between runs (parameters, buffers and constants that no op writes); ``serve``:
    find what the slab can serve of fallbacks (:mod:`srbench.static.serving`)."""
    return Resolver(graph, values, constant_nodes, out_variants, serve).run()
