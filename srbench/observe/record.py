"""Every allocation and free of one run, each attributed to the graph node that caused it.

The runtime under observation marks each node's work with a ``torch.profiler.record_function``
range named :func:`node_label` (the eager runner of :mod:`srbench.observe.eager` wraps every
node; srbench's static runtime has an observed variant of its generated code). The profiler,
with ``profile_memory=True``, records every allocation and free of the device as an event nested
in the op that made it, itself nested in the node's range (``experimental_event_tree()``, the tree
``torch.profiler``'s own memory profiler reads). So each allocation is attributed to the nearest
enclosing node range, with the chain of ATen ops inside that node that led to it
(``conv2d/convolution/_convolution/mkldnn_convolution``); a free is matched to its allocation by
address. Work outside every node range (the static runtime sizing its slab, the interpreter
dropping values after their last use) is attributed to the gap after the node that ran last.

Allocations made before the profiler started (inputs, parameters, a slab kept between runs) are
not events: what is observed is what the run itself allocates.

On CUDA the profiler's events are the caching allocator's blocks (requests rounded up to 512
bytes); the allocator's own history, recorded over the same run (:mod:`srbench.observe.cuda`),
adds what each allocation requested and the segments the allocator opened for it.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from torch.profiler import ProfilerActivity, profile

NODE_PREFIX = "srbench.node:"


def node_label(name: str) -> str:
    """The ``record_function`` name that marks the work of node ``name``."""
    return NODE_PREFIX + name


@dataclass(frozen=True)
class Allocation:
    """One allocation of the run, ``nbytes`` at ``address``. ``node`` made it (inside ``ops``,
    outermost ATen op first); ``after`` is the node that ran last before it when it was made
    between nodes (then ``node`` is None). ``freed_in`` is the node during which it was freed,
    ``freed_after`` the node it was freed after (between nodes); both None when it outlived the run
    (results, or a slab kept).

    On CUDA ``nbytes`` is the caching allocator's block; ``requested_bytes`` what was asked for
    and ``reserved_change`` the segment bytes the allocator opened to serve it (its history;
    ``requested_bytes`` is None where the history does not say: on the CPU, whose allocator gives
    exactly what is asked, and caches nothing)."""

    index: int
    nbytes: int
    address: int
    node: str | None
    ops: tuple[str, ...]
    after: str | None
    freed: bool
    freed_in: str | None
    freed_after: str | None
    start_ns: int
    end_ns: int | None
    requested_bytes: int | None = None
    reserved_change: int = 0

    @property
    def requested(self) -> int:
        """Bytes the program asked for: ``requested_bytes`` where the allocator's history says, else ``nbytes``."""
        return self.nbytes if self.requested_bytes is None else self.requested_bytes


