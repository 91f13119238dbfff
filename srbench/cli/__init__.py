"""The ``srbench`` command line.

Each subcommand is a module of this package with a ``register(subparsers)`` function that adds
its parser and sets ``run=callable(args) -> int``; modules are discovered, so adding a
subcommand touches no other file. Heavy imports (torch) happen inside ``run``, keeping
``srbench --help`` fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="srbench",
        description="Static runtimes and memory planners for PyTorch inference: plan, run, compare.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:
        # The reader went away (`srbench models | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
