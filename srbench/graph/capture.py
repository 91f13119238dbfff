"""Capture a model as an ATen-level graph with :func:`torch.export.export`.

Everything downstream (lifetime analysis, planners, the static runtime) reads this graph and the
FakeTensor metadata on its nodes (``node.meta["val"]``: shape, dtype, strides, storage size), so
memory can be planned without allocating anything. Capture is non-strict: the model's Python runs
once under fake tensors, which accepts far more models than TorchDynamo's strict tracing.
"""

from __future__ import annotations

import copy
import enum
import inspect
import itertools
import operator
import os
import re
import sysconfig
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch.export import ExportedProgram
from torch.export._remove_effect_tokens_pass import _remove_effect_tokens
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree

from srbench.formatting import error_summary
from srbench.graph.ambient_autocast import ambient_autocast, ambient_autocast_reason
from srbench.graph.argument_changes import argument_changes, changed_arguments_reason, resized_argument_reason
from srbench.graph.buffer_writes import sub_module_buffers_written
from srbench.graph.capture_logs import held_while_capturing
from srbench.graph.eager_paths import eager_inference_paths
from srbench.graph.function_caches import function_caches_kept
from srbench.graph.generators import explicit_generator, generator_argument, lifted_generator
from srbench.graph.grad_switches import DROPPED_GRAD_SWITCH, dropped_grad_switches
from srbench.graph.module_snapshot import module_kept
from srbench.graph.nodes import enables_grad, written_arguments
from srbench.graph.state_names import lowered_with_own_names
from srbench.graph.transform_levels import transform_levels_kept
from srbench.inputs import Inputs

# torch.export patches process-wide state (nn.Module attribute access, a tracing mode stack)
# while it traces: two captures at once corrupt each other, so srbench captures one at a time.
_EXPORT_LOCK = threading.Lock()

_aten = torch.ops.aten
# Linear-algebra ops whose decomposition splits off their error check (``linalg_inv`` becomes
# ``linalg_inv_ex`` and ``_linalg_check_errors`` on its ``info``). Lowering keeps them whole:
# torch 2.11's lowering dropped that check (a singular matrix gave NaN where eager raises; seen on
# the GPU machine), and each has an out overload of its own, one call instead of two.
_CHECKED_LINALG_OPS = (
    _aten.linalg_inv.default,
    _aten.linalg_cholesky.default,
    _aten.linalg_solve.default,
    _aten.linalg_lu_factor.default,
    _aten.linalg_ldl_factor.default,
)


class CaptureError(RuntimeError):
    """``torch.export`` could not capture a model; the message names the model and the reason, and
    ``source`` the line of the model's code where capture stopped (``file:line `code```), when known."""

    def __init__(self, model: str, reason: str, source: str | None = None):
        where = f" at {source}" if source else ""
        super().__init__(f"cannot capture model {model!r}{where}: {reason}")
        self.model = model
        self.reason = reason
        self.source = source

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None]]:
        """Made again from its parts, not its message (``copy`` and ``pickle`` give it its
        arguments, and ``__init__`` takes these)."""
        return type(self), (self.model, self.reason, self.source)


# Frames under these folders are machinery (torch, srbench, the standard library), not the model's code.
_MACHINERY = tuple(
    os.path.join(os.path.abspath(folder), "")
    for folder in (
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(__file__)),
        sysconfig.get_paths()["stdlib"],
    )
)


# How torch's data-dependent error begins where Python asked for a concrete int, not a branch's bool.
_CONCRETE_INT = "Could not extract specialized integer from data-dependent expression"
# How export's error begins where forward made a tensor it lifts as a constant it cannot fill: a
# parameter's, buffer's or input's ``.data`` (read or written) in forward makes one
_FAKE_CONSTANT = "We found a fake tensor in the exported program constant's list"


