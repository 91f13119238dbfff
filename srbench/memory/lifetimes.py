"""Alias and lifetime analysis: which storages of a captured graph need memory, and when.

A *storage* is what an op allocates. Views (ops whose schema return carries ``alias_info``:
``view``, ``permute``, ``slice``, ``split``...) and in-place ops (``add_``, ``copy_``: the return
aliases a mutated argument) allocate nothing; they give another name to their base's storage, so
every use of them extends the base's life. The analysis maps each node to the storage it lives in
(``storage_of``) and gives each storage one :class:`TensorUsageRecord`: produced at ``first``,
last read (by any alias) at ``last``, ``size`` bytes from the FakeTensor metadata (strides and
storage size, not just ``numel``) rounded up to the alignment.

What is not planned: graph inputs, parameters, buffers and constants (placeholders and
``get_attr`` nodes) own storage the caller provides. Storages that are, or are aliased by, a graph
output must survive the run: they are reported apart in ``output_records`` (living to the last
step) so a runtime never puts them where the next run writes. Ops that are not ATen operators
(higher-order ops, Python callables) are treated conservatively: their outputs are not planned and
may alias any of their tensor inputs, whose lives are extended accordingly. Results whose size
depends on data (``nonzero``, ``masked_select``, boolean-mask indexing, ``unique``: unbacked
symbolic sizes in the capture) are not planned either: their op allocates them at every run, as
PyTorch's Static Runtime does for ops without out variants, and views of them share that memory.

Steps are positions in ``graph.nodes`` (placeholders included), so a record's ``first`` and
``last`` point straight at the producing and last-using node.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field

import torch
import torch.fx

from srbench.memory.records import DEFAULT_ALIGNMENT, TensorUsageRecord, align_up


class LifetimeError(ValueError):
    """A graph that cannot be analysed (a node without FakeTensor metadata, say); names the node."""


@dataclass(frozen=True)
class LifetimeAnalysis:
    """Records of the storages a runtime must place, and how graph nodes map onto them.

    ``records`` are the planned intermediates (one per storage); ``output_records`` are storages
    that are, or are aliased by, graph outputs (``last`` is the final step). ``storage_of`` maps
    every tensor-valued node to the id of the storage it lives in: a planned record id, an output
    record id, or the name of the placeholder/``get_attr``/opaque node that owns memory nobody
    plans. ``outputs_of`` maps each op node to the storage ids it allocates, one per returned
    tensor in return order (``None`` where that return aliases an argument or is not a tensor); a
    multi-output op's storage ids are the names of its ``getitem`` nodes, or ``"<op>.<i>"`` for a
    result nobody reads (it still needs memory while the op writes it).
    """

    records: tuple[TensorUsageRecord, ...]
    output_records: tuple[TensorUsageRecord, ...]
    storage_of: Mapping[str, str]
    num_steps: int
    outputs_of: Mapping[str, tuple[str | None, ...]] = field(default_factory=dict)
    unplanned: frozenset[str] = frozenset()  # storage ids owned by inputs, constants or opaque ops

    @property
    def all_records(self) -> tuple[TensorUsageRecord, ...]:
        return self.records + self.output_records


def has_static_geometry(value: torch.Tensor) -> bool:
    """Whether ``value``'s sizes, strides and offset are plain integers. A result whose size
    depends on data has unbacked symbolic sizes in the capture (``u0``): no memory can be set
    aside for it ahead of the run. Nor can it be for a sparse (or otherwise non-strided) result:
    its memory is several tensors whose sizes depend on the number of stored values."""
    if value.layout != torch.strided:
        return False
    return all(isinstance(n, int) for n in (*value.shape, *value.stride(), value.storage_offset()))


def storage_nbytes(value: torch.Tensor) -> int:
    """Bytes a freshly allocated tensor like ``value`` occupies: its strided extent (or the
    storage's reported size if larger), not ``numel * itemsize``."""
    extent: int | torch.SymInt = 0
    if value.numel() != 0:
        extent = (
            int(value.storage_offset())
            + 1
            + sum((int(size) - 1) * int(stride) for size, stride in zip(value.shape, value.stride()))
        )
    nbytes = int(extent) * value.element_size()
    with contextlib.suppress(RuntimeError, NotImplementedError, TypeError):  # no storage (sparse, nested)
        nbytes = max(nbytes, int(value.untyped_storage().nbytes()))
    return nbytes


def _tensor_returns(schema: torch.FunctionSchema) -> bool:
    return any(isinstance(r.type, (torch.TensorType, torch.ListType, torch.OptionalType)) for r in schema.returns)


def _alias_argument(schema: torch.FunctionSchema, return_index: int) -> str | None:
    """The name of the argument that return ``return_index`` aliases, per the schema, if any.

    ``Tensor(a)`` / ``Tensor(a!)`` returns alias the argument annotated with the same set;
    ``Tensor(a)[]`` returns (``split``, ``unbind``) alias the argument annotated ``(a -> *)``.
    """
    returned = schema.returns[return_index]
    sets = set(returned.alias_info.before_set) if returned.alias_info is not None else set()
    for argument in schema.arguments:
        info = argument.alias_info
        if info is None:
            continue
        if sets & set(info.before_set):
            return argument.name
        if isinstance(returned.type, torch.ListType) and "*" in info.after_set:
            return argument.name
    return None


def _argument_value(node: torch.fx.Node, schema: torch.FunctionSchema, name: str) -> object:
    for index, argument in enumerate(schema.arguments):
        if argument.name == name:
            if index < len(node.args) and not argument.kwarg_only:
                return node.args[index]
            return node.kwargs.get(name)
    return None


def _tensors(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)


def _output_nodes(value: object) -> Iterator[torch.fx.Node]:
    if isinstance(value, torch.fx.Node):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _output_nodes(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _output_nodes(item)


def element_name(node: torch.fx.Node, index: int) -> str:
    """The storage id of a multi-output op's result ``index``: the name of the ``getitem`` node
    reading it, or ``"<op>.<index>"`` when nobody reads it."""
    for user in node.users:
        if user.target is operator.getitem and user.args[1] == index:
            return user.name
    return f"{node.name}.{index}"


class _Analysis:
    """One pass over the graph in order; the public entry point is :func:`analyze_lifetimes`."""

    def __init__(self, graph: torch.fx.Graph, alignment: int, aliases: Mapping[str, str], copies: Collection[str] = ()):
        self.alignment = alignment
        self.aliases = aliases
        self.copies = frozenset(copies)
        self.nodes = list(graph.nodes)
        self.step = {node: index for index, node in enumerate(self.nodes)}
        self.storage_of: dict[str, str] = {}
        self.outputs_of: dict[str, tuple[str | None, ...]] = {}
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.size: dict[str, int] = {}
        self.unplanned: set[str] = set()
        self.element_storage: dict[tuple[str, int], str] = {}  # (multi-output op, index) -> storage
        self.may_alias: dict[str, set[str]] = {}  # opaque storage -> storages it may alias
        self.is_output: set[str] = set()

    def _meta(self, node: torch.fx.Node) -> object:
        if "val" not in node.meta:
            raise LifetimeError(f"node {node.name!r} ({node.format_node()}) has no FakeTensor metadata (meta['val'])")
        return node.meta["val"]

    def _own(self, storage: str, node: torch.fx.Node, value: torch.Tensor) -> None:
        self.first[storage] = self.last[storage] = self.step[node]
        self.size[storage] = align_up(storage_nbytes(value), self.alignment)

    def _own_unplanned(self, node: torch.fx.Node, storage: str | None = None) -> None:
        """``node`` owns memory nobody plans: its own (``storage`` omitted), or one of its results."""
        if storage is None:
            storage = self.storage_of[node.name] = node.name
        self.unplanned.add(storage)
        self.first[storage] = self.last[storage] = self.step[node]

    def visit(self, node: torch.fx.Node) -> None:
        if node.op in ("placeholder", "get_attr"):
            if any(True for _ in _tensors(node.meta.get("val"))) or node.op == "get_attr":
                self._own_unplanned(node)
            return
        if node.op == "output":
            return
        if node.op != "call_function":
            raise LifetimeError(f"node {node.name!r}: unsupported fx op {node.op!r} (expected an ATen graph)")
        if node.name in self.aliases:
            base = self.aliases[node.name]
            if base not in self.storage_of:
                raise LifetimeError(
                    f"node {node.name!r} is said to alias {base!r}, which is not an earlier tensor node"
                )
            self.storage_of[node.name] = self.storage_of[base]
        elif node.target is operator.getitem:
            self._visit_getitem(node)
        elif isinstance(node.target, torch._ops.OpOverload):
            self._visit_op(node, node.target._schema)
        else:
            self._visit_opaque(node)

    def _visit_op(self, node: torch.fx.Node, schema: torch.FunctionSchema) -> None:
        if not _tensor_returns(schema):  # e.g. aten._assert_tensor_metadata: no result, no meta["val"]
            return
        value = self._meta(node)
        multi = len(schema.returns) > 1 or isinstance(schema.returns[0].type, torch.ListType)
        values = list(value) if multi and isinstance(value, (list, tuple)) else [value]
        storages: list[str | None] = []
        for index, result in enumerate(values):
            element = element_name(node, index) if multi else None
            if element is not None and element in self.aliases:  # an element found to be an argument, or a view of one
                storage = self.storage_of[self.aliases[element]]
                storages.append(None)
                self.element_storage[(node.name, index)] = storage
                continue
            alias = None if node.name in self.copies else _alias_argument(schema, min(index, len(schema.returns) - 1))
            if alias is not None:
                base = _argument_value(node, schema, alias)
                if not isinstance(base, torch.fx.Node) or base.name not in self.storage_of:
                    raise LifetimeError(
                        f"node {node.name!r}: its result aliases argument {alias!r}, which is not a tensor node"
                    )
                storage = self.storage_of[base.name]
                storages.append(None)
            elif isinstance(result, torch.Tensor):
                storage = element if element is not None else node.name
                if has_static_geometry(result):
                    self._own(storage, node, result)
                else:
                    self._own_unplanned(node, storage)
                storages.append(storage)
            else:
                storages.append(None)
                continue
            if multi:
                self.element_storage[(node.name, index)] = storage
            else:
                self.storage_of[node.name] = storage
        self.outputs_of[node.name] = tuple(storages)

    def _visit_getitem(self, node: torch.fx.Node) -> None:
        parent, index = node.args
        if not isinstance(parent, torch.fx.Node) or not isinstance(index, int):
            return
        element = self.element_storage.get((parent.name, index))
        if element is not None:  # a result the parent allocated, or an element of a list of views
            self.storage_of[node.name] = element
        elif parent.name in self.storage_of:  # an element of an opaque op's result
            self.storage_of[node.name] = self.storage_of[parent.name]

    def _visit_opaque(self, node: torch.fx.Node) -> None:
        if not any(True for _ in _tensors(node.meta.get("val"))):
            return
        self._own_unplanned(node)
        self.may_alias[node.name] = {
            self.storage_of[arg.name] for arg in node.all_input_nodes if arg.name in self.storage_of
        }

    def use(self, node: torch.fx.Node) -> None:
        """Extend the life of every storage ``node`` reads (through any alias) to its step."""
        step = self.step[node]
        for argument in node.all_input_nodes:
            storage = self.storage_of.get(argument.name)
            if storage is not None:
                self.last[storage] = max(self.last[storage], step)
        if node.op == "output":
            for output in _output_nodes(node.args):
                if output.name in self.storage_of:
                    self.is_output.add(self.storage_of[output.name])

    def propagate_opaque(self) -> None:
        """Storages an opaque op's result may alias live as long as that result, and are outputs
        if it is one; visited in reverse so chains of opaque ops propagate fully."""
        for opaque in reversed(list(self.may_alias)):
            for base in self.may_alias[opaque]:
                self.last[base] = max(self.last[base], self.last[opaque])
                if opaque in self.is_output:
                    self.is_output.add(base)

    def result(self) -> LifetimeAnalysis:
        end = len(self.nodes) - 1
        records, outputs = [], []
        for storage in sorted(self.size, key=lambda s: (self.first[s], s)):
            if storage in self.is_output:
                outputs.append(TensorUsageRecord(storage, self.first[storage], end, self.size[storage]))
            else:
                records.append(TensorUsageRecord(storage, self.first[storage], self.last[storage], self.size[storage]))
        return LifetimeAnalysis(
            records=tuple(records),
            output_records=tuple(outputs),
            storage_of=dict(self.storage_of),
            num_steps=len(self.nodes),
            outputs_of=dict(self.outputs_of),
            unplanned=frozenset(self.unplanned),
        )


def analyze_lifetimes(
    graph: torch.fx.Graph,
    *,
    alignment: int = DEFAULT_ALIGNMENT,
    aliases: Mapping[str, str] | None = None,
    copies: Collection[str] = (),
) -> LifetimeAnalysis:
    """Records of every storage ``graph`` allocates; see the module docstring for the rules.

    ``aliases`` maps node names to the argument node each returns as is although its schema
    says it allocates (``dropout`` in eval mode returns its input); a runtime that observed this
    on real values passes it so those nodes count as views. A key may name one result of a
    multi-output op (:func:`element_name`): ``broadcast_tensors`` and ``meshgrid`` return views
    of their arguments, each of another one, under schemas that say they allocate. ``copies`` names nodes whose schema
    says they return an alias but which allocate for these inputs (``reshape`` of a tensor it
    cannot view copies it): they get storages of their own.
    """
    analysis = _Analysis(graph, alignment, aliases or {}, copies)
    for node in analysis.nodes:
        analysis.visit(node)
        analysis.use(node)
    analysis.propagate_opaque()
    return analysis.result()
