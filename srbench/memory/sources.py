"""The tensor usage records a planner is given: those of a zoo model, or of a MiniMalloc CSV file.

``srbench plan`` and ``srbench compare`` (and anything else that plans real graphs) get their
records here, so a model is captured and analysed the same way everywhere. Whatever stops a
source from yielding records -- an unknown or unavailable model, example inputs that cannot be
made at the batch asked, a graph ``torch.export`` cannot capture, a malformed CSV file -- is a
:class:`SourceError` naming the source and the reason, so a caller can report it in one line and
go on with the other sources.

torch and the zoo are imported inside the functions: importing this module (for
:class:`SourceError`) stays light.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from srbench.memory.records import DEFAULT_ALIGNMENT, RecordError, check_records

if TYPE_CHECKING:
    from srbench.graph import CapturedGraph
    from srbench.memory.lifetimes import LifetimeAnalysis
    from srbench.memory.minimalloc_csv import MiniMallocInstance
    from srbench.zoo import Zoo


class SourceError(Exception):
    """A source whose records cannot be had; the message names it and says why."""


def model_graph(
    zoo: Zoo, name: str, *, batch: int | None = None, decompose: bool = False, quiet: bool = True
) -> CapturedGraph:
    """Capture the zoo model ``name`` (with ``batch`` example inputs, the core-ATen graph when
    ``decompose``). ``quiet`` hides what torch.export prints while it fails, so the
    :class:`SourceError` is the whole story."""
    from srbench.graph import CaptureError, capture
    from srbench.registry import UnknownPluginError
    from srbench.zoo import ExampleInputsError, ProviderUnavailable

    try:
        case = zoo.get(name)
    except (UnknownPluginError, ProviderUnavailable) as error:
        raise SourceError(str(error)) from error
    try:
        with _silenced(quiet):
            return capture(case.model(), case.example_inputs(batch=batch), name=name, decompose=decompose)
    except (CaptureError, ExampleInputsError) as error:
        raise SourceError(str(error)) from error


def model_records(
    zoo: Zoo,
    name: str,
    *,
    batch: int | None = None,
    alignment: int = DEFAULT_ALIGNMENT,
    decompose: bool = False,
    quiet: bool = True,
) -> LifetimeAnalysis:
    """The lifetimes of the tensors of the zoo model ``name``, captured by :func:`model_graph`."""
    from srbench.memory.lifetimes import LifetimeError, analyze_lifetimes

    captured = model_graph(zoo, name, batch=batch, decompose=decompose, quiet=quiet)
    try:
        return analyze_lifetimes(captured.graph, alignment=alignment)
    except LifetimeError as error:
        raise SourceError(f"cannot analyse model {name!r}: {error}") from error


def csv_instance(path: str | os.PathLike[str], *, alignment: int = 1) -> MiniMallocInstance:
    """A MiniMalloc CSV file (see :mod:`srbench.memory.minimalloc_csv`) to be planned at
    ``alignment`` (a file asking per-buffer alignments it does not keep is refused), whose errors
    already name the file and line. Records no planner may be given (sizes that sum past the
    largest slab at ``alignment``) are refused here too, naming the file: once, where each
    planner refused them in turn, one line per planner without the file."""
    from srbench.memory.minimalloc_csv import read_planned

    try:
        instance = read_planned(path, alignment=alignment)
    except RecordError as error:
        raise SourceError(str(error)) from error
    try:
        check_records(instance.records, alignment=alignment)
    except RecordError as error:
        raise SourceError(f"{os.fspath(path)}: {error}") from error
    return instance


def hull_note(origin: str, hulled: Sequence[str]) -> str:
    """The line saying that a record file's gaps were read as alive (``hulled``: those buffers'
    ids, :attr:`~srbench.memory.minimalloc_csv.MiniMallocInstance.hulled`), and what that makes
    of the numbers reported for it: a command that plans such a file prints it, so no one takes
    the hull's bound or optimality for the gapped instance's."""
    named = ", ".join(repr(buffer) for buffer in hulled[:3]) + (", ..." if len(hulled) > 3 else "")
    return (
        f"{origin}: the gaps of {len(hulled)} buffer(s) ({named}) were read as alive (each buffer alive from lower "
        "to upper): every plan is valid for the file with its gaps, and the lower bound, ratios and proven "
        "optimality reported are those of that hull, not of the instance with its gaps"
    )


@contextlib.contextmanager
def _silenced(enabled: bool) -> Iterator[None]:
    """Hide what torch.export prints and logs (graph dumps, guard warnings) while enabled."""
    if not enabled:
        yield
        return
    torch_logger = logging.getLogger("torch")
    level = torch_logger.level
    torch_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        torch_logger.setLevel(level)
