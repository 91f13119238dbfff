"""Preparing one input signature: capture, clean-up, op resolution, lifetimes, plan, code.

A :class:`PreparedGraph` is everything about a model at one set of input shapes that does not
depend on which thread runs it: it is built once (under the module's lock) and only read after.
Runtimes bind it to their own slab (see :mod:`srbench.static.runtime`).
"""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind

from srbench.graph import CapturedGraph, capture
from srbench.memory.lifetimes import LifetimeAnalysis, analyze_lifetimes
from srbench.memory.records import TensorUsageRecord
from srbench.planners import PlanResult, plan_memory
from srbench.static.codegen import CodeWriter, NodePlan, Program
from srbench.static.errors import UnsupportedOpError
from srbench.static.options import StaticOptions
from srbench.static.out_variants import OutVariantRegistry
from srbench.static.resolve import Resolution, resolve

# Below this many seconds per call an op's cost is mostly how it is called, not its kernel.
OVERHEAD_BOUND = 50e-6


@dataclass(frozen=True)
class InputSpec:
    """One tensor input as prepared: the guard the generated code checks on every run."""

    shape: torch.Size
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device

    @classmethod
    def of(cls, tensor: torch.Tensor) -> InputSpec:
        return cls(tensor.shape, tensor.stride(), tensor.dtype, tensor.device)

    @property
    def key(self) -> tuple:
        return (self.shape, self.stride, self.dtype, _device_index(self.device))

    @property
    def guard(self) -> tuple:
        return (self.shape, self.stride, self.dtype, self.device)

    def describe(self) -> str:
        return f"{str(self.dtype).removeprefix('torch.')}{list(self.shape)} on {self.device}"


def _device_index(device: torch.device) -> int:
    """What ``Tensor.get_device()`` returns: -1 on the CPU, the index on an accelerator."""
    return -1 if device.type == "cpu" else (device.index or 0)


def input_key(inputs: Sequence[Any]) -> tuple:
    """The cache key of a call: per tensor its shape, strides, dtype and device."""
    return tuple((x.shape, x.stride(), x.dtype, x.get_device()) for x in inputs)


