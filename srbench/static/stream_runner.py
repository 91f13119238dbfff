"""The run-time half of multistream programs: threads and events (CPU), or CUDA streams.

A runtime binding a multistream program (:class:`~srbench.static.stream_code.StreamProgram`) gets,
once, the objects its generated code names (:class:`~srbench.static.codegen.Hook`):

* on the CPU, :class:`ThreadStreams`: one thread per stream beyond the first, each running its
  stream's generated function when a run starts, and one lock per event. The threads belong to
  the runtime (they are told to stop when it is collected): a shared pool could deadlock, a
  stream waiting on an event of a stream still queued behind it. A lock hand-off costs a few
  microseconds where a ``concurrent.futures`` submission costs tens, which matters at the sizes
  where concurrency starts to pay; so this small pool is written by hand. Each run's worker
  threads use the caller's intra-op thread count: a new thread does not inherit
  ``torch.set_num_threads`` (OpenMP's count is per thread), so a worker's oneDNN and MKL kernels
  ran with one OpenMP thread per core, and two streams on two cores oversubscribed them: two
  threads' ``linear`` chains ran 1.3-1.5x one thread's where two processes ran 2x (measured on
  this project's 2-core machine; 1.8-1.9x once each thread set its count). They also take the
  caller's ``torch.inference_mode`` (per thread too): an op of a worker's stream writing an input
  the caller made under it (an inference tensor) failed outside it, where eager's call writes it.
  The rest of the dispatch state a run sets on its thread is the generated worker function's own
  (:meth:`~srbench.static.stream_code.StreamCodeWriter._worker_body`): below the autograd keys,
  and each node above or below ``ADInplaceOrView`` as chosen.
* on CUDA, :class:`CudaStreams`: the side streams, one CUDA event per waited-for op, and the
  begin/end events that order a run against what the caller queued before and after it.

A failure in any stream stops the run cleanly: the failing stream marks the run failed and
releases every event, the others stop at their next wait, ``forward`` joins them all before it
raises the first error, so no thread is left writing into the slab.
"""

from __future__ import annotations

import contextlib
import threading
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from srbench.static.codegen import Hook
from srbench.static.stream_code import StreamMode, StreamProgram


class ThreadStreams:
    """Runs streams 1.. of a program on threads of their own, one run at a time (the runtime's
    call token guards the generated ``forward``, see :class:`~srbench.static.codegen.RuntimeHooks`).

    ``start(args)`` resets the events, hands the run's inputs and a fresh mailbox to every thread
    and returns the mailbox; ``join()`` waits for every thread and raises the first error one of
    them met (unless the calling thread's own error is already being raised, see :meth:`failure`).
    ``failed`` tells the streams to stop at their next wait.
    """

    def __init__(self, functions: Sequence[Callable[..., Any]], events: int, mailbox: int):
        self.functions = tuple(functions)
        self.events = [threading.Lock() for _ in range(events)]
        self.mailbox = mailbox
        self.failed = False
        self._errors: list[BaseException] = []
        self._reported = False
        self._closing = False
        self._work: tuple[Any, list[Any]] | None = None
        self._threads = torch.get_num_threads()
        self._inference = False
        self._start = [_taken() for _ in self.functions]
        self._done = [_taken() for _ in self.functions]
        for index in range(len(self.functions)):
            threading.Thread(target=self._serve, args=(index,), name=f"srbench-stream-{index + 1}", daemon=True).start()

    def _serve(self, index: int) -> None:
        torch.set_grad_enabled(False)  # grad mode is per thread; the run's own thread turns it off itself
        function, start, done = self.functions[index], self._start[index], self._done[index]
        threads = 0  # the intra-op thread count this thread last took from a run's caller
        while True:
            start.acquire()
            if self._closing:
                return
            try:
                assert self._work is not None
                if threads != self._threads:
                    threads = self._threads
                    torch.set_num_threads(threads)
                if self._inference:
                    with torch.inference_mode():
                        function(*self._work)
                else:
                    function(*self._work)
            except BaseException as error:
                self._fail(error)
            finally:
                done.release()

    def start(self, args: tuple[Any, ...]) -> list[Any]:
        self.failed, self._reported = False, False
        self._errors.clear()
        for event in self.events:
            event.acquire(blocking=False)  # taken now; released by its op (or by a failing stream)
        mailbox: list[Any] = [None] * self.mailbox
        self._work = (args, mailbox)
        self._threads = torch.get_num_threads()
        self._inference = torch.is_inference_mode_enabled()
        for lock in self._start:
            lock.release()
        return mailbox

    def join(self) -> None:
        for lock in self._done:
            lock.acquire()
        self._work = None
        if self._errors and not self._reported:
            self._reported = True
            raise self._errors[0]

    def check(self) -> None:
        """Raise the first error of another stream, if one failed (the calling thread's check
        after each wait)."""
        if self.failed:
            raise self._errors[0] if self._errors else RuntimeError("a stream of this run failed")

    def failure(self, error: BaseException) -> BaseException:
        """The error the calling thread raises when its own stream fails with ``error``: the
        first error of the run (another stream's, if it failed first). Stops the other streams."""
        if not self.failed:
            self._fail(error)
        self._reported = True
        return self._errors[0]

    def _fail(self, error: BaseException) -> None:
        self._errors.append(error)
        self.failed = True
        for event in self.events:
            if event.locked():
                with contextlib.suppress(RuntimeError):  # released meanwhile by its own op
                    event.release()

    def close(self) -> None:
        """Let the threads end (they hold nothing of the runtime)."""
        self._closing = True
        for lock in self._start:
            if lock.locked():
                lock.release()


