"""Straight-line code per stream: the one-stream code generator, cut along a schedule.

Each op's lines are the ones :class:`~srbench.static.codegen.CodeWriter` writes for it; what is
added is only where streams meet.

*Threads* (CPU): stream 0 runs in the calling thread inside ``forward``; every other stream is a
function (``stream_1``, ...) that a thread of the runtime runs. An op others wait for releases
its event (a lock taken when the run starts) after its lines; a waiting op takes and gives back
that lock before its lines, then stops if another stream failed. Values in the slab or fixed per
runtime are globals every stream sees; other values (results of fallback ops, say) that another
stream reads pass through the run's *mailbox*, a list the producer writes after making the value
and the reader reads after its wait (a slot keeps its value until the run ends). ``forward``
joins the threads before it returns, so the slab is free again once it does.

*CUDA*: one function issues every op in the schedule's order from the calling thread, switching
the current stream; stream 0 is the caller's current stream when the run begins. A waited-for op records its event
on its stream, a waiting op's stream waits for it; side streams first wait for everything the
caller queued before the run, and the caller's stream waits for every side stream at the end, so
successive runs (and their reuse of the slab) are ordered. A value made on one stream and read
on another is marked used by that stream (``record_stream``) so the caching allocator does not
hand its memory out again too early.

In both modes ``forward_profiled`` and ``forward_observed`` run the ops one after the other in the
schedule's issue order (one of the interleavings the memory plan is valid for), so per-op times
and allocations stay attributable to their ops.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

import torch

from srbench.schedulers import Schedule
from srbench.static.codegen import INDENT, CodeWriter, Entry, Hook, Program, TrackingSwitches, identifiers


class StreamMode(enum.Enum):
    """How a program's streams run: CPU threads (ATen kernels release the GIL, so kernels of
    different threads overlap while their Python dispatch takes turns), or CUDA streams issued
    from one host thread in the schedule's order."""

    THREADS = "threads"
    CUDA = "cuda"

    @classmethod
    def for_device(cls, device: torch.device) -> StreamMode:
        return cls.CUDA if device.type == "cuda" else cls.THREADS


@dataclass(frozen=True)
class StreamProgram:
    """What the runtime binds for a multistream program (see :mod:`srbench.static.stream_runner`).

    ``events``: the global name of the event of each op others wait for, in schedule order of
    their producers (``Schedule.events()``); ``workers``: the generated functions run by the
    threads of streams 1.. (threads mode); ``mailbox``: slots through which values that are not
    in the slab pass from one thread to another in a run.
    """

    schedule: Schedule
    mode: StreamMode
    events: tuple[str, ...]
    workers: tuple[str, ...] = ()
    mailbox: int = 0


@dataclass(frozen=True)
class _Crossing:
    """Where the values an op defines are read: by which ops, and by the epilogue."""

    definer: dict[str, str]  # local -> the op whose lines define it
    readers: dict[str, set[str]]  # local -> ops (other than its definer) whose lines read it
    returned: set[str]  # locals read after the last op (what the run returns, write-backs)


class _Layout(NamedTuple):
    """What both modes cut the code by: the schedule, each op's lines, the event of each
    waited-for op, what each op waits for, and where values cross streams."""

    schedule: Schedule
    lines_of: dict[str, list[str]]
    events: dict[str, str]
    waits_for: dict[str, list[str]]
    crossing: _Crossing


@dataclass(frozen=True)
class _ThreadCode:
    """Stream 0's lines (the body of ``forward``) and its view-tracking switches, the workers'
    function sources and names, the mailbox size, and the lines stream 0 reads its results from
    other streams with at the end."""

    stream_0: str
    switches_0: TrackingSwitches
    functions: tuple[str, ...]
    workers: tuple[str, ...]
    mailbox: int
    epilogue_loads: tuple[str, ...]


def _worker_name(stream: int) -> str:
    return f"stream_{stream}"


def _stream_expr(stream: int) -> str:
    return "_main" if stream == 0 else f"{Hook.SIDE_STREAM}{stream}"


