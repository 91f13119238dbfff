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
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from srbench.cli._args import (
    ExitStatus,
    add_planning_options,
    add_records_option,
    capture_options,
    comma_separated,
    name_clash,
    planner_options,
    positive_int,
    print_error,
)
from srbench.formatting import aligned_table, format_bytes, format_seconds

if TYPE_CHECKING:
    from srbench.memory.minimalloc_csv import MiniMallocInstance

# Generated files go under results/ (ignored by git as a whole), not into a new folder of the checkout.
DEFAULT_RECORDS_DIR = Path("results") / "records"


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
    add_records_option(source, "tensor usage records to plan")
    parser.add_argument(
        "--planners",
        type=comma_separated,
        metavar="A,B",
        help="comma-separated planners to run (default: every registered planner)",
    )
    add_planning_options(parser)
    parser.add_argument(
        "--capacity",
        type=positive_int,
        metavar="BYTES",
        help="ask searching planners (exact) for a plan within BYTES, as MiniMalloc is asked: they stop at the "
        "first one found and minimise only once it is out of reach (default: minimise)",
    )
    parser.add_argument(
        "--save-records",
        nargs="?",
        type=Path,
        const=DEFAULT_RECORDS_DIR,
        metavar="DIR",
        help=f"also write each source's records to DIR/<name>.csv (default DIR: {DEFAULT_RECORDS_DIR}/, "
        "with the other generated results)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    parser.set_defaults(run=run)


@dataclass
class PlannerRow:
    planner: str
    total_bytes: int
    ratio_to_lower_bound: float
    seconds: float | None  # None: not planned here (a record file's own packing)
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
    # a record file's buffers whose gaps were read as alive (planned over their hull)
    gaps_read_as_alive: list[str] = field(default_factory=list)


def run(args: argparse.Namespace) -> ExitStatus:
    from srbench.memory.sources import SourceError, hull_note
    from srbench.planners import planner_names
    from srbench.registry import unknown_name_message

    if not (args.model or args.all or args.records):
        print_error("plan", "nothing to plan: give --model NAME, --all or --records FILE.csv")
        return ExitStatus.UNUSABLE
    names = args.planners or planner_names()
    unknown = [name for name in names if name not in planner_names()]
    for name in unknown:
        print_error("plan", unknown_name_message("planner", name, planner_names()))
    try:
        sources = list(_sources(args))
    except LookupError as error:  # an unknown model name
        print_error("plan", str(error))
        return ExitStatus.UNUSABLE
    if unknown:
        return ExitStatus.UNUSABLE
    if (clash := name_clash([(name, origin) for name, _, origin, _ in sources])) is not None:
        print_error("plan", clash)
        return ExitStatus.UNUSABLE
    planners, broken = _load_planners(names)
    options = planner_options(planners, args.time_limit, capacity=args.capacity)

    reports = []
    for name, kind, origin, load in sources:
        report = SourceReport(name=name, kind=kind)
        reports.append(report)
        try:
            records, outputs, instance = load()
        except SourceError as error:
            _fail(report, str(error))
            continue
        if instance is not None and instance.hulled:
            report.gaps_read_as_alive = list(instance.hulled)
            print_error("plan", hull_note(origin, instance.hulled))
        if args.save_records:
            _save(records, args.save_records / f"{name}.csv", report)
        _plan_source(report, records, outputs, options, args)
        if instance is not None:
            _report_file_packing(report, instance, origin)

    if args.json:
        document = {"alignment": args.alignment, "planner_errors": broken, "sources": [asdict(r) for r in reports]}
        print(json.dumps(document, indent=2, default=str))
    elif any(report.plans for report in reports):
        print(format_table(reports))
    failures = len(broken) + sum(len(report.errors) for report in reports)
    return ExitStatus.of(done=sum(len(report.plans) for report in reports), failed=failures)


def _fail(report: SourceReport, message: str) -> None:
    """Record a failure of ``report``'s source and say it, once, on stderr."""
    report.errors.append(message)
    print_error("plan", message)


def _load_planners(names: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The planners that load, by name, and one message per planner plugin that does not."""
    from srbench.planners import get_planner

    loaded, broken = {}, []
    for name in names:
        try:
            loaded[name] = get_planner(name)
        except ImportError as error:
            broken.append(f"planner {name!r} cannot be loaded: {type(error).__name__}: {error}")
            print_error("plan", broken[-1])
    return loaded, broken


def _sources(args: argparse.Namespace) -> Iterator[tuple[str, str, str, Any]]:
    """(name, kind, origin, loader) for each source (origin: where it comes from, for messages); a
    loader returns (records, output records, the record file's instance or None for a model) or
    raises :class:`srbench.memory.sources.SourceError`. An unknown model name raises
    :class:`~srbench.registry.UnknownPluginError` (a LookupError) before any source is loaded."""
    names = list(args.model)
    if args.all or names:
        from srbench.zoo import ProviderUnavailable, load_zoo

        zoo = load_zoo()
        for name in names:
            with contextlib.suppress(ProviderUnavailable):  # known but unavailable: that source fails alone
                zoo.get(name)
        if args.all:
            names += [name for name in zoo.cases if name not in names]
        for name in names:
            yield name, "model", f"model {name!r}", lambda name=name: _model_records(zoo, name, args)
    for path in args.records:
        yield path.stem, "records", str(path), lambda path=path: _csv_records(path, args)


def _model_records(zoo: Any, name: str, args: argparse.Namespace) -> tuple[list, list, None]:
    from srbench.memory.sources import model_records

    analysis = model_records(zoo, name, **capture_options(args))
    return list(analysis.records), list(analysis.output_records), None


def _csv_records(path: Path, args: argparse.Namespace) -> tuple[list, list, MiniMallocInstance]:
    from srbench.memory.sources import csv_instance

    instance = csv_instance(path, alignment=args.alignment)
    return list(instance.records), [], instance


def _report_file_packing(report: SourceReport, instance: MiniMallocInstance, origin: str) -> None:
    """A solution file's own packing (its ``offset`` column) as one more row, validated and judged
    as the planners' plans are (at the file's alignment), so srbench's plans are compared with
    the one the file came with (MiniMalloc's solver's, say). One that is not a packing of the
    records is the file's error, named with its buffers; over the hull of buffers whose gaps were
    read as alive, a packing that uses the gaps is valid for the file and is said not to be
    compared instead."""
    from srbench.memory.records import PlanError
    from srbench.planners import judge_plan

    plan = instance.packing()
    if plan is None:
        return
    try:
        result = judge_plan(instance.records, plan, alignment=instance.alignment)
    except PlanError as error:
        if instance.hulled:
            print_error(
                "plan",
                f"{origin}: its offset column is not a packing over the hull (it may use the gaps "
                f"read as alive), so it is not compared: {error}",
            )
        else:
            _fail(report, f"{origin}: its offset column is not a valid packing of its buffers: {error}")
        return
    report.lower_bound = result.lower_bound
    report.plans.append(
        PlannerRow(
            planner=plan.planner,
            total_bytes=plan.total_bytes,
            ratio_to_lower_bound=result.ratio_to_lower_bound,
            seconds=None,
            proven_optimal=result.plan.proven_optimal,
            notes={"alignment": instance.alignment},
        )
    )


def _save(records: list, path: Path, report: SourceReport) -> None:
    from srbench.memory.minimalloc_csv import write_records

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_records(records, path)
    except OSError as error:
        _fail(report, f"cannot save records of {report.name!r} to {str(path)!r}: {error}")


def _plan_source(
    report: SourceReport, records: list, outputs: list, options: dict[str, dict[str, Any]], args: argparse.Namespace
) -> None:
    """Plan ``records`` with each planner named in ``options``, given its options."""
    from srbench.memory.records import PlanError, RecordError
    from srbench.planners import plan_memory

    report.planned_tensors = len(records)
    report.output_tensors = len(outputs)
    report.output_bytes = sum(r.size for r in outputs)
    for planner, given in options.items():
        try:
            result = plan_memory(records, planner, alignment=args.alignment, **given)
        except (PlanError, RecordError) as error:
            _fail(report, f"{report.name}: planner {planner!r} failed: {error}")
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


def format_table(reports: Sequence[SourceReport]) -> str:
    """One row per source and planner; numbers right-aligned. ``*`` marks a proven optimum.
    Failures are not repeated here: each was said once, on stderr, when it happened."""
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
                    "-" if row.seconds is None else format_seconds(row.seconds),
                )
            )
    lines = [aligned_table(header, rows, right_aligned=range(2, len(header)))]
    if any(row.proven_optimal for report in reports for row in report.plans):
        lines.append("* proven optimal")
    for report in reports:
        if report.output_tensors:
            lines.append(
                f"{report.name}: {report.output_tensors} graph output(s), {format_bytes(report.output_bytes)}, "
                "live to the end and not planned"
            )
    return "\n".join(lines)
