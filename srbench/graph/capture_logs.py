"""What torch prints about a failing capture, held back where srbench's error says it anyway.

A model that cannot be captured makes torch write about the failure before export raises it: a
shape the model's layers refuse has FakeTensor log the meta kernel's whole traceback at ERROR
level ("failed while attempting to run meta for aten.mm.default"); a branch on a tensor's value has
torch.export print the partial graph to stderr (twice: two of its wrappers print it) and the shape
environment warn "Unable to find user code corresponding to {u0}". Then export raises, and
srbench's :class:`~srbench.graph.capture.CaptureError` names the reason and the model's line in one
line. A runtime called with inputs its model does not take printed some thirty lines of torch's
above that line.

:func:`held_while_capturing` holds, while a capture runs and on its thread alone, the records of
the loggers that write about the failure and what is written to ``sys.stderr``. If the capture
succeeds, all of it is written out as it would have been (after the capture, not during it). If
it fails, the log records are dropped, and so are the writes that are the failure's partial graph;
anything else written to stderr (a model's own ``print``, a warning) is written out. Other threads
log and write as before. Written by hand: torch has no switch for these messages, and
``contextlib.redirect_stderr`` would take every thread's writes.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

# The loggers that write about a capture's failure before torch.export raises it.
_FAILURE_LOGGERS = (
    "torch._subclasses.fake_tensor",  # the meta kernel's traceback
    "torch.fx.experimental.symbolic_shapes",  # torch._check suggestions it could not make
    "torch.export._trace",  # exportdb's page for a classified error
)


class _ThreadRecordsHeld(logging.Filter):
    """Holds back the records logged on one thread (they reach no handler while held)."""

    def __init__(self, thread: int) -> None:
        super().__init__()
        self.thread = thread
        self.held: list[tuple[logging.Logger, logging.LogRecord]] = []
        self.loggers = [logging.getLogger(name) for name in _FAILURE_LOGGERS]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        self.held.append((logging.getLogger(record.name), record))
        return False


class _ThreadWritesHeld:
    """``sys.stderr`` for the capture: one thread's writes held, other threads' passed on."""

    def __init__(self, stream: TextIO, thread: int) -> None:
        self.stream = stream
        self.thread = thread
        self.held: list[str] = []

    def write(self, text: str) -> int:
        if threading.get_ident() != self.thread:
            return self.stream.write(text)
        self.held.append(text)
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, encoding...: the stream's own
        return getattr(self.stream, name)


def _partial_graphs(error: BaseException | None) -> set[str]:
    """The partial graphs torch.export printed for ``error`` (it prints the attribute as is)."""
    graphs = set()
    while error is not None:
        if (graph := getattr(error, "partial_fx_graph", None)) is not None:
            graphs.add(str(graph))
        error = error.__cause__ or error.__context__
    return graphs


@contextmanager
def held_while_capturing() -> Iterator[None]:
    """While the block runs, this thread's records of torch's failure loggers and its writes to
    ``sys.stderr`` are held: written out when the block ends normally; on an exception, the
    records and the exception's partial graphs are dropped, the other writes written out."""
    thread = threading.get_ident()
    records = _ThreadRecordsHeld(thread)
    stream = sys.stderr
    writes = _ThreadWritesHeld(stream, thread)
    for logger in records.loggers:
        logger.addFilter(records)
    sys.stderr = writes  # a stream in all but its type (its __getattr__ gives the rest)
    failure: BaseException | None = None
    try:
        yield
    except BaseException as error:
        failure = error
        raise
    finally:
        if sys.stderr is writes:  # not where someone else has replaced it meanwhile
            sys.stderr = stream
        for logger in records.loggers:
            logger.removeFilter(records)
        dropped = {text.rstrip("\n") for text in _partial_graphs(failure)}
        for text in writes.held:
            if text.rstrip("\n") not in dropped and not (dropped and text == "\n"):
                stream.write(text)
        if failure is None:
            for logger, record in records.held:
                logger.handle(record)
