"""What one observed run did to memory, node by node.

Per node, from its attributed allocations (:mod:`srbench.observe.record`): how many it made and
their bytes; its *outputs* (what it made and was still alive when it ended: its results); its
*temporaries* (what it made and freed before it ended: workspaces no graph shows), listed by the
ATen op inside the node that made them, and ``temporary_bytes``: how far the node's own
allocations rose above its results at their peak, which is what the node adds to the run's peak
(the same quantity :mod:`srbench.estimate` estimates); and the most bytes alive in the whole run
while it ran. A node that allocates nothing (an out variant writing into a slab, a view)
shows zeros: that is how a runtime's claim of zero steady-state allocations is checked.

On CUDA the bytes are the caching allocator's blocks, as ``torch.cuda.max_memory_allocated``
counts them; ``requested_bytes`` is what the node's allocations asked for, and ``reserved_bytes``
the segments the allocator opened during the node (from its history; 0 on the CPU, whose
allocator caches nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from srbench.observe.record import Allocation, RecordedRun, live_bytes_over


@dataclass(frozen=True)
class Workspace:
    """A temporary a node's op allocated for itself: ``ops`` is the chain of ATen ops that made it."""

    node: str
    ops: tuple[str, ...]
    nbytes: int

    @property
    def op(self) -> str:
        return self.ops[-1] if self.ops else ""


@dataclass(frozen=True)
class NodeObservation:
    step: int
    node: str
    allocations: int
    allocated_bytes: int
    requested_bytes: int
    output_bytes: int
    temporary_bytes: int
    live_bytes: int
    reserved_bytes: int
    workspaces: tuple[Workspace, ...] = ()


@dataclass(frozen=True)
class Observation:
    """One run, observed. ``between_nodes`` counts allocations made outside every node (the
    runtime's own work); ``peak_bytes`` is the most bytes the run had allocated at once;
    ``reserved_bytes`` what the device's caching allocator took from the device during the run."""

    runtime: str
    model: str
    device: str
    nodes: tuple[NodeObservation, ...]
    peak_bytes: int
    allocations: int
    allocated_bytes: int
    between_nodes: int
    between_nodes_bytes: int
    reserved_bytes: int
    run: RecordedRun

    def node(self, name: str) -> NodeObservation:
        for node in self.nodes:
            if node.node == name:
                return node
        raise KeyError(f"node {name!r} was not observed in the {self.runtime} run of {self.model!r}")

    @property
    def workspaces(self) -> tuple[Workspace, ...]:
        """Every hidden workspace of the run, largest first."""
        return tuple(sorted((w for n in self.nodes for w in n.workspaces), key=lambda w: -w.nbytes))


def _local_peak(allocations: Iterable[Allocation]) -> int:
    """The most bytes of ``allocations`` alive at once."""
    changes = [(a.start_ns, a.nbytes) for a in allocations]
    changes += [(a.end_ns, -a.nbytes) for a in allocations if a.end_ns is not None]
    live = peak = 0
    for _, delta in sorted(changes, key=lambda change: (change[0], change[1])):
        live += delta
        peak = max(peak, live)
    return peak


def observe_run(run: RecordedRun, *, runtime: str, model: str) -> Observation:
    """Summarise a recorded run per node; see the module docstring."""
    series = live_bytes_over(run.allocations)
    times = [time_ns for time_ns, _ in series]
    by_node: dict[str, list[Allocation]] = {}
    for allocation in run.allocations:
        if allocation.node is not None:
            by_node.setdefault(allocation.node, []).append(allocation)
    nodes = []
    for step, span in enumerate(run.spans):
        made = by_node.get(span.node, [])
        temporaries = [a for a in made if a.freed_in == span.node]
        outputs = sum(a.nbytes for a in made if a.freed_in != span.node)
        nodes.append(
            NodeObservation(
                step=step,
                node=span.node,
                allocations=len(made),
                allocated_bytes=sum(a.nbytes for a in made),
                requested_bytes=sum(a.requested for a in made),
                output_bytes=outputs,
                temporary_bytes=max(0, _local_peak(made) - outputs),
                live_bytes=_live_during(series, times, span.start_ns, span.end_ns),
                reserved_bytes=sum(a.reserved_change for a in made),
                workspaces=tuple(Workspace(span.node, a.ops, a.nbytes) for a in temporaries),
            )
        )
    outside = [a for a in run.allocations if a.node is None]
    return Observation(
        runtime=runtime,
        model=model,
        device=run.device,
        nodes=tuple(nodes),
        peak_bytes=max((live for _, live in series), default=0),
        allocations=len(run.allocations),
        allocated_bytes=sum(a.nbytes for a in run.allocations),
        between_nodes=len(outside),
        between_nodes_bytes=sum(a.nbytes for a in outside),
        reserved_bytes=sum(a.reserved_change for a in run.allocations),
        run=run,
    )


def _live_during(series: list[tuple[int, int]], times: list[int], start: int, end: int) -> int:
    import bisect

    first = bisect.bisect_right(times, start)
    before = series[first - 1][1] if first else 0
    last = bisect.bisect_right(times, end)
    return max([before, *(live for _, live in series[first:last])])