def model_source_line(error: BaseException) -> str | None:
    """``file:line `code``` of the innermost frame of ``error``'s traceback that is the model's own
    code (not torch's, not srbench's), or ``None``. In non-strict export the model's Python runs
    as is, so its frames are in the traceback."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        filename = os.path.abspath(frame.filename)
        if frame.filename.startswith("<") or filename.startswith(_MACHINERY):
            continue
        code = (frame.line or "").strip()
        return f"{frame.filename}:{frame.lineno}" + (f" `{code}`" if code else "")
    return None


def _reason(error: BaseException) -> str:
    """Why ``torch.export`` stopped, in one line; a branch on a tensor's value says what to do.
    A value read from a tensor and made a plain Python int (``int(x.item())``) is told apart from a
    branch: export could keep the value as the symbolic int ``.item()`` returns (a slice or a size
    takes it), and only the conversion asks for a concrete number, so the remedy is not
    ``torch.cond`` but to leave the conversion out (or, for a loop, ``torch.while_loop``)."""
    if isinstance(error, GuardOnDataDependentSymNode) and str(error).startswith(_CONCRETE_INT):
        return (
            "the model's Python needs a tensor's value as a plain Python int (int() of .item(), "
            "range() of a tensor, an index), which a captured graph cannot hold; where the value only "
            "slices or sizes tensors, use it as .item() returns it (export keeps it symbolic: leave "
            "the int() out), loop with torch.while_loop, or decide outside the model "
            f"({error_summary(error)})"
        )
    if isinstance(error, GuardOnDataDependentSymNode):
        return (
            "the model's Python reads a tensor's value to decide what to run (a branch, a loop or a "
            "size taken from data), which a captured graph cannot hold; write the branch with "
            f"torch.cond (loops: torch.while_loop), or decide outside the model ({error_summary(error)})"
        )
    if str(error).startswith(_FAKE_CONSTANT):
        return (
            "forward makes a tensor that export cannot trace back to the model's parameters, buffers or "
            "inputs and lifts as a constant it cannot fill; most often a tensor's .data (read or written "
            "in place: self.weight.data, x.data): use the tensor itself (.detach() where a detached value "
            f"is meant, an in-place write under torch.no_grad()) ({error_summary(error)})"
        )
    if isinstance(error, NotImplementedError) and "Generator" in str(error):
        # torch 2.11's export refuses a generator outright
        return f"{explicit_generator()} ({error_summary(error)})"
    return error_summary(error)


def _own_call_reason(model: torch.nn.Module, inputs: Inputs) -> str | None:
    """Why export refused a model whose class has a ``__call__`` of its own that takes other
    arguments than ``forward`` (a wrapper filling in an argument before ``nn.Module.__call__``),
    or ``None``. Export binds the call's arguments to ``forward``'s signature before it calls
    the model (through its ``__call__``, which it does run), and its ``TypeError`` ("missing a
    required argument: 'bias'") named an argument the user's call never had."""
    if type(model).__call__ is torch.nn.Module.__call__:
        return None
    try:
        inspect.signature(model.forward).bind(*inputs.args, **inputs.kwargs)
    except TypeError as error:
        return (
            f"{type(model).__name__} has a __call__ of its own, and torch.export binds the call's "
            f"arguments to forward's signature, which does not take them ({error}); give forward the "
            "arguments __call__ takes, or prepare a module whose forward makes the call"
        )
    return None


@dataclass(frozen=True)
class CapturedGraph:
    """An exported model: the program, its ATen-level graph module and the inputs it was traced with.

    ``graph_module`` is ``exported.graph_module``: it takes parameters, buffers and lifted constants
    before the user inputs (in the order of ``exported.graph_signature.input_specs``) and returns a
    flat tuple; ``exported.call_spec.out_spec`` rebuilds the model's own output structure.
    """

    name: str
    exported: torch.export.ExportedProgram
    graph_module: torch.fx.GraphModule
    example_inputs: Inputs
    # the user outputs (by position among them) that eager returns as a parameter or buffer or a
    # view of one, told from the graph export traced: lowering (``decompose``) makes a buffer
    # written in place and returned (``self.count += 1; return self.count``) look like one
    # assigned anew (``self.ema = ...; return self.ema``), whose output is a tensor of its own
    returns_state: frozenset[int] = frozenset()
    # the buffers (by qualified name) eager assigns anew at every call (``self.ema = ...``, a new
    # tensor in the module's table where ``self.count += 1`` writes the one it has), which the
    # export graph writes into the buffer (``copy_``) as it does written ones; told by the eager
    # call preparing makes (srbench.graph.attribute_state), empty where there was none
    assigned_state: frozenset[str] = frozenset()
    # whether the program is torch's lowering to core ATen of export's (``decompose``, where
    # applied: see _kept_unlowered)
    lowered: bool = False

    @property
    def graph(self) -> torch.fx.Graph:
        return self.graph_module.graph

    def copy(self) -> CapturedGraph:
        """This capture with a graph, graph module and signature of its own, which preparing may
        change (rewrites, dead code removed) while this one stays as captured: the static runtime
        prepares its candidate programs (rewrites or none, lean attention or fused layers) from one
        capture, where each ran ``torch.export`` again (about 1.2 s a capture of the zoo's
        ``transformer_encoder``; a copy takes milliseconds). The tensors (parameters, buffers,
        constants, inputs), the nodes' metadata (fake tensors, read only) and the call structure are
        shared, not copied."""
        exported = self.exported
        tensors = (
            *exported.state_dict.values(),
            *exported.constants.values(),
            *exported.graph_module.parameters(),
            *exported.graph_module.buffers(),
            *pytree.tree_leaves(exported.example_inputs),
            *self.example_inputs.tensors(),
        )
        shared = (*tensors, exported.module_call_graph, exported.range_constraints)
        copied = copy.deepcopy(exported, {id(value): value for value in shared})
        renamed = False
        for original, node in zip(self.graph.nodes, copied.graph.nodes):
            if node.name != original.name:  # fx renames a node named as a builtin ('input' -> 'input_1')
                node.name, renamed = original.name, True  # the name the signature gives
        if renamed:
            copied.graph_module.recompile()
        return replace(self, exported=copied, graph_module=copied.graph_module)


def _outputs_sharing_state(exported: ExportedProgram) -> frozenset[int]:
    """The positions among ``exported``'s user outputs of those sharing memory with a parameter
    or buffer (its fake values share a storage)."""

    def storage(node: object) -> StorageWeakRef | None:
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            return None
        return StorageWeakRef(value.untyped_storage())

    placeholders = {node.name: node for node in exported.graph.nodes if node.op == "placeholder"}
    state_kinds = (InputKind.PARAMETER, InputKind.BUFFER)
    state = {storage(placeholders[spec.arg.name]) for spec in exported.graph_signature.input_specs
             if spec.kind in state_kinds and spec.arg.name in placeholders} - {None}  # fmt: skip
    output = next(node for node in exported.graph.nodes if node.op == "output")
    user = [value for value, spec in zip(output.args[0], exported.graph_signature.output_specs)
            if spec.kind == OutputKind.USER_OUTPUT]  # fmt: skip
    return frozenset(position for position, value in enumerate(user) if storage(value) in state)


class Lowering(enum.Enum):
    """Which of torch's lowerings of an exported program failed (see :func:`_lowering_reason`)."""

    CORE_ATEN = "torch's lowering to core ATen (decompose=True)"
    FUNCTION_TRANSFORMS = (
        "torch's retrace of the model's torch.func transforms at the ATen level (needed to run them op by op)"
    )

    @property
    def lower(self) -> Callable[[ExportedProgram], ExportedProgram]:
        """The lowering itself."""
        return _decomposed if self is Lowering.CORE_ATEN else _retraced

    @property
    def advice(self) -> str:
        """What the user can do about it: only the first is the user's choice."""
        if self is Lowering.CORE_ATEN:
            return "; the model can be prepared without decompose"
        return "; torch.export captures the transform, but srbench cannot run it until torch's retrace succeeds"


def _lowered(name: str, exported: ExportedProgram, lowering: Lowering) -> ExportedProgram:
    """``exported`` after torch's ``lowering``, refused where it fails (the model's code ran
    fine: torch's own lowering did not) or where it drops an output the model answers with
    (:func:`_dropped_outputs`). Where the core-ATen lowering fails on a graph holding
    ``torch.func`` transforms, its advice to prepare without ``decompose`` holds only if torch's
    retrace of them succeeds, so that retrace is tried first and its refusal given where it fails
    too (S5's nested ``vmap`` failed both ways, and was told it could be prepared without)."""
    traced = _user_outputs(exported)
    try:
        lowered = _without_effect_tokens(lowered_with_own_names(exported, lowering.lower))
    except Exception as error:  # torch raises many types here
        if lowering is Lowering.CORE_ATEN and _transforms_functions(exported.graph):
            _lowered(name, exported, Lowering.FUNCTION_TRANSFORMS)  # what preparing without decompose meets
        raise CaptureError(name, _lowering_reason(error, lowering)) from error
    if dropped := _dropped_outputs(traced, _user_outputs(lowered)):
        raise CaptureError(name, _dropped_reason(dropped, lowering, exported.graph))
    return lowered


def _user_outputs(exported: ExportedProgram) -> list[object]:
    """What the graph signature says each user output is (a tensor, a symbolic int, a constant)."""
    specs = exported.graph_signature.output_specs
    return [spec.arg for spec in specs if spec.kind == OutputKind.USER_OUTPUT]


def _dropped_outputs(traced: list[object], lowered: list[object]) -> list[int]:
    """The positions among the user outputs of those export traced as tensors that torch's
    lowering made constants. Its retrace at the ATen level keeps no forward-mode AD: a tangent
    unpacked in ``forward`` (``torch.autograd.forward_ad.unpack_dual``), a tensor as export
    traced it, is ``None`` after it, and srbench answered ``None`` where eager answers the
    tangent."""
    return [position for position, (before, after) in enumerate(zip(traced, lowered))
            if isinstance(before, TensorArgument) and not isinstance(after, TensorArgument)]  # fmt: skip


def _dropped_reason(positions: list[int], lowering: Lowering, graph: torch.fx.Graph) -> str:
    """Why a model is refused whose outputs at ``positions`` torch's ``lowering`` dropped, naming
    forward-mode AD where the graph holds it (export's ``_make_dual`` calls): then no lowering
    keeps them, and the graph as export traced it cannot run op by op (its dual level exists only
    while the graph runs in order), so no option set would do."""
    dropped = f"{lowering.value} makes the model's output(s) {positions} None where export traced a tensor"
    if any(node.target is _aten._make_dual.default for node in graph.nodes):  # every lowering drops them
        return f"{dropped}: forward-mode AD in forward (torch.autograd.forward_ad), whose tangents it does not keep"
    return f"{dropped}, so srbench would answer otherwise than eager{lowering.advice}"


def _lowering_reason(error: BaseException, lowering: Lowering) -> str:
    """Why torch's ``lowering`` failed on a model ``torch.export`` captured: the error and the
    decomposition it names (``take`` of a 0-d tensor reads its index's value in
    ``_decomp/decompositions.py``), not the model's code, which :func:`_reason` would blame."""
    where = re.search(r"Caused by: \(([^)]*)\)", str(error))
    at = f" in torch's decomposition at {where.group(1)}" if where else ""
    return f"{lowering.value} failed{at}: {error_summary(error)}{lowering.advice}"


def _decomposed(exported: ExportedProgram) -> ExportedProgram:
    """``exported`` lowered to core ATen; where that fails, lowered again with
    ``scaled_dot_product_attention`` kept whole (it then runs as eager runs it). Its decomposition
    gives its result other strides than the captured graph has (pytorch/pytorch#136543), and a
    ``view`` after it then fails: GPT-2 at batch 2 with a padding mask could not be captured.
    Dropout out of training is lowered as an alias of its input
    (:func:`_dropout_out_of_training_as_alias`)."""
    try:
        return _dropout_out_of_training_as_alias(exported).run_decompositions(_decomposition_table())
    except Exception:  # torch raises many types here; the second lowering raises its own
        return exported.run_decompositions(_decomposition_table(_aten.scaled_dot_product_attention.default))


def _retraced(exported: ExportedProgram) -> ExportedProgram:
    """``exported`` retraced at the ATen level without decompositions (see :func:`_transforms_functions`)."""
    return _dropout_out_of_training_as_alias(exported).run_decompositions({})


def _kept_unlowered(exported: ExportedProgram) -> bool:
    """Whether ``decompose`` leaves the capture as export traced it, because the lowering would
    change the model's answer: writes through unmarked views
    (:func:`_writes_through_unmarked_views`), or grad mode turned on within (an ``enable_grad``
    block, :func:`srbench.graph.nodes.enables_grad`). Exported under ``no_grad``, that block is a
    ``wrap_with_set_grad_enabled(True, ...)`` sub-module, which torch's lowering fails on ('list
    index out of range'); exported with grad on, the lowered program has no grad-mode calls left,
    so the block's results lost their history (they require grad in eager, even under
    ``no_grad``) and results outside it would have gained one."""
    return _writes_through_unmarked_views(exported.graph) or enables_grad(exported.graph_module)


def _writes_through_unmarked_views(graph: torch.fx.Graph) -> bool:
    """Whether an op writes in place a result of an op whose schema returns a list without alias
    annotations (or a view of such a result): ``unsafe_split`` and ``unsafe_chunk`` return views
    of their input all the same, and torch's lowering, which takes them at their schema's word
    when it functionalizes the graph, copies them, so the write no longer reached the input
    (``ep.run_decompositions()`` disagrees with eager there). Such a capture is not lowered: the
    graph export traced gives eager's answer, as for a lowering that fails."""
    for node in graph.nodes:
        target = node.target
        if not isinstance(target, torch._ops.OpOverload) or not any(
            isinstance(r.type, torch.ListType) and r.alias_info is None for r in target._schema.returns
        ):
            continue
        pending = [user for user in node.users if user.target is operator.getitem]
        while pending:
            result = pending.pop()
            for user in result.users:
                if result in written_arguments(user):
                    return True
                if _is_view(user):
                    pending.append(user)
    return False


def _transforms_functions(graph: torch.fx.Graph) -> bool:
    """Whether the graph holds ``torch.func`` transforms as export's pre-dispatch calls
    (``torch.vmap`` in forward: ``_vmap_increment_nesting``, ``_add_batch_dim``, ...). Their ops
    take tensors batched at a functorch level that exists only while the graph runs in order,
    and srbench runs and checks ops one at a time while preparing: every such model failed to
    prepare ("your tensor may have escaped from inside a function being vmapped"). Such a graph
    is retraced at the ATen level without decompositions (``run_decompositions({})``), where the
    batching rules have made plain ops of them (a stacked ``matmul`` for ``vmap`` over
    ``linear``)."""
    return any(getattr(node.target, "__module__", None) == _FUNCTORCH_CALLS for node in graph.nodes)


_FUNCTORCH_CALLS = "torch._functorch.predispatch"


def _is_view(node: torch.fx.Node) -> bool:
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or not target._schema.returns:
        return False
    info = target._schema.returns[0].alias_info
    return info is not None and not info.is_write


def _dropout_out_of_training_as_alias(exported: ExportedProgram) -> ExportedProgram:
    """``exported`` with each ``dropout(x, p, train)`` that eager answers with ``x`` itself made
    ``alias(x)``, in place: out of training, at ``p == 0``, or on an empty ``x``. torch's
    lowering makes those ``x.clone()`` (it decomposes dropout whatever the table says: its schema
    claims a fresh result), so under ``decompose`` an ``nn.Dropout``'s output in eval no longer
    shared memory with its input as eager's does, and cost a copy. ``alias`` is a view, as core
    ATen as ``clone``."""
    graph = exported.graph_module.graph
    changed = False
    for node in graph.nodes:
        if node.target is not _aten.dropout.default:
            continue
        arguments = {**dict(zip(("input", "p", "train"), node.args)), **node.kwargs}
        value = node.meta.get("val")
        empty = isinstance(value, torch.Tensor) and any(isinstance(n, int) and n == 0 for n in value.shape)
        if arguments.get("train") is False or arguments.get("p") == 0 or empty:
            node.target, node.args, node.kwargs = _aten.alias.default, (node.args[0],), {}
            changed = True
    if changed:
        exported.graph_module.recompile()
    return exported


def _decomposition_table(*kept_whole: torch._ops.OpOverload) -> dict:
    """torch's core-ATen decompositions less :data:`_CHECKED_LINALG_OPS` and ``kept_whole``."""
    table = torch.export.default_decompositions()
    for op in (*_CHECKED_LINALG_OPS, *kept_whole):
        table.pop(op, None)
    return table


def _without_effect_tokens(exported: ExportedProgram) -> ExportedProgram:
    """``exported`` with its effect tokens removed: ``run_decompositions()`` threads a token
    through ops with side effects (``aten._print`` becomes ``with_effects(token, aten._print, ...)``),
    a graph input and output that hold no data. The op itself is kept, called directly, so its
    effect still happens at every call as in eager."""
    if not any(spec.kind == InputKind.TOKEN for spec in exported.graph_signature.input_specs):
        return exported
    return _remove_effect_tokens(exported)


def refuse_uninitialized(model: torch.nn.Module, *, name: str) -> None:
    """Raise :class:`CaptureError` naming the first parameter or buffer a lazy module has not
    made yet (``nn.LazyLinear`` before its first call): no program can be made without its shape,
    and srbench's own checks, reading every tensor's shape and storage before the capture, failed
    on it with torch's ``RuntimeError`` about ``load_state_dict`` instead of a refusal."""
    tensors = itertools.chain(
        model.named_parameters(remove_duplicate=False), model.named_buffers(remove_duplicate=False)
    )
    lazy = next((qualified for qualified, tensor in tensors if torch.nn.parameter.is_lazy(tensor)), None)
    if lazy is not None:
        raise CaptureError(
            name,
            f"{lazy!r} is not initialized (a lazy module's parameter or buffer, made at its first call): "
            "call the model once on an example batch before preparing it, as torch's lazy modules ask",
        )


def capture(
    model: torch.nn.Module, example_inputs: Inputs | tuple, *, name: str = "model", decompose: bool = False
) -> CapturedGraph:
    """Export ``model`` at ``example_inputs`` (static shapes) to an ATen-level graph.

    ``example_inputs`` is one call (:class:`~srbench.inputs.Inputs`: positional and keyword
    arguments, any pytrees of tensors and scalars), or a tuple of positional arguments.

    ``decompose`` lowers the graph to core ATen (``run_decompositions()``): every op then has an
    ``.out`` overload, at the price of more, smaller ops and a functionalized graph. Without it the
    graph keeps export's pre-dispatch ops, including in-place ops and views, which the lifetime
    analysis handles from the op schemas.

    Raises :class:`CaptureError` naming the model, the reason ``torch.export`` gave and the line
    of the model's code where it stopped (a Python branch on a tensor's value, say).
    Captures are serialised process-wide (``torch.export`` is not thread-safe); other threads
    running eager modules during a capture can still disturb it.
    """
    if not isinstance(model, torch.nn.Module):
        raise CaptureError(name, f"expected a torch.nn.Module, got {type(model).__name__}")
    refuse_uninitialized(model, name=name)
    try:
        inputs = Inputs.coerce(example_inputs)
    except TypeError as error:
        raise CaptureError(name, str(error)) from None
    if (generator := generator_argument(inputs)) is not None:
        raise CaptureError(name, generator)
    if (autocast := ambient_autocast()) is not None:
        raise CaptureError(name, ambient_autocast_reason(autocast))
    if not torch.is_inference_mode_enabled() and any(tensor.is_inference() for tensor in inputs.tensors()):
        # made under torch.inference_mode: export traces outside it, where a model writing its
        # input may not update an inference tensor; a copy (memory sharing kept) is a normal one
        inputs = inputs.clone()
    # module_kept: what forward set on the model while export traced it (a FakeTensor attribute
    # or buffer, first-call state) is taken off again (see srbench.graph.module_snapshot);
    # sub_module_buffers_written: a sub-module's buffer assigned anew is written in the graph, as
    # export writes the root's (see srbench.graph.buffer_writes); grad_switches: a grad-mode
    # switch export drops (see srbench.graph.grad_switches); transform_levels_kept: a failure
    # inside a torch.func transform does not leave the process inside it (srbench.graph.transform_levels);
    # function_caches_kept: a library's lru_cache filled under export's fake tensors is cleared
    # (srbench.graph.function_caches); held_while_capturing: what torch writes about a failure the
    # CaptureError says anyway (srbench.graph.capture_logs); argument_changes: a list or dict of
    # the call that forward changes in Python, which the program cannot (srbench.graph.argument_changes)
    with (
        _EXPORT_LOCK,
        held_while_capturing(),
        transform_levels_kept(),
        function_caches_kept(model),
        torch.no_grad(),
        eager_inference_paths(model),
        module_kept(model),
        sub_module_buffers_written(model),
        dropped_grad_switches() as grad_switches,
    ):
        try:
            with argument_changes(model) as changed:
                exported = torch.export.export(model, inputs.args, dict(inputs.kwargs), strict=False)
        except Exception as error:  # torch.export raises many unrelated types; all mean "cannot capture"
            if changed.resized:  # export fails on some, saying only "list index out of range"
                raise CaptureError(name, resized_argument_reason(changed.resized)) from error
            reason = _own_call_reason(model, inputs) or _reason(error)
            raise CaptureError(name, reason, model_source_line(error)) from error
        if changed.containers:
            raise CaptureError(name, changed_arguments_reason(changed.containers))
        if grad_switches:
            raise CaptureError(name, DROPPED_GRAD_SWITCH)
        if (generator := lifted_generator(exported)) is not None:  # before lowering: the model's own op
            raise CaptureError(name, generator)
        returns_state = _outputs_sharing_state(exported)
        lowered = decompose and not _kept_unlowered(exported)
        if lowered:
            exported = _lowered(name, exported, Lowering.CORE_ATEN)
        elif _transforms_functions(exported.graph) and not _writes_through_unmarked_views(exported.graph):
            exported = _lowered(name, exported, Lowering.FUNCTION_TRANSFORMS)
    return CapturedGraph(name=name, exported=exported, graph_module=exported.graph_module, example_inputs=inputs,
                         returns_state=returns_state, lowered=lowered)  # fmt: skip
