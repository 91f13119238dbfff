"""The one-stream schedule: every op on stream 0, in the captured graph's order.

The baseline every multistream schedule is compared with, and what ``streams=1`` means.
"""

from __future__ import annotations

from srbench.schedulers.graph import OpGraph
from srbench.schedulers.schedule import Schedule, build_schedule

NAME = "sequential"


def schedule(graph: OpGraph, *, streams: int = 1) -> Schedule:
    return build_schedule(NAME, graph, [graph.ops])
