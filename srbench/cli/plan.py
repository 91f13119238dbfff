"""``srbench plan``: plan the memory of zoo models (or MiniMalloc CSV record files) with every planner.

For each source it captures the model with ``torch.export``, runs the alias and lifetime analysis,
and hands the records to each planner through :func:`srbench.planners.plan_memory` (so every plan
is validated); it prints, per source and planner, the number of planned tensors, the slab total,
its ratio to the lower bound and the planning time: an aligned table for a person, or ``--json``.

A source that fails (a model ``torch.export`` cannot capture, a malformed CSV file) is reported in
one line naming it and the reason, and the others still run; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Seconds a searching planner (one whose plan() takes ``time_limit``, such as ``exact``) may spend
# per source: long enough to prove most inference graphs, short enough for ``--all``.
DEFAULT_TIME_LIMIT = 10.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan the memory of models with every planner and compare with the lower bound",
        description="Capture models with torch.export, find their tensors' lifetimes, and plan them with "
        "each memory planner. Prints per model and planner: planned tensors, slab total, ratio to the "
        "lower bound (most bytes alive at one step) and planning time.",
    )
    source = parser.add_argument_group("what to plan (at least one)")
    source.add_argument("--model", action="append", default=[], metavar="NAME", help="a zoo model (repeatable)")
    source.add_argument("--all", action="store_true", help="every model of the zoo that is available here")
    source.add_argument(
        "--records", action="append", default=[], type=Path, metavar="FILE.csv",
        help="records in MiniMalloc's CSV format (id,lower,upper,size; repeatable)",
    )
    parser.add_argument(
        "--planners", type=_names, metavar="A,B",
        help="comma-separated planners to run (default: every registered planner)",
    )
    parser.add_argument("--batch", type=_positive_int, metavar="N", help="batch size of the example inputs")
    parser.add_argument(
        "--alignment", type=_positive_int, default=64, metavar="BYTES", help="offset and size alignment (default 64)"
    )
    parser.add_argument(
        "--decompose", action="store_true", help="plan the core-ATen graph (export's run_decompositions())"
    )
    parser.add_argument(
        "--time-limit", type=_positive_float, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
        help=f"time limit for searching planners such as exact (default {DEFAULT_TIME_LIMIT:g})",
    )
    parser.add_argument(
        "--save-records", type=Path, metavar="DIR", help="also write each source's records to DIR/<name>.csv"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    parser.add_argument("-v", "--verbose", action="store_true", help="show what torch.export prints while capturing")
    parser.set_defaults(run=run)


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated planner names, got {text!r}")
    return names


def _positive(convert: Callable[[str], float], noun: str) -> Callable[[str], Any]:
    """An argparse type: ``convert`` the text and insist on a value above zero."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not value > 0:
            raise argparse.ArgumentTypeError(f"expected a positive {noun}, got {text!r}")
        return value

    return parse


_positive_int = _positive(int, "integer")
_positive_float = _positive(float, "number")


@dataclass
class PlannerRow:
    planner: str
    total_bytes: int
    ratio_to_lower_bound: float
    seconds: float
    proven_optimal: bool
    notes: dict[str, Any]


