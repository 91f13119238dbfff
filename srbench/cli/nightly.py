"""``srbench nightly``: run asv on the commits not measured yet, publish, flag regressions
(see srbench.asv_tracking.nightly)."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from srbench.cli._args import print_error

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "asv.conf.json"
DESCRIPTION = """\
Run asv's benchmarks (benchmarks/: every case of the tracked suites, by default suites/quick.yaml,
and the planner and latency benchmarks) on the commits of the configured branch not measured yet,
write the results atomically, publish the HTML so that it works offline, and compare the newest
commit with the one measured before it.

exit status: 0 no regression, 1 a benchmark got worse by more than --factor (or newly fails),
2 the job could not run."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "nightly",
        help="asv: measure new commits, publish the HTML, exit 1 on a regression",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="asv configuration (default: %(default)s)")
    parser.add_argument(
        "--factor",
        type=float,
        default=None,
        help="a benchmark is a regression when it is this many times worse (default 1.1)",
    )
    parser.add_argument(
        "--machine",
        default=None,
        help="asv machine name (default: the host name; described in ~/.asv-machine.json if new)",
    )
    parser.add_argument(
        "-E",
        "--environment",
        default=None,
        help="asv environment spec, e.g. existing:.venv/bin/python to measure the installed HEAD "
        "(default: asv builds each commit into the configuration's virtualenv)",
    )
    parser.add_argument(
        "--python",
        dest="python_same",
        action="store_const",
        const="existing",
        default=None,
        help="same as -E existing (asv's --python=same): the interpreter running srbench",
    )
    parser.add_argument(
        "--max-commits", type=int, default=10, help="measure at most this many new commits (the newest)"
    )
    parser.add_argument("--quick", action="store_true", help="asv --quick: each benchmark once (a smoke run)")
    parser.add_argument(
        "-b",
        "--bench",
        action="append",
        default=[],
        help="only the benchmarks matching this regular expression (asv run --bench; repeatable)",
    )
    parser.add_argument("--no-publish", dest="publish", action="store_false", help="skip asv publish")
    parser.add_argument(
        "--suites",
        default=None,
        help="suite files or names asv tracks, comma-separated (SRBENCH_ASV_SUITES; default quick)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from srbench.asv_tracking.nightly import DEFAULT_FACTOR, NightlyOptions, NightlyStatus, run_nightly

    if not args.config.is_file():
        print_error("nightly", f"no asv configuration at {args.config}")
        return NightlyStatus.FAILED
    if args.factor is not None and not 1.0 < args.factor < math.inf:  # nan too: it flagged nothing
        print_error("nightly", f"--factor must be a finite number greater than 1 (e.g. 1.1 for 10%), got {args.factor}")
        return NightlyStatus.FAILED
    if args.max_commits < 1:
        print_error("nightly", f"--max-commits must be at least 1, got {args.max_commits}")
        return NightlyStatus.FAILED
    for pattern in args.bench:  # asv finds a bad one only after building its environment
        try:
            re.compile(pattern)
        except re.error as error:
            print_error("nightly", f"--bench {pattern!r}: not a valid regular expression ({error})")
            return NightlyStatus.FAILED
    if args.suites is not None and (problem := _suites_problem(args.suites, args.config)) is not None:
        print_error("nightly", problem)
        return NightlyStatus.FAILED
    options = NightlyOptions(
        config=args.config.absolute(),
        factor=args.factor or DEFAULT_FACTOR,
        machine=args.machine,
        environment=args.environment or args.python_same,
        max_commits=args.max_commits,
        quick=args.quick,
        publish=args.publish,
        suites=args.suites,
        asv_args=tuple(f"--bench={pattern}" for pattern in args.bench),
    )
    return run_nightly(options)


def _suites_problem(suites: str, config: Path) -> str | None:
    """Why ``--suites`` cannot be run (a name that is no suite file, a suite that does not load),
    or None: checked here, in seconds, where asv found out only after building its environment,
    in the benchmark discovery, as one line among its own."""
    import os

    from srbench.asv_tracking.suite_selection import SUITES_VARIABLE, selected_cases
    from srbench.suites import SuiteError

    try:
        selected_cases(config.parent / "suites", {**os.environ, SUITES_VARIABLE: suites})
    except SuiteError as error:
        return f"--suites {suites}: {error}"
    return None
