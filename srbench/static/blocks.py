"""Control flow as sub-blocks: ``torch.cond``, ``torch.while_loop`` and ``torch.map`` run their
sub-graphs as prepared blocks of their own.

``torch.export`` captures control flow as higher-order ops whose sub-graphs are graph modules held
as attributes of the exported graph module (``get_attr`` nodes)::

    cond(pred, true_graph, false_graph, operands)
    while_loop(cond_graph, body_graph, carried_inputs, additional_inputs)
    map_impl(body_graph, xs, args)

Called as they are, each sub-graph would run op by op as in eager, every result freshly
allocated. Here, as in PyTorch's Static Runtime (one ``BlockRunner`` per sub-block, each with its
own memory planner), each sub-graph is a :class:`~srbench.static.StaticModule` of its own: its
graph taken as captured (:mod:`srbench.graph.subgraph`), its ops resolved, its memory planned and
its code generated, under the outer module's options (a decomposed capture decomposes its
sub-graphs with it). The higher-order op's node in the outer graph is rewritten to call a
:class:`ControlFlowOp` on its data arguments only; each runtime of the outer module binds its own
runner of it (:meth:`ControlFlowOp.bind`), holding its own runtimes of the sub-blocks, so runtimes
in different threads share nothing mutable, as the outer runtimes do not.

Sub-blocks never manage their outputs (``manage_output_tensors`` is off for them, as PyTorch's
Static Runtime manages outputs in its root block only): a ``while_loop`` body's outputs are its
next iteration's inputs, a ``map`` body's are stacked after the body has run again, and a
``cond``'s are values of the outer graph, so an arena that the next call overwrites would be wrong
for all three. They run on one stream.

When they are prepared: the prepare-time dry run of the outer graph (the resolver runs each node
once on the example values) calls the op, which prepares every sub-block on the values it is given
there (both branches of a ``cond`` on its operands, a ``while_loop``'s condition and body on the
first carried values, a ``map``'s body on the first slices). Sub-block calls of another shape or
memory sharing (a loop body's outputs laid out unlike its first inputs) get a program of their own
on first sight, as any :class:`~srbench.static.StaticModule` call does.
"""

from __future__ import annotations

import dataclasses
import enum
import operator
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from srbench.graph.subgraph import Subgraph
from srbench.options import StaticOptions
from srbench.static.codegen import PerRuntime
from srbench.static.out_variants import OutVariantRegistry

if TYPE_CHECKING:
    from srbench.static.module import StaticModule


class ControlFlow(enum.Enum):
    """A higher-order op of ``torch.export`` that runs sub-graphs: the value is its label in profiles."""

    COND = "cond"
    WHILE_LOOP = "while_loop"
    MAP = "map"

    @classmethod
    def of(cls, target: object) -> ControlFlow | None:
        """The control flow a node's target is, or ``None``."""
        for op, kind in _HIGHER_ORDER_OPS:
            if target is op:
                return kind
        return None

    @property
    def block_roles(self) -> tuple[str, ...]:
        """The names of its sub-graph arguments, in argument order (they come first, except
        ``cond``'s, which follow the predicate)."""
        return _ROLES[self]


_HIGHER_ORDER_OPS = (
    (torch.ops.higher_order.cond, ControlFlow.COND),
    (torch.ops.higher_order.while_loop, ControlFlow.WHILE_LOOP),
    (torch.ops.higher_order.map_impl, ControlFlow.MAP),
)
_ROLES = {
    ControlFlow.COND: ("true_branch", "false_branch"),
    ControlFlow.WHILE_LOOP: ("condition", "body"),
    ControlFlow.MAP: ("body",),
}


class Block:
    """One sub-graph, prepared as a :class:`~srbench.static.StaticModule` on the first values it
    is given (shared by every runtime; preparing is serialised by a lock)."""

    def __init__(
        self, graph_module: torch.fx.GraphModule, options: StaticOptions, name: str, out_variants: OutVariantRegistry
    ):
        self.graph_module = graph_module
        self.options = options
        self.name = name
        self.out_variants = out_variants
        self._lock = threading.Lock()
        self._module: StaticModule | None = None

    @property
    def module(self) -> StaticModule | None:
        """The prepared sub-block, once prepared."""
        return self._module

    def prepared(self, inputs: Sequence[Any]) -> StaticModule:
        """The sub-block's module, prepared now on ``inputs`` if it was not yet."""
        with self._lock:
            if self._module is None:
                from srbench.static.module import StaticModule  # the module prepares graphs holding blocks

                self._module = StaticModule(
                    Subgraph(self.graph_module),
                    tuple(inputs),
                    self.options,
                    name=self.name,
                    out_variants=self.out_variants,
                )
            return self._module


