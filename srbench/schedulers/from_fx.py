"""From a captured graph to what schedulers and multistream memory plans read.

:func:`op_graph` lists the ops that run, what each must wait for, and their costs;
:func:`tensor_uses` lists, per planned storage, the ops that touch it. Both read the lifetime
analysis (:mod:`srbench.memory.lifetimes`), which maps every node to the storage it lives in, so
aliasing is seen the same way by the memory plan and by the scheduler.

Dependencies are more than data edges. Nodes that do not run (views made once per runtime,
folded constants) are looked through to the ops that produce their inputs. Where ops share a
storage, the graph's order is kept for every write: an in-place op follows every earlier read of
the storage it writes (through any alias) and every later access follows it. Ops that draw
random numbers keep their order among themselves (they share the generator, so the order is which
numbers each draws), and opaque ops (not ATen operators) are taken to write every tensor they are
given and to have effects. Which ops draw is srbench's decision per node, made where the static
runtime resolves the graph on example values (:attr:`~srbench.static.resolve.Resolution.draws`:
an eval-mode ``dropout`` or ``lstm`` carries torch's ``nondeterministic_seeded`` tag and answers
fixed values, so it is ordered by its data only); from the graph alone (no values run) every
tagged op may draw. Placeholders whose values share a storage (two inputs that are slices of one
tensor, a buffer registered as a slice of another) are distinct nodes in the graph, so their
accesses are ordered as one storage's where :func:`shared_placeholders` names them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Mapping
from typing import Any

import torch
import torch.fx

from srbench.graph.nodes import written_arguments
from srbench.memory.concurrency import TensorUses
from srbench.memory.lifetimes import LifetimeAnalysis
from srbench.schedulers.costs import DEFAULT_COST_MODEL, CostModel, estimate_seconds
from srbench.schedulers.graph import OpGraph


def _written_arguments(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The argument nodes an op writes in place, per its schema (``Tensor(a!)``); every tensor
    argument of an opaque op."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return list(node.all_input_nodes)
    return written_arguments(node)


def _has_effects(node: torch.fx.Node, draws: Collection[str] | None) -> bool:
    """Whether ``node`` keeps its order among the ops with effects: an op that draws random
    numbers (``draws``, by name; ``None``: every op torch tags as possibly drawing), or an
    opaque callable."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return node.name in draws if draws is not None else torch.Tag.nondeterministic_seeded in target.tags
    return target is not operator.getitem


def shared_placeholders(values: Mapping[str, Any]) -> dict[str, str]:
    """Each placeholder whose tensor value shares a storage with another's (by its example
    value, which the program's input signature and the module's state keep), mapped to the first
    of them: the graph sees separate nodes where one write changes what the other reads."""
    first: dict[tuple[torch.device, int], str] = {}
    shared: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
            continue
        storage = value.untyped_storage()
        if storage.nbytes() == 0:
            continue
        owner = first.setdefault((value.device, storage.data_ptr()), name)
        if owner != name:
            shared[name] = owner
            shared.setdefault(owner, owner)
    return shared


def op_graph(
    graph: torch.fx.Graph,
    analysis: LifetimeAnalysis,
    *,
    runs: Collection[str] | None = None,
    measured: Mapping[str, float] | None = None,
    cost_model: CostModel = DEFAULT_COST_MODEL,
    estimate: Callable[[torch.fx.Node, CostModel], float] = estimate_seconds,
    draws: Collection[str] | None = None,
    shared: Mapping[str, str] | None = None,
) -> OpGraph:
    """The ops of ``graph`` that run (``runs``, default every ``call_function`` node), with
    dependencies as the module docstring says, and costs: ``measured`` seconds where given
    (prepare-time timings), else estimated from shapes. ``draws``: the ops that draw random
    numbers, as srbench decided them on example values; ``None`` where none were run (every op
    torch tags ``nondeterministic_seeded`` may draw). ``shared``: placeholders' storages that are
    one storage (:func:`shared_placeholders`)."""
    same = shared or {}
    storage_of = {node: same.get(storage, storage) for node, storage in analysis.storage_of.items()}
    produced_by: dict[str, frozenset[str]] = {}  # node -> the running ops its value comes from
    last_write: dict[str, str] = {}
    reads_since: dict[str, set[str]] = {}
    last_effect: str | None = None
    ops: list[str] = []
    deps: dict[str, frozenset[str]] = {}
    costs: dict[str, float] = {}
    for node in graph.nodes:
        inputs = node.all_input_nodes
        is_op = node.op == "call_function" and (runs is None or node.name in runs)
        if not is_op:
            produced_by[node.name] = frozenset().union(*(produced_by.get(a.name, frozenset()) for a in inputs))
            continue
        name = node.name
        needs: set[str] = set().union(*(produced_by.get(a.name, frozenset()) for a in inputs))
        read = {storage_of[a.name] for a in inputs if a.name in storage_of}
        written = {storage_of[a.name] for a in _written_arguments(node) if a.name in storage_of}
        for storage in read | written:
            if storage in last_write:
                needs.add(last_write[storage])
        for storage in written:
            needs |= reads_since.pop(storage, set())
        if _has_effects(node, draws):
            if last_effect is not None:
                needs.add(last_effect)
            last_effect = name
        for storage in read - written:
            reads_since.setdefault(storage, set()).add(name)
        for storage in written | {s for s in analysis.outputs_of.get(name, ()) if s is not None}:
            last_write[storage] = name
        needs.discard(name)
        ops.append(name)
        deps[name] = frozenset(needs)
        costs[name] = measured[name] if measured and name in measured else estimate(node, cost_model)
        produced_by[name] = frozenset({name})
    return OpGraph(tuple(ops), deps, costs)


def tensor_uses(graph: torch.fx.Graph, analysis: LifetimeAnalysis, ops: Collection[str]) -> dict[str, TensorUses]:
    """Per storage some op in ``ops`` allocates: that op, and the ops in ``ops`` that read or
    write it through any alias."""
    producer: dict[str, str] = {}
    readers: dict[str, set[str]] = {}
    for node in graph.nodes:
        if node.name not in ops:
            continue
        for storage in analysis.outputs_of.get(node.name, ()):
            if storage is not None:
                producer[storage] = node.name
        for argument in node.all_input_nodes:
            storage = analysis.storage_of.get(argument.name)
            if storage is not None:
                readers.setdefault(storage, set()).add(node.name)
    return {
        storage: TensorUses(storage, op, frozenset(readers.get(storage, set()) - {op}))
        for storage, op in producer.items()
    }