@dataclass(frozen=True)
class NodeSpan:
    """When one node ran (profiler clock)."""

    node: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class RecordedRun:
    """The allocations of one observed run, and the nodes in the order they ran."""

    device: str
    spans: tuple[NodeSpan, ...]
    allocations: tuple[Allocation, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(span.node for span in self.spans)


def _device_type(event: Any) -> str:
    return str(event.extra_fields.device.type)


def span_at(spans: Sequence[NodeSpan], time_ns: int) -> NodeSpan | None:
    """The span of ``spans`` (sorted by start) that started last at or before ``time_ns``."""
    where = bisect.bisect_right(spans, time_ns, key=lambda span: span.start_ns)
    return spans[where - 1] if where else None


def node_at(spans: Sequence[NodeSpan], time_ns: int) -> tuple[str | None, str | None]:
    """Where ``time_ns`` falls among ``spans`` (sorted by start): ``(node, None)`` inside a
    node's range, else ``(None, the node that started last before it)`` (None before the first)."""
    span = span_at(spans, time_ns)
    if span is None:
        return None, None
    return (span.node, None) if time_ns <= span.end_ns else (None, span.node)


def _is_node_range(event: Any) -> bool:
    """A node's ``record_function`` range as the host ran it. With CUDA activity the profiler
    also reports each range as a GPU annotation (a ``Kineto`` event of the same name, on the
    device's timeline): counted too, every node ran twice, at times the host's events are not
    ordered against (seen on an H200)."""
    return event.name.startswith(NODE_PREFIX) and event.tag.name != "Kineto"


def _walk(event: Any, node: str | None, ops: tuple[str, ...]) -> Iterator[tuple[Any, str | None, tuple[str, ...]]]:
    name = event.name
    if _is_node_range(event):
        node, ops = name[len(NODE_PREFIX) :], ()
    elif event.tag.name == "TorchOp" and node is not None:
        ops = (*ops, name.removeprefix("aten::"))
    yield event, node, ops
    for child in event.children:
        yield from _walk(child, node, ops)


def recorded_run(prof: profile, device: str = "cpu") -> RecordedRun:
    """The allocations a finished profiler session saw on ``device`` (``cpu`` or ``cuda``),
    attributed to node ranges; see the module docstring."""
    wanted = device.split(":")[0]
    spans: list[NodeSpan] = []
    raw: list[tuple[int, int, int, str | None, tuple[str, ...]]] = []  # (time, ptr, size, node, ops)
    session = prof.profiler
    results = session.kineto_results if session is not None else None
    if results is None:
        raise ValueError("the profiler session has not finished: no events to read")
    for root in results.experimental_event_tree():
        for event, node, ops in _walk(root, None, ()):
            if _is_node_range(event):
                spans.append(NodeSpan(event.name[len(NODE_PREFIX) :], event.start_time_ns, event.end_time_ns))
            elif event.tag.name == "Allocation" and _device_type(event) == wanted:
                fields = event.extra_fields
                raw.append((event.start_time_ns, int(fields.ptr), int(fields.alloc_size), node, ops))
    spans.sort(key=lambda span: span.start_ns)
    raw.sort(key=lambda item: item[0])

    def ran_last(time_ns: int) -> str | None:
        inside, after = node_at(spans, time_ns)
        return inside or after

    open_at: dict[int, int] = {}  # ptr -> index of the allocation live there
    made: list[dict[str, Any]] = []
    for time_ns, ptr, size, node, ops in raw:
        if size > 0:
            open_at[ptr] = len(made)
            made.append(
                {
                    "index": len(made),
                    "nbytes": size,
                    "address": ptr,
                    "node": node,
                    "ops": ops,
                    "after": None if node is not None else ran_last(time_ns),
                    "freed": False,
                    "freed_in": None,
                    "freed_after": None,
                    "start_ns": time_ns,
                    "end_ns": None,
                }
            )
        elif size < 0 and ptr in open_at:  # frees of memory allocated before the profiler are not ours
            entry = made[open_at.pop(ptr)]
            entry.update(
                freed=True,
                freed_in=node,
                freed_after=None if node is not None else ran_last(time_ns),
                end_ns=time_ns,
            )
    return RecordedRun(device, tuple(spans), tuple(Allocation(**entry) for entry in made))


@contextlib.contextmanager
def _kineto_quiet() -> Iterator[None]:
    """Keep what the profiler's C++ side prints on file descriptor 2 when it starts and stops
    (``profiler_start`` lines, a warning about memory allocated before it) off the terminal."""
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 to silence
        yield
        return
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def record(run: Callable[[], Any], device: str = "cpu") -> RecordedRun:
    """Profile one call of ``run`` (which marks its nodes with :func:`node_label` ranges) and
    return its attributed allocations. The result of ``run`` is dropped inside the profiled span,
    so the frees of whatever it returned are seen too (attributed to the gap after the last node)."""
    if not device.startswith("cuda"):
        with _kineto_quiet(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            result = run()
            del result
        return recorded_run(prof, device)
    from srbench.observe.cuda import allocator_history, with_history

    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA]
    with (
        _kineto_quiet(),
        profile(activities=activities, profile_memory=True) as prof,
        allocator_history(device) as trace,
    ):
        result = run()
        del result
    return with_history(recorded_run(prof, device), trace)


def live_bytes_over(allocations: Sequence[Allocation]) -> list[tuple[int, int]]:
    """(time, live bytes after it) at every allocation and free, in time order."""
    changes = [(a.start_ns, a.nbytes) for a in allocations]
    changes += [(a.end_ns, -a.nbytes) for a in allocations if a.end_ns is not None]
    live, series = 0, []
    for time_ns, delta in sorted(changes, key=lambda change: (change[0], change[1])):
        live += delta
        series.append((time_ns, live))
    return series