class _BlockRunner:
    """One runtime's runner of a sub-block: the sub-block's own runtime, made on first call."""

    def __init__(self, block: Block):
        self.block = block
        self.run: Callable[..., Any] = self._first

    def _first(self, *inputs: Any) -> Any:
        self.run = self.block.prepared(inputs).runtime().run_within
        return self.run(*inputs)

    def __call__(self, *inputs: Any) -> Any:
        return self.run(*inputs)


class ControlFlowOp(PerRuntime):
    """What a control-flow node calls instead of its higher-order op: the op's data arguments in,
    its results out, with eager's semantics (``torch._higher_order_ops``' dense implementations:
    a ``while_loop`` that never runs its body returns copies of its inputs, ``map`` stacks the
    body's results along a new first dimension). Calling it directly (the prepare-time dry run)
    prepares every sub-block on the values given, then runs once."""

    def __init__(self, kind: ControlFlow, blocks: Sequence[Block]):
        self.kind = kind
        self.blocks = tuple(blocks)
        self.__name__ = kind.value  # the node's kind in profiles (see srbench.static.calls.op_kind)

    def __repr__(self) -> str:
        return f"ControlFlowOp({self.kind.value}: {', '.join(block.name for block in self.blocks)})"

    def __call__(self, *arguments: Any) -> Any:
        for block in self.blocks:
            block.prepared(self._block_inputs(*arguments))
        return self.bind()(*arguments)

    def _block_inputs(self, *arguments: Any) -> tuple[Any, ...]:
        """What the sub-blocks are first called with, from the op's data arguments."""
        if self.kind is ControlFlow.COND:
            _, operands = arguments
            return tuple(operands)
        if self.kind is ControlFlow.WHILE_LOOP:
            carried, additional = arguments
            return (*carried, *additional)
        xs, args = arguments
        if not xs or xs[0].shape[0] == 0:
            raise ValueError(f"{self!r}: torch.map over an empty first dimension")
        return (*(x[0] for x in xs), *args)

    def bind(self) -> Callable[..., Any]:
        """A runner for one runtime, with runtimes of its own for the sub-blocks."""
        runners = [_BlockRunner(block) for block in self.blocks]
        if self.kind is ControlFlow.COND:
            return _cond(*runners)
        if self.kind is ControlFlow.WHILE_LOOP:
            return _while_loop(*runners)
        return _map(*runners)


def _cond(true_branch: _BlockRunner, false_branch: _BlockRunner) -> Callable[..., Any]:
    def cond(pred: Any, operands: Sequence[Any]) -> Any:
        return (true_branch if pred else false_branch)(*operands)

    return cond


def _while_loop(condition: _BlockRunner, body: _BlockRunner) -> Callable[..., Any]:
    def while_loop(carried: Sequence[Any], additional: Sequence[Any]) -> Any:
        values = tuple(carried)
        if not condition(*values, *additional):
            return tuple(value.clone() if isinstance(value, torch.Tensor) else value for value in values)
        while True:
            values = body(*values, *additional)
            if not condition(*values, *additional):
                return values

    return while_loop


def _map(body: _BlockRunner) -> Callable[..., Any]:
    def map_(xs: Sequence[torch.Tensor], args: Sequence[Any]) -> Any:
        results = [body(*(x[i] for x in xs), *args) for i in range(xs[0].shape[0])]
        return tuple(torch.stack(column) for column in zip(*results))

    return map_


def control_flow_blocks(
    graph_module: torch.fx.GraphModule, options: StaticOptions, *, name: str, out_variants: OutVariantRegistry
) -> tuple[ControlFlowOp, ...]:
    """Rewrite every ``cond``, ``while_loop`` and ``map`` node of ``graph_module``'s graph (in
    place) to call a :class:`ControlFlowOp` on its data arguments, its sub-graphs made into
    :class:`Block`\\ s under ``options`` with unmanaged outputs on one stream. Nodes of another
    argument layout are left as they are (they run the higher-order op itself, unplanned).
    The ``get_attr`` nodes of the sub-graphs are left for dead-code elimination."""
    # the sub-graphs of a decomposed capture come decomposed with it
    block_options = dataclasses.replace(options, manage_output_tensors=False, streams=1, decompose=False)
    found = []
    for node in graph_module.graph.nodes:
        kind = ControlFlow.of(node.target) if node.op == "call_function" else None
        if kind is None or node.kwargs:
            continue
        roles = kind.block_roles
        first = 1 if kind is ControlFlow.COND else 0
        graphs = node.args[first : first + len(roles)]
        data = node.args[:first] + node.args[first + len(roles) :]
        if len(data) != 2 or not all(isinstance(g, torch.fx.Node) and g.op == "get_attr" for g in graphs):
            continue
        blocks = [
            Block(
                operator.attrgetter(str(g.target))(graph_module),
                block_options,
                f"{name}.{node.name}.{role}",
                out_variants,
            )
            for g, role in zip(graphs, roles)
        ]
        op = ControlFlowOp(kind, blocks)
        node.target = op
        node.args = data
        found.append(op)
    return tuple(found)
