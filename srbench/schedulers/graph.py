"""The graph a scheduler sees: ops, what each must wait for, and what each is estimated to cost.

An :class:`OpGraph` is a plain record, independent of torch: schedulers, their validator and the
multistream memory analysis are pure functions of it (and tested on hand-made and random ones).
:mod:`srbench.schedulers.from_fx` builds one from a captured graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from srbench.schedulers.costs import DEFAULT_COST_MODEL, CostModel


class OpGraphError(ValueError):
    """An op graph that is not a DAG in the order it lists its ops; names the op."""


@dataclass(frozen=True)
class OpGraph:
    """Ops in a topological order (the captured graph's), their dependencies, their costs.

    ``deps[op]`` are the ops that must finish before ``op`` starts: the producers of its inputs
    and, where ops share storage (in-place writes, views of written tensors, ops with effects),
    the earlier accesses the graph's order puts before it. ``costs[op]`` is the op's estimated
    kernel time in seconds; ``cost_model`` says what dispatching an op, waiting across streams
    and using an extra stream cost on the machine the graph will run on.
    """

    ops: tuple[str, ...]
    deps: Mapping[str, frozenset[str]]
    costs: Mapping[str, float]
    cost_model: CostModel = field(default=DEFAULT_COST_MODEL)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for op in self.ops:
            if op in seen:
                raise OpGraphError(f"op {op!r} is listed twice")
            for dep in self.deps.get(op, ()):
                if dep not in seen:
                    raise OpGraphError(f"op {op!r} depends on {dep!r}, which does not come before it")
            seen.add(op)
        unknown = (set(self.deps) | set(self.costs)) - seen
        if unknown:
            raise OpGraphError(f"dependencies or costs given for unknown ops {sorted(unknown)[:5]}")

    def deps_of(self, op: str) -> frozenset[str]:
        return self.deps.get(op, frozenset())

    def cost(self, op: str) -> float:
        return self.costs.get(op, 0.0)

    def concurrency_bound(self) -> int:
        """The most ops that can ever run at once (1 for an empty graph): ops that may run
        together are pairwise unordered, so they hold at most one op of any chain of
        dependencies, and at most every op but those of the longest chain, plus one. Streams
        beyond this would stay idle, so schedulers are given no more (:func:`srbench.schedulers.schedule_graph`)."""
        depth: dict[str, int] = {}
        for op in self.ops:
            depth[op] = 1 + max((depth[dep] for dep in self.deps_of(op)), default=0)
        return len(self.ops) - max(depth.values(), default=0) + 1

    def successors(self) -> dict[str, list[str]]:
        """Each op's direct dependents, in the graph's order."""
        result: dict[str, list[str]] = {op: [] for op in self.ops}
        for op in self.ops:
            for dep in self.deps_of(op):
                result[dep].append(op)
        return result
