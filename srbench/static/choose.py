"""How each node of a prepared graph runs, once op resolution and lifetimes are known.

:class:`Chooser` turns the resolver's findings into one :class:`NodePlan` per node: out variant
into the slab or the output arena, fallback, native (views, in-place ops), made once (static
views), folded into a constant, or skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.fx

from srbench.memory.lifetimes import LifetimeAnalysis
from srbench.options import StaticOptions
from srbench.static.codegen import NodePlan
from srbench.static.resolve import Resolution

# Below this many seconds per call an op's cost is mostly how it is called, not its kernel.
OVERHEAD_BOUND = 50e-6


def written_storages(graph: torch.fx.Graph, analysis: LifetimeAnalysis) -> set[str]:
    """Storages some op of the graph writes in place."""
    written = set()
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or not target._schema.is_mutable:
            continue
        for index, argument in enumerate(target._schema.arguments):
            if argument.alias_info is not None and argument.alias_info.is_write:
                value = (
                    node.args[index]
                    if index < len(node.args) and not argument.kwarg_only
                    else node.kwargs.get(argument.name)
                )
                if isinstance(value, torch.fx.Node) and value.name in analysis.storage_of:
                    written.add(analysis.storage_of[value.name])
    return written


def _geometry(value: Any) -> tuple:
    return (tuple(value.shape), value.stride(), value.storage_offset()) if isinstance(value, torch.Tensor) else ()


def _metadata_mutated(
    graph: torch.fx.Graph, resolutions: Mapping[str, Resolution], analysis: LifetimeAnalysis
) -> set[str]:
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
            value = (
                node.args[index]
                if index < len(node.args) and not argument.kwarg_only
                else node.kwargs.get(argument.name)
            )
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
    if resolution.out is None or not resolution.out.parses_schema:
        return False  # through a C binding an out variant costs no more than the op itself
    if out is None or fallback is None or out > OVERHEAD_BOUND:
        return False
    return out > 1.25 * fallback + 2e-6


class Chooser:
    """Chooses how each node runs once lifetimes are known.

    A functional op runs as out variant when enabled, all its results can live in the slab
    (intermediates) or the output arena (outputs, with ``manage_output_tensors``), and it is not
    clearly slower than the fallback; otherwise as fallback, or, if only an out variant works,
    into fresh tensors. A view or ``getitem`` whose
    inputs are fixed objects (constants, managed tensors, other such views) is made once per
    runtime instead of at every run, unless it is a graph output.
    """

    def __init__(
        self,
        graph: torch.fx.Graph,
        resolutions: Mapping[str, Resolution],
        analysis: LifetimeAnalysis,
        options: StaticOptions,
        constant_nodes: set[str],
        device: torch.device,
    ):
        self.graph = graph
        self.resolutions = resolutions
        self.analysis = analysis
        self.options = options
        self.device = device
        self.allowed = {record.id for record in analysis.records}
        if options.manage_output_tensors:
            self.allowed |= {record.id for record in analysis.output_records}
        self.unmanageable = _metadata_mutated(self.graph, resolutions, analysis)
        # folded results must never change: not written in place, not handed to the caller
        self.unfoldable = written_storages(self.graph, analysis) | {r.id for r in analysis.output_records}
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
