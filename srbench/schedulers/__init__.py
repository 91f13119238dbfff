"""Schedulers: plugins that spread a graph's ops over streams that run at the same time.

A scheduler is a callable ``schedule(graph, *, streams) -> Schedule`` registered under the
entry-point group ``srbench.schedulers`` (a third party adds one with a line in its own
``pyproject.toml``). It reads an :class:`OpGraph` (ops, dependencies, estimated costs) and
returns a :class:`Schedule` (ops per stream in order, waits between streams) using at most
``streams`` streams. :func:`schedule_graph` is the one way srbench calls a scheduler: the schedule
it returns has been checked to run every op exactly once, after every op it depends on, without
deadlock; a schedule that breaks a dependency is rejected there, naming both ops, before any op
runs.
"""

from __future__ import annotations

from typing import Any, Protocol

from srbench.registry import Registry
from srbench.schedulers.costs import DEFAULT_COST_MODEL, CostModel
from srbench.schedulers.graph import OpGraph, OpGraphError
from srbench.schedulers.schedule import CrossStreamWait, HappensBefore, Schedule, ScheduleError, check_schedule

SCHEDULERS = Registry("srbench.schedulers", "scheduler")
DEFAULT_SCHEDULER = "critical_path"


class Scheduler(Protocol):
    def __call__(self, graph: OpGraph, *, streams: int) -> Schedule: ...


def scheduler_names() -> list[str]:
    return SCHEDULERS.names()


def get_scheduler(name: str) -> Scheduler:
    return SCHEDULERS.load(name)


def schedule_graph(graph: OpGraph, scheduler: str = DEFAULT_SCHEDULER, *, streams: int, **options: Any) -> Schedule:
    """Schedule ``graph`` on at most ``streams`` streams with the named scheduler; the schedule
    is checked (:func:`check_schedule`) before it is returned. The scheduler is offered no more
    streams than ops can run at once (:meth:`OpGraph.concurrency_bound`): the others would stay
    idle, and a scheduler's work grows with the streams it weighs (critical path's with their
    square: ``streams=1024`` on five ops took 40 s, ``100000`` did not end)."""
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise ValueError(f"streams must be a positive integer, got {streams!r}")
    streams = min(streams, graph.concurrency_bound())
    result = get_scheduler(scheduler)(graph, streams=streams, **options)
    if not isinstance(result, Schedule):
        raise ScheduleError(f"scheduler {scheduler!r} returned {type(result).__name__}, not a Schedule")
    if result.num_streams > streams:
        raise ScheduleError(
            f"scheduler {scheduler!r} used {result.num_streams} streams, more than the {streams} allowed"
        )
    check_schedule(graph, result)
    return result


__all__ = [
    "DEFAULT_COST_MODEL",
    "DEFAULT_SCHEDULER",
    "SCHEDULERS",
    "CostModel",
    "CrossStreamWait",
    "HappensBefore",
    "OpGraph",
    "OpGraphError",
    "Schedule",
    "ScheduleError",
    "Scheduler",
    "check_schedule",
    "get_scheduler",
    "schedule_graph",
    "scheduler_names",
]