def _taken() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


class CudaStreams:
    """The side streams and events of a program on one CUDA device.

    ``begin()``: every side stream waits for what the caller's current stream has queued;
    ``end()``: that stream waits for every side stream; ``restore()`` makes it current again.
    ``set_stream``,
    ``current_stream`` and ``record_stream`` are torch's own; a test may pass other callables
    with the same meaning (see ``tests/test_multistream_runtime.py``)."""

    def __init__(
        self,
        streams: Sequence[Any],
        events: Sequence[Any],
        make_event: Callable[[], Any],
        set_stream: Callable[[Any], None],
        current_stream: Callable[[], Any],
        record_stream: Callable[[torch.Tensor, Any], None],
    ):
        self.streams = tuple(streams)
        self.events = tuple(events)
        self.set_stream = set_stream
        self.current_stream = current_stream
        self.record_stream = record_stream
        self._begin = make_event()
        self._ends = [make_event() for _ in self.streams]
        self._main: Any = None

    @classmethod
    def on(cls, device: torch.device, side_streams: int, events: int) -> CudaStreams:
        return cls(
            [torch.cuda.Stream(device) for _ in range(side_streams)],
            [torch.cuda.Event() for _ in range(events)],
            torch.cuda.Event,
            torch.cuda.set_stream,
            lambda: torch.cuda.current_stream(device),
            torch.Tensor.record_stream,
        )

    def begin(self) -> Any:
        """The caller's current stream, which the run takes as its stream 0; every side stream
        waits for what it has queued."""
        main = self._main = self.current_stream()
        self._begin.record(main)
        for stream in self.streams:
            stream.wait_event(self._begin)
        return main

    def end(self) -> None:
        """The caller's stream waits for every side stream (nothing to do before :meth:`begin`)."""
        if self._main is None:
            return
        for stream, event in zip(self.streams, self._ends):
            event.record(stream)
            self._main.wait_event(event)

    def restore(self) -> None:
        """The caller's stream current again, as it was when the run began."""
        if self._main is not None:
            self.set_stream(self._main)
            self._main = None


def bind_streams(
    streams: StreamProgram,
    namespace: dict[str, Any],
    code: Mapping[str, types.CodeType],
    device: torch.device,
    owner: object,
    cuda: CudaStreams | None = None,
) -> dict[str, Any]:
    """The globals a multistream program needs on ``device``, made for the runtime ``owner``
    (whose ``namespace`` holds every other global already). Worker threads are told to stop when
    ``owner`` is collected; their functions see only the globals they read, so they keep nothing
    of the runtime alive. ``cuda`` replaces the CUDA streams (tests)."""
    if streams.mode is StreamMode.THREADS:
        # only the globals the workers read: not the runtime's own hooks (miss, busy), which would
        # keep the runtime alive as long as its threads
        read = {name for worker in streams.workers for name in code[worker].co_names}
        shared = {name: value for name, value in namespace.items() if name in read}
        functions = [types.FunctionType(code[name], shared, name) for name in streams.workers]
        runner = ThreadStreams(functions, len(streams.events), streams.mailbox)
        weakref.finalize(owner, runner.close)
        hooks: dict[str, Any] = {Hook.STREAMS: runner, **dict(zip(streams.events, runner.events))}
        shared.update(hooks)
        return hooks
    side = streams.schedule.num_streams - 1
    device_streams = cuda or CudaStreams.on(device, side, len(streams.events))
    return {
        Hook.STREAMS: device_streams,
        Hook.SET_STREAM: device_streams.set_stream,
        Hook.CURRENT_STREAM: device_streams.current_stream,
        Hook.RECORD_STREAM: device_streams.record_stream,
        **{f"{Hook.SIDE_STREAM}{i + 1}": stream for i, stream in enumerate(device_streams.streams)},
        **dict(zip(streams.events, device_streams.events)),
    }
