"""``srbench instances``: write hard memory-planning instances with a known packing, as MiniMalloc CSV.

Each instance is a time x capacity rectangle cut into 150-500 buffers
(:func:`srbench.memory.instances.hard_instance`, one per seed): a packing within the capacity
exists (it is the file's ``offset`` column), greedy planners need 1.1-1.4 times it. The files are
named ``cut-<seed>.<capacity>.csv`` like MiniMalloc's published instances, so ``srbench plan
--records`` and ``srbench compare --records`` plan them as they plan those.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from srbench.cli._args import ExitStatus, non_negative_int, positive_int, print_error

# Generated files go under results/ (ignored by git as a whole), beside the other generated results.
DEFAULT_DIR = Path("results") / "instances"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "instances",
        help="write hard planning instances with a known packing (MiniMalloc CSV)",
        description="Write generated hard memory-planning instances (a time x capacity rectangle cut into "
        "buffers, so a packing within the capacity is known) as MiniMalloc CSV files, one per seed.",
    )
    parser.add_argument("--count", type=positive_int, default=50, help="how many instances (default 50)")
    parser.add_argument(
        "--first-seed", type=non_negative_int, default=0, metavar="SEED", help="seed of the first (default 0)"
    )
    parser.add_argument(
        "--buffers", type=positive_int, metavar="N", help="buffers per instance (default: drawn from 150-500)"
    )
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_DIR, metavar="DIR", help=f"folder to write to (default {DEFAULT_DIR}/)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitStatus:
    from srbench.memory.instances import hard_instance, write_instance

    for seed in range(args.first_seed, args.first_seed + args.count):
        try:
            path = write_instance(hard_instance(seed, buffers=args.buffers), args.out)
        except ValueError as error:  # more buffers than the rectangle has units
            print_error("instances", f"--buffers {args.buffers}: {error}")
            return ExitStatus.UNUSABLE
        except OSError as error:
            print_error("instances", f"{args.out}: cannot write: {error.strerror or error}")
            return ExitStatus.UNUSABLE
        print(path)
    return ExitStatus.DONE