@dataclass
class SourceReport:
    """The plans of one model or record file, or the reason it could not be planned."""

    name: str
    kind: str  # "model" or "records"
    planned_tensors: int = 0
    lower_bound: int = 0
    output_tensors: int = 0  # graph outputs: live to the end, reported apart, never planned here
    output_bytes: int = 0
    plans: list[PlannerRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class SourceError(Exception):
    """A source that cannot be planned; the message names it and says why."""


def run(args: argparse.Namespace) -> int:
    from srbench.planners import planner_names

    if not (args.model or args.all or args.records):
        print("srbench plan: nothing to plan: give --model NAME, --all or --records FILE.csv", file=sys.stderr)
        return 2
    names = args.planners or planner_names()
    unknown = [name for name in names if name not in planner_names()]
    if unknown:
        from srbench.registry import unknown_name_message

        for name in unknown:
            print(f"srbench plan: {unknown_name_message('planner', name, planner_names())}", file=sys.stderr)
        return 2
    planners, broken = _load_planners(names)

    reports = []
    for name, kind, load in _sources(args):
        report = SourceReport(name=name, kind=kind)
        reports.append(report)
        try:
            records, outputs = load()
        except SourceError as error:
            report.errors.append(str(error))
            print(f"srbench plan: {error}", file=sys.stderr)
            continue
        if args.save_records:
            _save(records, args.save_records / f"{name}.csv", report)
        _plan_source(report, records, outputs, planners, args)

    if args.json:
        document = {"alignment": args.alignment, "planner_errors": broken, "sources": [asdict(r) for r in reports]}
        print(json.dumps(document, indent=2, default=str))
    else:
        print(format_table(reports, broken))
    return 1 if broken or any(report.errors for report in reports) else 0


def _load_planners(names: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The planners that load, by name, and one message per planner plugin that does not."""
    from srbench.planners import get_planner

    loaded, broken = {}, []
    for name in names:
        try:
            loaded[name] = get_planner(name)
        except ImportError as error:
            broken.append(f"planner {name!r} cannot be loaded: {type(error).__name__}: {error}")
            print(f"srbench plan: {broken[-1]}", file=sys.stderr)
    return loaded, broken


def _sources(args: argparse.Namespace) -> Iterator[tuple[str, str, Any]]:
    """(name, kind, loader) for each source; a loader returns (records, output records)."""
    names = list(args.model)
    if args.all or names:
        from srbench.zoo import load_zoo

        zoo = load_zoo()
        if args.all:
            names += [name for name in zoo.cases if name not in names]
        for name in names:
            yield name, "model", lambda name=name: _model_records(zoo, name, args)
    for path in args.records:
        yield path.stem, "records", lambda path=path: (_csv_records(path), [])


def _model_records(zoo: Any, name: str, args: argparse.Namespace) -> tuple[list, list]:
    from srbench.graph import CaptureError, capture
    from srbench.memory.lifetimes import LifetimeError, analyze_lifetimes
    from srbench.registry import UnknownPluginError
    from srbench.zoo import ProviderUnavailable

    try:
        case = zoo.get(name)
    except (UnknownPluginError, ProviderUnavailable) as error:
        raise SourceError(str(error)) from error
    try:
        with _quiet(not args.verbose):
            captured = capture(
                case.model(), case.example_inputs(batch=args.batch), name=name, decompose=args.decompose
            )
        analysis = analyze_lifetimes(captured.graph, alignment=args.alignment)
    except CaptureError as error:
        raise SourceError(str(error)) from error
    except LifetimeError as error:
        raise SourceError(f"cannot analyse model {name!r}: {error}") from error
    return list(analysis.records), list(analysis.output_records)


def _csv_records(path: Path) -> list:
    from srbench.memory.minimalloc_csv import read_records
    from srbench.memory.records import RecordError

    try:
        return read_records(path)
    except RecordError as error:
        raise SourceError(f"cannot read records {str(path)!r}: {error}") from error


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    """Hide what torch.export prints and logs while it fails (graph dumps, guard warnings), so a
    capture failure is the one line the CLI prints; ``--verbose`` shows it all."""
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


def _save(records: list, path: Path, report: SourceReport) -> None:
    from srbench.memory.minimalloc_csv import write_records

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_records(records, path)
    except OSError as error:
        report.errors.append(f"cannot save records of {report.name!r} to {str(path)!r}: {error}")
        print(f"srbench plan: {report.errors[-1]}", file=sys.stderr)


def _plan_source(report: SourceReport, records: list, outputs: list, planners: dict[str, Any], args) -> None:
    from srbench.memory.records import PlanError, RecordError
    from srbench.planners import plan_memory

    report.planned_tensors = len(records)
    report.output_tensors = len(outputs)
    report.output_bytes = sum(r.size for r in outputs)
    for planner, plan_fn in planners.items():
        options = {"time_limit": args.time_limit} if _takes(plan_fn, "time_limit") else {}
        try:
            result = plan_memory(records, planner, alignment=args.alignment, **options)
        except (PlanError, RecordError) as error:
            report.errors.append(f"{report.name}: planner {planner!r} failed: {error}")
            print(f"srbench plan: {report.errors[-1]}", file=sys.stderr)
            continue
        report.lower_bound = result.lower_bound
        report.plans.append(
            PlannerRow(
                planner=planner,
                total_bytes=result.plan.total_bytes,
                ratio_to_lower_bound=result.ratio_to_lower_bound,
                seconds=result.seconds,
                proven_optimal=result.plan.proven_optimal,
                notes=dict(result.plan.notes),
            )
        )


def _takes(planner: Any, keyword: str) -> bool:
    try:
        return keyword in inspect.signature(planner).parameters
    except (TypeError, ValueError):
        return False


def format_bytes(nbytes: int) -> str:
    """Bytes in binary units, three significant digits: ``'1.50 MiB'``."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def format_table(reports: Sequence[SourceReport], planner_errors: Sequence[str] = ()) -> str:
    """One row per source and planner; numbers right-aligned. ``*`` marks a proven optimum."""
    header = ("MODEL", "PLANNER", "TENSORS", "TOTAL", "TOTAL BYTES", "LOWER BOUND", "RATIO", "TIME")
    rows = []
    for report in reports:
        for row in report.plans:
            rows.append(
                (
                    report.name,
                    row.planner,
                    str(report.planned_tensors),
                    format_bytes(row.total_bytes),
                    f"{row.total_bytes:,}",
                    f"{report.lower_bound:,}",
                    f"{row.ratio_to_lower_bound:.3f}" + ("*" if row.proven_optimal else " "),
                    format_seconds(row.seconds),
                )
            )
    widths = [max(len(line[column]) for line in [header, *rows]) for column in range(len(header))]
    lines = [
        "  ".join(value.ljust(width) if column < 2 else value.rjust(width) for column, (value, width) in enumerate(zip(line, widths)))
        for line in [header, *rows]
    ]
    if any(row.proven_optimal for report in reports for row in report.plans):
        lines.append("* proven optimal")
    for report in reports:
        if report.output_tensors:
            lines.append(
                f"{report.name}: {report.output_tensors} graph output(s), {format_bytes(report.output_bytes)}, "
                "live to the end and not planned"
            )
    failed = [*planner_errors, *(error for report in reports for error in report.errors)]
    if failed:
        lines.append(f"{len(failed)} failure(s):")
        lines.extend(f"  {error}" for error in failed)
    return "\n".join(lines)
