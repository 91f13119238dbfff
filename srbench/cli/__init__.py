"""The ``srbench`` command line.

Each subcommand is a module of this package with a ``register(subparsers)`` function that adds
its parser and sets ``run=callable(args) -> int``; modules are discovered, so adding a
subcommand touches no other file. Heavy imports (torch) happen inside ``run``, keeping
``srbench --help`` fast.

Every command exits with :class:`srbench.cli._args.ExitStatus`: 0 when everything asked for was
done, 1 when some sources or cases failed (each said in one line on stderr), 2 for a usage error
or when nothing could run; argparse's own usage errors are 2 as well, in one line too. Ctrl-C is 130, as in shells.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import NoReturn

from srbench.cli._args import ExitStatus
from srbench.registry import PluginConflict

INTERRUPTED = 128 + 2  # killed by SIGINT, as a shell reports it


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse's parser, its usage errors one line on stderr as every other srbench problem is
    (``srbench plan: argument --time-limit: expected a positive number, got 'abc'``), where
    argparse prints the whole usage first; the subcommands' parsers are of this class too
    (``add_subparsers`` makes its parsers of the parent's class). The usage is one ``--help`` away."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitStatus.UNUSABLE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
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
    except KeyboardInterrupt:
        print(f"srbench {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except PluginConflict as error:  # installed plugins clash (a model name twice): nothing can run
        print(f"srbench {args.command}: {error}", file=sys.stderr)
        return ExitStatus.UNUSABLE
    except BrokenPipeError:
        # The reader went away (`srbench models | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as error:
        if error.filename is None:
            raise
        # A path given that cannot be written or read as asked (a folder where a file goes, a
        # file where a folder goes): `--picture /tmp` and `--out FILE` ended in a traceback. A
        # rename names its target second.
        path = error.filename2 if error.filename2 is not None else error.filename
        print(f"srbench {args.command}: {path}: {error.strerror or error}", file=sys.stderr)
        return ExitStatus.UNUSABLE


if __name__ == "__main__":
    sys.exit(main())