@dataclass(frozen=True)
class ManagedTensor:
    """A tensor of the slab (or of the output arena): a typed, strided view at ``offset`` bytes."""

    storage: str
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype

    def view_of(self, storage: torch.UntypedStorage, device: torch.device) -> torch.Tensor:
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        tensor = torch.empty(0, dtype=self.dtype, device=device)
        return tensor.set_(storage, self.offset // itemsize + self.storage_offset, self.shape, self.stride)


@dataclass(frozen=True)
class PreparedGraph:
    """A model prepared for one input signature; shared by every runtime, never modified."""

    inputs: tuple[InputSpec, ...]
    input_names: tuple[str, ...]
    captured: CapturedGraph
    analysis: LifetimeAnalysis
    plans: tuple[NodePlan, ...]
    plan: PlanResult | None
    managed: tuple[ManagedTensor, ...]
    output_plan: PlanResult | None
    output_arena: tuple[ManagedTensor, ...]
    program: Program
    device: torch.device
    seconds: float

    @property
    def key(self) -> tuple:
        return tuple(spec.key for spec in self.inputs)

    @property
    def slab_bytes(self) -> int:
        return self.plan.plan.total_bytes if self.plan else 0

    @property
    def arena_bytes(self) -> int:
        return self.output_plan.plan.total_bytes if self.output_plan else 0

    @property
    def managed_bytes(self) -> int:
        return sum(record.size for record in self.analysis.records if record.id in {m.storage for m in self.managed})

    def count(self, how: str) -> int:
        return sum(1 for plan in self.plans if plan.how == how)


def _placeholder_values(captured: CapturedGraph, model: torch.nn.Module, inputs: tuple) -> tuple[dict[str, Any], list[str], set[str]]:
    """Real values of every placeholder (the model's live parameters and buffers, so in-place
    updates reach them as in eager mode), the user-input placeholders in order, and the names of
    the constant ones."""
    exported = captured.exported
    values: dict[str, Any] = {}
    user: list[str] = []
    constant: set[str] = set()
    user_values = iter(inputs)
    for spec in exported.graph_signature.input_specs:
        name = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            values[name] = next(user_values)
            user.append(name)
            continue
        if spec.kind == InputKind.PARAMETER:
            values[name] = model.get_parameter(spec.target)
        elif spec.kind == InputKind.BUFFER:
            values[name] = model.get_buffer(spec.target)
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            values[name] = exported.constants[spec.target]
        else:
            raise UnsupportedOpError(f"input of kind {spec.kind.name}", name, "the static runtime has no value for it")
        constant.add(name)
    for node in captured.graph.nodes:
        if node.op == "get_attr":
            values[node.name] = operator.attrgetter(node.target)(captured.graph_module)
            constant.add(node.name)
    return values, user, constant


def _written_storages(graph: torch.fx.Graph, analysis: LifetimeAnalysis) -> set[str]:
    """Storages some op of the graph writes in place."""
    written = set()
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or not target._schema.is_mutable:
            continue
        for index, argument in enumerate(target._schema.arguments):
            if argument.alias_info is not None and argument.alias_info.is_write:
                value = node.args[index] if index < len(node.args) and not argument.kwarg_only else node.kwargs.get(argument.name)
                if isinstance(value, torch.fx.Node) and value.name in analysis.storage_of:
                    written.add(analysis.storage_of[value.name])
    return written


def _mutation_outputs(captured: CapturedGraph) -> dict[int, str]:
    """Outputs of a functionalized graph (``decompose``) that carry the new value of a buffer or
    an input it mutates: flat output index -> the placeholder to copy it into."""
    signature = captured.exported.graph_signature
    buffers = {spec.target: spec.arg.name for spec in signature.input_specs if spec.kind == InputKind.BUFFER}
    mutations = {}
    for index, spec in enumerate(signature.output_specs):
        if spec.kind == OutputKind.BUFFER_MUTATION:
            mutations[index] = buffers[spec.target]
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            mutations[index] = spec.target
        elif spec.kind != OutputKind.USER_OUTPUT:
            raise UnsupportedOpError(f"graph output of kind {spec.kind.name}", spec.arg.name, "the static runtime cannot return it")
    return mutations


def _geometry(value: Any) -> tuple:
    return (tuple(value.shape), value.stride(), value.storage_offset()) if isinstance(value, torch.Tensor) else ()


def _metadata_mutated(graph: torch.fx.Graph, resolutions: Mapping[str, Resolution], analysis: LifetimeAnalysis) -> set[str]:
    """Storages an in-place op changes the shape or strides of (``t_``, ``unsqueeze_``): their
    tensor objects cannot be made once and reused, so they are never managed nor static."""
    mutated = set()
    for node in graph.nodes:
        resolution = resolutions.get(node.name)
        if resolution is None or resolution.category != "inplace":
            continue
        base = node.all_input_nodes[0] if node.all_input_nodes else None
        if base is not None and _geometry(node.meta.get("val")) != _geometry(base.meta.get("val")):
            mutated.add(analysis.storage_of.get(base.name, base.name))
    return mutated


def _inplace_target(node: torch.fx.Node) -> str | None:
    schema = node.target._schema
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            value = node.args[index] if index < len(node.args) and not argument.kwarg_only else node.kwargs.get(argument.name)
            if isinstance(value, torch.fx.Node):
                return value.name
    return None


def _out_is_slower(resolution: Resolution) -> bool:
    """An out variant reachable only through a slow path (a raw ``.out`` overload, parsed
    against its schema at every call) can cost more than the allocation it saves. That only
    matters where calling overhead dominates: ops that ran under :data:`OVERHEAD_BOUND` seconds
    at prepare time use the fallback when it was clearly faster; for longer ops the kernel
    dominates, timings differ by noise, and the out variant (no allocation) is kept."""
    out, fallback = resolution.out_seconds, resolution.fallback_seconds
    if out is None or fallback is None or out > OVERHEAD_BOUND:
        return False
    return out > 1.25 * fallback + 2e-6


class _Chooser:
    """Chooses how each node runs once lifetimes are known.

    A functional op runs as out variant when enabled, all its results can live in the slab
    (intermediates) or the output arena (outputs, with ``manage_output_tensors``), and it is not
    clearly slower than the fallback; otherwise as fallback, or, if only an out variant works,
    into fresh tensors. A view or ``getitem`` whose
    inputs are fixed objects (constants, managed tensors, other such views) is made once per
    runtime instead of at every run, unless it is a graph output.
    """

    def __init__(self, captured: CapturedGraph, resolutions: Mapping[str, Resolution], analysis: LifetimeAnalysis,
                 options: StaticOptions, constant_nodes: set[str], device: torch.device):
        self.graph = captured.graph
        self.resolutions = resolutions
        self.analysis = analysis
        self.options = options
        self.device = device
        self.allowed = {record.id for record in analysis.records}
        if options.manage_output_tensors:
            self.allowed |= {record.id for record in analysis.output_records}
        self.unmanageable = _metadata_mutated(self.graph, resolutions, analysis)
        # folded results must never change: not written in place, not handed to the caller
        self.unfoldable = _written_storages(self.graph, analysis) | {r.id for r in analysis.output_records}
        self.fixed: set[str] = set(constant_nodes)  # nodes whose value object is the same at every run
        self.how: dict[str, str] = {}
        output = next(node for node in self.graph.nodes if node.op == "output")
        self.output_nodes = {node.name for node in output.all_input_nodes}

    def _can_manage(self, node: torch.fx.Node, storages: tuple[str | None, ...]) -> bool:
        meta = node.meta.get("val")
        values = list(meta) if isinstance(meta, (list, tuple)) else [meta]
        return (
            bool(storages)
            and all(s is not None and s in self.allowed and s not in self.unmanageable for s in storages)
            and all(isinstance(v, torch.Tensor) and v.device == self.device for v in values)
        )

    def _foldable(self, node: torch.fx.Node) -> bool:
        storages = self.analysis.outputs_of.get(node.name) or (self.analysis.storage_of.get(node.name),)
        return node.name not in self.output_nodes and not any(s in self.unfoldable for s in storages)

    def _may_be_static(self, node: torch.fx.Node) -> bool:
        return (
            all(arg.name in self.fixed for arg in node.all_input_nodes)
            and node.name not in self.output_nodes
            and self.analysis.storage_of.get(node.name) not in self.unmanageable
        )

    def choose(self, node: torch.fx.Node) -> NodePlan:
        resolution = self.resolutions[node.name]
        kind, category, native = resolution.kind, resolution.category, resolution.native
        if category == "skip":
            return NodePlan(node, "skip", kind, None)
        if resolution.foldable and self._foldable(node):
            self.fixed.add(node.name)
            return NodePlan(node, "constant", kind, None, constant=resolution.constant)
        if category == "functional":
            storages = self.analysis.outputs_of.get(node.name, ())
            if (
                resolution.out is not None
                and self.options.enable_out_variant
                and self._can_manage(node, storages)
                and not _out_is_slower(resolution)
            ):
                if len(storages) == 1:
                    self.fixed.add(node.name)
                return NodePlan(node, "out", kind, resolution.out, storages)
            if resolution.fallback is not None:
                return NodePlan(node, "fallback", kind, resolution.fallback, storages)
            return NodePlan(node, "out_fresh", kind, resolution.out, storages)
        if category == "getitem" and self.how.get(node.args[0].name) == "out":
            self.fixed.add(node.name)  # one of a multi-output op's managed results
            return NodePlan(node, "native", kind, native)
        if category in ("getitem", "view"):
            static = self._may_be_static(node)
            if static:
                self.fixed.add(node.name)
            return NodePlan(node, "native", kind, native, static=static)
        if category == "inplace":
            target = _inplace_target(node)
            if target in self.fixed:
                self.fixed.add(node.name)
            return NodePlan(node, "native", kind, native, inplace_of=target)
        return NodePlan(node, "native", kind, native)

    def plans(self) -> list[NodePlan]:
        result = []
        for node in self.graph.nodes:
            if node.op == "call_function":
                plan = self.choose(node)
                self.how[node.name] = plan.how
                result.append(plan)
        return result


def _managed_tensors(plans: Sequence[NodePlan], records: Sequence[TensorUsageRecord], result: PlanResult | None) -> tuple[ManagedTensor, ...]:
    if result is None:
        return ()
    wanted = {record.id for record in records}
    tensors = []
    for plan in plans:
        if plan.how != "out":
            continue
        meta = plan.node.meta["val"]
        values = list(meta) if isinstance(meta, (list, tuple)) else [meta]
        for storage, value in zip(plan.result_storages, values):
            if storage in wanted:
                tensors.append(ManagedTensor(storage, result.plan.offsets[storage], tuple(value.shape), value.stride(),
                                             value.storage_offset(), value.dtype))
    return tuple(tensors)


def _plan(records: Sequence[TensorUsageRecord], planner: str) -> PlanResult | None:
    return plan_memory(records, planner) if records else None


def prepare_graph(
    model: torch.nn.Module,
    inputs: tuple,
    options: StaticOptions,
    *,
    name: str,
    out_variants: OutVariantRegistry,
) -> PreparedGraph:
    """Prepare ``model`` for inputs shaped like ``inputs`` (see the module docstring)."""
    start = time.perf_counter()
    captured = capture(model, inputs, name=name, decompose=options.decompose)
    graph = captured.graph
    graph.eliminate_dead_code()
    values, user_inputs, constant_nodes = _placeholder_values(captured, model, inputs)
    device = inputs[0].device if inputs else torch.device("cpu")

    schema_analysis = analyze_lifetimes(graph)
    mutations = _mutation_outputs(captured)
    written = _written_storages(graph, schema_analysis) | set(mutations.values())
    probe_values = {n: (v.clone() if n in written and isinstance(v, torch.Tensor) else v) for n, v in values.items()}
    with torch.no_grad():
        resolutions = resolve(graph, probe_values, frozenset(constant_nodes - written), out_variants)
    aliases = {node: r.aliases for node, r in resolutions.items() if r.aliases}
    analysis = analyze_lifetimes(graph, aliases=aliases) if aliases else schema_analysis

    plans = _Chooser(captured, resolutions, analysis, options, constant_nodes, device).plans()
    managed_ids = {s for p in plans if p.how == "out" for s in p.result_storages}
    slab_records = [r for r in analysis.records if r.id in managed_ids]
    arena_records = [r for r in analysis.output_records if r.id in managed_ids]
    plan = _plan(slab_records, options.planner)
    output_plan = _plan(arena_records, options.planner)

    out_spec = captured.exported.call_spec.out_spec
    specs = tuple(InputSpec.of(x) for x in inputs)
    writer = CodeWriter(
        graph,
        plans,
        user_inputs,
        {n: v for n, v in values.items() if n in constant_nodes},
        out_spec,
        mutations,
        [spec.guard for spec in specs],
        plan.plan.total_bytes if (options.cleanup_activations and plan is not None) else None,
    )
    return PreparedGraph(
        inputs=specs,
        input_names=tuple(user_inputs),
        captured=captured,
        analysis=analysis,
        plans=tuple(plans),
        plan=plan,
        managed=_managed_tensors(plans, slab_records, plan),
        output_plan=output_plan,
        output_arena=_managed_tensors(plans, arena_records, output_plan),
        program=writer.write(),
        device=device,
        seconds=time.perf_counter() - start,
    )