class StreamCodeWriter(CodeWriter):
    """Writes a program whose ops run on a schedule's streams (see the module docstring)."""

    def assemble_streams(
        self,
        bodies: list[tuple[str, list[str]]],
        schedule: Schedule,
        mode: StreamMode,
        cleanup_slab_bytes: int | None,
    ) -> Program:
        """``bodies`` from :meth:`node_bodies`, ops in ``bodies`` exactly the scheduled ones."""
        # taken at the start and given back after the join: the graph's last slab reader need not
        # be the last to run (not even in the issue order), so nothing is released early
        self.cleanup_slab_bytes = cleanup_slab_bytes
        self.slab_layout = None
        self.bind_guards()
        lines_of = dict(bodies)
        returned, write_back, flat = self.epilogue()
        events = {producer: f"{Hook.EVENT}{i}" for i, producer in enumerate(schedule.events())}
        waits_for: dict[str, list[str]] = {}
        for wait in schedule.waits:
            waits_for.setdefault(wait.consumer, []).append(wait.producer)
        crossing = self._crossing(bodies, [returned, *write_back])
        layout = _Layout(schedule, lines_of, events, waits_for, crossing)
        serial: list[tuple[str | None, list[str]]] = [(op, lines_of[op]) for op in schedule.order]
        if write_back:
            serial.append((None, write_back))
        serial = self.with_deletes(serial, set(flat))
        profiled = self._function(serial, returned, Entry.PROFILED.value, guard=False, profile=True)
        observed = self._function(serial, returned, Entry.OBSERVED.value, guard=False, profile=False, observe=True)
        if mode is StreamMode.THREADS:
            code = self._threads(layout)
            entries = [self._threads_forward(entry, code, returned, write_back) for entry in _PLAIN]
            source = "\n".join([*entries, profiled, observed, *code.functions])
            workers, mailbox = code.workers, code.mailbox
        else:
            body, switches = self._cuda_body(layout)
            entries = [self._cuda_forward(entry, body, switches, returned, write_back, flat) for entry in _PLAIN]
            source = "\n".join([*entries, profiled, observed])
            workers, mailbox = (), 0
        streams = StreamProgram(schedule, mode, tuple(events.values()), workers, mailbox)
        return self.make_program(source, self.timed_nodes(serial), streams)

    def _crossing(self, bodies: list[tuple[str, list[str]]], epilogue: list[str]) -> _Crossing:
        definer: dict[str, str] = {}
        readers: dict[str, set[str]] = {}
        for op, lines in bodies:  # graph order: a local's first mention is where it is made
            for token in set().union(*(identifiers(line) for line in lines)) & self.locals:
                if token in definer:
                    readers.setdefault(token, set()).add(op)
                else:
                    definer[token] = op
        returned = set().union(*(identifiers(line) for line in epilogue)) & self.locals if epilogue else set()
        return _Crossing(definer, readers, returned)

    # -- threads --------------------------------------------------------------------------------

    def _threads(self, layout: _Layout) -> _ThreadCode:
        schedule, lines_of, events, waits_for, crossing = layout
        stream_of = schedule.stream_of()
        slots: dict[str, int] = {}
        for local, op in crossing.definer.items():
            home = stream_of[op]
            elsewhere = {stream_of[reader] for reader in crossing.readers.get(local, ())} - {home}
            if elsewhere or (home != 0 and local in crossing.returned):
                slots[local] = len(slots)
        n = len(self.user_inputs)
        unpack = ", ".join(f"in_{i}" for i in range(n)) + ("," if n == 1 else "")
        functions: list[str] = []
        stream_0 = INDENT + "    pass"  # a graph without ops (its outputs are its inputs) has no stream 0
        switches_0 = TrackingSwitches(self, on=False)
        for stream, ops in enumerate(schedule.streams):
            worker = stream != 0
            stop = f"if {Hook.STREAMS}.failed: return" if worker else f"{Hook.STREAMS}.check()"
            switches = TrackingSwitches.along(self, ops)  # each thread switches its own dispatch state
            chunks: list[tuple[str | None, list[str]]] = []
            present: set[str] = set()
            for op in ops:
                pre: list[str] = []
                for producer in waits_for.get(op, ()):
                    pre += [f"{events[producer]}.acquire(); {events[producer]}.release()", stop]
                wanted = sorted(
                    local
                    for local in set().union(*(identifiers(line) for line in lines_of[op])) & set(slots)
                    if crossing.definer[local] != op and stream_of[crossing.definer[local]] != stream
                )
                pre += [f"{local} = _x[{slots[local]}]" for local in wanted if local not in present]
                present.update(wanted)
                made = sorted(local for local, definer in crossing.definer.items() if definer == op and local in slots)
                post = [f"_x[{slots[local]}] = {local}" for local in made]
                if op in events:
                    post.append(f"{events[op]}.release()")
                chunks.append((op, pre + switches.before(op) + lines_of[op] + post))
            chunks.append((None, switches.back()))
            keep = set() if worker else crossing.returned
            body = [line for _, lines in self.with_deletes(chunks, keep) for line in lines]
            if worker:
                head = [f"def {_worker_name(stream)}(leaves, _x):"] + ([f"    {unpack} = leaves"] if n else [])
                functions.append("\n".join(head + self._worker_body(body, switches) + [""]))
            else:
                stream_0, switches_0 = "\n".join(INDENT + "    " + line for line in body or ["pass"]), switches
        loads = tuple(
            f"{local} = _x[{slot}]"
            for local, slot in slots.items()
            if local in crossing.returned and stream_of[crossing.definer[local]] != 0
        )
        workers = tuple(_worker_name(stream) for stream in range(1, schedule.num_streams))
        return _ThreadCode(stream_0, switches_0, tuple(functions), workers, len(slots), loads)

    def _worker_body(self, body: list[str], switches: TrackingSwitches) -> list[str]:
        """A worker's lines in the dispatch state the calling thread's run has: below the autograd
        keys (:meth:`head`; grad mode and inference mode are the runner's, :mod:`srbench.static.stream_runner`)
        and each node above or below ``ADInplaceOrView`` as chosen. Both are per thread: without
        them a worker ran every node through its autograd kernel, and an output one of its out
        variants wrote came back at another version than eager's. The thread serves every run of
        the runtime, so its ``finally`` gives both back, after a node that raised too."""
        enter = ["_below = _below_autograd()", "_below.__enter__()"] if self.below_autograd else []
        restored = switches.restored() + (["_below.__exit__(None, None, None)"] if self.below_autograd else [])
        if not restored:
            return ["    " + line for line in body]
        return [
            *("    " + line for line in [*enter, *switches.state_read(), "try:"]),
            *(INDENT + line for line in body or ["pass"]),
            "    finally:",
            *(INDENT + line for line in restored),
        ]

    def _threads_forward(self, entry: Entry, code: _ThreadCode, returned: str, write_back: list[str]) -> str:
        lines = self.head(entry.value, guard=entry is Entry.FORWARD)
        lines += ["    " + line for line in code.switches_0.state_read()]
        lines.append("    try:")
        if self.cleanup_slab_bytes is not None:
            lines.append(f"{INDENT}{Hook.SLAB}.resize_({self.cleanup_slab_bytes})")
        lines += [
            f"{INDENT}_x = {Hook.STREAMS}.start({self.leaves})",  # the workers unpack the call's leaves
            f"{INDENT}try:",
            code.stream_0,
            f"{INDENT}except BaseException as _error:",
            f"{INDENT}    raise {Hook.STREAMS}.failure(_error)",
            f"{INDENT}finally:",
            f"{INDENT}    {Hook.STREAMS}.join()",
        ]
        lines += [INDENT + line for line in [*code.epilogue_loads, *write_back, f"_result = {returned}"]]
        return "\n".join(lines + self._tail(entry, code.switches_0))

    # -- CUDA -----------------------------------------------------------------------------------

    def _cuda_body(self, layout: _Layout) -> tuple[list[tuple[str | None, list[str]]], TrackingSwitches]:
        """Every op's lines in issue order, from the calling thread, with its view-tracking
        switches (one thread: one state, whichever stream an op is issued on)."""
        schedule, lines_of, events, waits_for, crossing = layout
        stream_of = schedule.stream_of()
        current = 0
        chunks: list[tuple[str | None, list[str]]] = []
        switches = TrackingSwitches.along(self, schedule.order)
        for op in schedule.order:
            stream = stream_of[op]
            pre = []
            if stream != current:
                pre.append(f"{Hook.SET_STREAM}({_stream_expr(stream)})")
                current = stream
            pre += [f"{_stream_expr(stream)}.wait_event({events[producer]})" for producer in waits_for.get(op, ())]
            post = []
            for local, definer in sorted(crossing.definer.items()):
                if definer != op:
                    continue
                others = {stream_of[reader] for reader in crossing.readers.get(local, ())}
                if local in crossing.returned:
                    others.add(0)
                post += [f"{Hook.RECORD_STREAM}({local}, {_stream_expr(other)})" for other in sorted(others - {stream})]
            if op in events:
                post.append(f"{events[op]}.record({_stream_expr(stream)})")
            chunks.append((op, pre + switches.before(op) + lines_of[op] + post))
        chunks.append((None, switches.back()))
        if current != 0:
            chunks.append((None, [f"{Hook.SET_STREAM}(_main)"]))
        return chunks, switches

    def _cuda_forward(
        self,
        entry: Entry,
        body: list[tuple[str | None, list[str]]],
        switches: TrackingSwitches,
        returned: str,
        write_back: list[str],
        flat: list[str],
    ) -> str:
        chunks = self.with_deletes([*body, (None, [f"{Hook.STREAMS}.end()", *write_back])], set(flat))
        lines = [*self.head(entry.value, guard=entry is Entry.FORWARD)]
        lines += ["    " + line for line in switches.state_read()] + ["    try:"]
        if self.cleanup_slab_bytes is not None:
            lines.append(f"{INDENT}{Hook.SLAB}.resize_({self.cleanup_slab_bytes})")
        lines.append(f"{INDENT}_main = {Hook.STREAMS}.begin()")
        lines += [INDENT + line for _, chunk in chunks for line in chunk]
        lines += [
            f"{INDENT}_result = {returned}",
            "    except BaseException:",  # order the side streams' queued work before the slab is released
            f"{INDENT}{Hook.STREAMS}.end()",
            f"{INDENT}raise",
        ]
        return "\n".join(lines + self._tail(entry, switches, restore_stream=True))

    # -- shared ---------------------------------------------------------------------------------

    def _tail(self, entry: Entry, switches: TrackingSwitches, *, restore_stream: bool = False) -> list[str]:
        tail = self.grad_restored() + [INDENT + line for line in switches.restored()]
        if restore_stream:
            tail.append(f"{INDENT}{Hook.STREAMS}.restore()")
        if self.cleanup_slab_bytes is not None:
            tail.append(f"{INDENT}{Hook.SLAB}.resize_(0)")
        if self.claims(entry.value):
            tail.append(f"{INDENT}{Hook.UNCLAIM}(True)")
        return [*tail, "    return _result", ""]


_PLAIN = (Entry.FORWARD, Entry.UNCHECKED)
