"""AITemplate's simple multistream mode: parallel steps, each a few ops with no path between them.

Each op's level is the length of the longest chain of dependencies leading to it, so ops of one
level never depend on each other. A level's ops (in graph order) are cut into steps of at most
``max_ops_per_step`` (default: the number of streams), as AITemplate's
``split_simple_multistream_parallel_ops`` does, and the i-th op of a step runs on stream i. Steps
run one after the other: every op of a step waits for every op of the previous one, which is
what makes AITemplate's lifetimes, indexed by step, safe; the multistream records of
:mod:`srbench.memory.concurrency` come out the same on such a schedule. Simple and predictable,
but blind to costs: a step lasts as long as its slowest op, and every step costs a wait.
"""

from __future__ import annotations

from srbench.schedulers.graph import OpGraph
from srbench.schedulers.schedule import Schedule, build_schedule

NAME = "parallel_steps"


def levels(graph: OpGraph) -> dict[str, int]:
    """Longest chain of dependencies before each op (0 for ops that depend on nothing)."""
    level: dict[str, int] = {}
    for op in graph.ops:
        level[op] = 1 + max((level[dep] for dep in graph.deps_of(op)), default=-1)
    return level


def schedule(graph: OpGraph, *, streams: int, max_ops_per_step: int | None = None) -> Schedule:
    cap = min(streams, max_ops_per_step or streams)
    if cap < 1:
        raise ValueError(f"max_ops_per_step must be at least 1, got {max_ops_per_step}")
    level = levels(graph)
    by_level: dict[int, list[str]] = {}
    for op in graph.ops:
        by_level.setdefault(level[op], []).append(op)
    steps = [ops[i : i + cap] for _, ops in sorted(by_level.items()) for i in range(0, len(ops), cap)]
    per_stream: list[list[str]] = [[] for _ in range(cap)]
    step_of: dict[str, int] = {}
    barrier: dict[str, list[str]] = {}
    for index, step in enumerate(steps):
        for position, op in enumerate(step):
            per_stream[position].append(op)
            step_of[op] = index
            barrier[op] = steps[index - 1] if index else []
    return build_schedule(
        NAME,
        graph,
        per_stream,
        extra_deps=barrier,
        priority=step_of.__getitem__,
        notes={"steps": len(steps), "max_ops_per_step": cap},
    )
