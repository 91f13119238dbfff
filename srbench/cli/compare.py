"""``srbench compare``: every planner on every model of whole zoos, against the lower bound.

Prints, per model and planner, the planned tensors, slab total, ratio to the lower bound and the
planning time, then a per-planner summary (geometric mean of the ratio, worst case, how often the
bound is reached); a progress bar runs meanwhile. Writes ``compare.json``, ``compare.md`` and a
self-contained ``compare.html`` (pictures inlined) to ``--out`` (default ``results/``), with the
pictures as PNG files beside them. Models are captured and analysed as ``srbench plan`` does
(:mod:`srbench.memory.sources`); a source that fails is one line on stderr and the others
continue (exit status 1; 2 when nothing could be planned, and then no report is written).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srbench.compare.run import Source
    from srbench.memory.records import TensorUsageRecord
    from srbench.zoo import Zoo

from srbench.cli._args import (
    ExitStatus,
    add_planning_options,
    add_records_option,
    capture_options,
    comma_separated,
    name_clash,
    planner_options,
    print_error,
)

DEFAULT_ZOOS = ["builtin"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="compare every planner across model zoos; write JSON, Markdown and HTML reports",
        description="Plan the memory of whole zoos (and MiniMalloc CSV instances) with every planner; "
        "print and write per-model figures, a per-planner summary and pictures.",
    )
    parser.add_argument(
        "--zoo",
        type=comma_separated,
        metavar="A,B",
        help=f"model providers to compare (default: {','.join(DEFAULT_ZOOS)} unless --models or --records is given)",
    )
    parser.add_argument("--models", type=comma_separated, metavar="A,B", help="only these zoo models")
    add_records_option(parser, "also compare on these tensor usage records")
    parser.add_argument(
        "--planners",
        type=comma_separated,
        default=["all"],
        metavar="all|A,B",
        help="planners to compare (default: all)",
    )
    add_planning_options(parser)
    parser.add_argument(
        "--out", type=Path, default=Path("results"), metavar="DIR", help="where to write (default results/)"
    )
    parser.add_argument(
        "--streams",
        type=_stream_counts,
        default=[],
        metavar="N,M",
        help="also plan each zoo model for N streams and show the bytes against one stream, and the "
        "latency gains a streams suite measured (e.g. 2,4)",
    )
    parser.add_argument(
        "--schedulers",
        type=comma_separated,
        default=["critical_path", "parallel_steps"],
        metavar="A,B",
        help="schedulers for --streams (default: critical_path,parallel_steps)",
    )
    parser.add_argument(
        "--suite-results",
        type=Path,
        default=Path("results/suites-summary.json"),
        metavar="FILE",
        help="suite summary to read measured gains from, for --streams (default: results/suites-summary.json)",
    )
    parser.add_argument(
        "--layout",
        action="append",
        type=_layout,
        default=None,
        metavar="MODEL:PLANNER",
        help="draw this plan's memory layout (repeatable; default: each model's smallest plan)",
    )
    parser.add_argument(
        "--observe",
        action="append",
        default=[],
        metavar="MODEL",
        help="also run this zoo model and picture its live bytes: eager and srbench observed, estimated, "
        "planned, lower bound (repeatable; see srbench observe)",
    )
    parser.set_defaults(run=run)


def _stream_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in comma_separated(text)]
    except ValueError:
        counts = []
    if not counts or any(count < 2 for count in counts):
        raise argparse.ArgumentTypeError(f"expected stream counts of 2 or more, separated by commas; got {text!r}")
    return counts


def _observed(args: argparse.Namespace) -> tuple[list, list[str]]:
    """The live-bytes pictures of ``--observe`` models (:mod:`srbench.observe.for_compare`)."""
    if not args.observe:
        return [], []
    from srbench.observe.for_compare import observation_pictures

    return observation_pictures(args.observe, batch=args.batch)


def _layout(text: str) -> tuple[str, str]:
    model, _, planner = text.rpartition(":")
    if not model or not planner:
        raise argparse.ArgumentTypeError(f"expected MODEL:PLANNER, got {text!r}")
    return model, planner


def run(args: argparse.Namespace) -> ExitStatus:
    from srbench.compare.output import write_report
    from srbench.compare.run import compare
    from srbench.compare.summary import summarize
    from srbench.compare.tables import text_report
    from srbench.planners import get_planner, planner_names
    from srbench.registry import unknown_name_message

    known = planner_names()
    planners = known if args.planners == ["all"] else args.planners
    unknown = [name for name in planners if name not in known]
    for name in unknown:
        print_error("compare", unknown_name_message("planner", name, known))
    if unknown:
        return ExitStatus.UNUSABLE
    try:
        _check_observed(args.observe or [])
        sources, failures = _sources(args)
        _check_layouts(args.layout or [], [source.name for source in sources], planners)
    except LookupError as error:
        print_error("compare", str(error))
        return ExitStatus.UNUSABLE
    origins = [(s.name, f"model {s.name!r}") for s in sources if s.zoo != "records"]
    if (clash := name_clash([*origins, *((path.stem, str(path)) for path in args.records)])) is not None:
        print_error("compare", clash)
        return ExitStatus.UNUSABLE
    if not sources and not failures:
        print_error("compare", "nothing to compare: no models selected and no --records")
        return ExitStatus.UNUSABLE
    given = planner_options({name: get_planner(name) for name in planners}, args.time_limit)
    options = {name: values for name, values in given.items() if values}
    comparison = compare(sources, planners, alignment=args.alignment, options=options)
    comparison.failures[:0] = failures
    for failure in comparison.failures:
        print_error("compare", failure)
    if not comparison.rows:
        print_error("compare", f"nothing could be planned; no report written to {args.out}")
        return ExitStatus.UNUSABLE
    print(text_report(comparison, summarize(comparison.rows, comparison.planners)))
    metadata = {"command": "srbench " + " ".join(sys.argv[1:]), "batch": args.batch, "decompose": args.decompose}
    observed, observe_failures = _observed(args)
    for failure in observe_failures:
        print_error("compare", failure)
    comparison.failures.extend(observe_failures)
    written = write_report(comparison, args.out, layouts=args.layout, metadata=metadata, extra_pictures=observed)
    for failure in written.failures:
        print_error("compare", failure)
    print(
        f"\nwrote {written.json}, {written.markdown}, {written.html} and "
        f"{len(written.pictures)} picture(s) in {written.figure_dir}"
    )
    failed = len(comparison.failures) + len(written.failures)
    if args.streams:
        from srbench.compare.streams import report_streams

        models = [source.name for source in sources if source.zoo != "records"]
        text, stream_failures = report_streams(
            models,
            planners,
            args.streams,
            args.schedulers,
            args.out,
            args.suite_results,
            planner_options=options,
            batch=args.batch,
            decompose=args.decompose,
        )
        print("\n" + text + f"\nwrote {args.out / 'compare-streams.json'} and {args.out / 'compare-streams.md'}")
        for failure in stream_failures:
            print_error("compare", failure)
        failed += len(stream_failures)
    return ExitStatus.of(done=len(comparison.rows), failed=failed)


def _check_layouts(layouts: Sequence[tuple[str, str]], sources: Sequence[str], planners: Sequence[str]) -> None:
    """Raise LookupError (naming the nearest names) for a ``--layout`` whose model is not
    compared or whose planner is not run: a typo is a usage error, found before planning."""
    from srbench.registry import UnknownPluginError, unknown_name_message

    for model, planner in layouts:
        if model not in sources:
            raise UnknownPluginError(
                f"--layout {model}:{planner}: " + unknown_name_message("compared model", model, list(sources))
            )
        if planner not in planners:
            raise UnknownPluginError(
                f"--layout {model}:{planner}: " + unknown_name_message("compared planner", planner, list(planners))
            )


def _check_observed(models: Sequence[str]) -> None:
    """Refuse an unknown ``--observe`` model before anything runs, as an unknown ``--models`` one is.

    Raises LookupError (with the known names); the picture is drawn only after the comparison,
    so a misspelt name found there would cost the whole run's time and then exit 1.
    """
    if models:
        from srbench.zoo import load_zoo

        zoo = load_zoo()
        for name in models:
            zoo.get(name)  # UnknownPluginError is a LookupError


def _sources(args: argparse.Namespace) -> tuple[list[Source], list[str]]:
    """The sources to compare, and a failure line per selected provider that is unavailable here.

    Raises LookupError (with the known names) for an unknown provider or model name.
    """
    from srbench.compare.run import Source

    sources: list[Source] = []
    failures: list[str] = []
    zoos = args.zoo or ([] if args.models or args.records else DEFAULT_ZOOS)
    if zoos or args.models:
        from srbench.registry import unknown_name_message
        from srbench.zoo import PROVIDERS, load_zoo

        zoo = load_zoo()
        for name in zoos:
            if name not in PROVIDERS.names():
                raise LookupError(unknown_name_message("model provider", name, PROVIDERS.names()))
            if name in zoo.unavailable:
                failures.append(f"model provider {name!r} is unavailable here: {zoo.unavailable[name]}")
        cases = zoo.select(providers=zoos) if zoos else []
        if args.models:
            wanted = [zoo.get(name) for name in args.models]  # UnknownPluginError is a LookupError
            cases = [case for case in wanted if not zoos or case.provider in zoos]
        sources += [Source(case.name, case.provider, _model_loader(zoo, case.name, args)) for case in cases]
    sources += [Source(path.stem, "records", partial(_csv_records, path, args.alignment)) for path in args.records]
    return sources, failures


def _csv_records(path: Path, alignment: int) -> Sequence[TensorUsageRecord]:
    """A record file's records, saying in one line where its gaps were read as alive."""
    from srbench.memory.sources import csv_instance, hull_note

    instance = csv_instance(path, alignment=alignment)
    if instance.hulled:
        print_error("compare", hull_note(str(path), instance.hulled))
    return instance.records


def _model_loader(zoo: Zoo, name: str, args: argparse.Namespace) -> Callable[[], Sequence[TensorUsageRecord]]:
    def load() -> Sequence[TensorUsageRecord]:
        from srbench.memory.sources import model_records

        return model_records(zoo, name, **capture_options(args)).records

    return load
