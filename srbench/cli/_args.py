"""Command-line pieces that several subcommands share: argparse value types, the options that
say how a model is captured and planned, and how those options reach the planners.

The leading underscore keeps :mod:`srbench.cli` from taking this module for a subcommand.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from enum import IntEnum
from pathlib import Path
from typing import Any


class ExitStatus(IntEnum):
    """What every srbench command's exit status means (the README's table says the same)."""

    DONE = 0  # everything asked for was done
    SOME_FAILED = 1  # some sources, cases or planners failed: each said so in one line; the rest was done
    UNUSABLE = 2  # a usage error (unknown name, bad option), or nothing could run at all

    @classmethod
    def of(cls, *, done: int, failed: int) -> ExitStatus:
        """The status of a command that did ``done`` pieces of work and saw ``failed`` fail."""
        if not done:
            return cls.UNUSABLE
        return cls.SOME_FAILED if failed else cls.DONE


def print_error(command: str, message: str) -> None:
    """One line on stderr, ``srbench COMMAND: message``: how every command reports a problem (a
    message of several lines, such as some of torch.export's, is joined into one)."""
    one_line = " ".join(line.strip() for line in message.splitlines() if line.strip())
    print(f"srbench {command}: {one_line}", file=sys.stderr)


# Seconds a searching planner (one whose plan() takes ``time_limit``, such as ``exact``) may spend
# per source: long enough to prove most inference graphs, short enough for a whole zoo.
DEFAULT_TIME_LIMIT = 10.0


def comma_separated(text: str) -> list[str]:
    """An argparse type: ``'a, b'`` -> ``['a', 'b']``; at least one name."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def _positive(convert: Callable[[str], float], noun: str, *, zero_too: bool = False) -> Callable[[str], Any]:
    """An argparse type: ``convert`` the text and insist on a value above zero (or not below it)."""
    kind = "non-negative" if zero_too else "positive"

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not (value >= 0 if zero_too else value > 0) or value == math.inf:
            raise argparse.ArgumentTypeError(f"expected a {kind} {noun}, got {text!r}")
        return value

    return parse


positive_int = _positive(int, "integer")
positive_float = _positive(float, "finite number")  # --time-limit: inf would never end
non_negative_int = _positive(int, "integer", zero_too=True)


def add_records_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str) -> None:
    """``--records FILE.csv...``: MiniMalloc CSV files, several after one flag or the flag repeated
    (both collect into one list, ``args.records``)."""
    parser.add_argument(
        "--records",
        action="extend",
        nargs="+",
        default=[],
        type=Path,
        metavar="FILE.csv",
        help=f"{help} (MiniMalloc's CSV format: id,lower,upper,size); "
        "several files after one flag, or the flag repeated",
    )


def name_clash(sources: Sequence[tuple[str, str]]) -> str | None:
    """Why ``sources``, (name, where it comes from) pairs, cannot be planned together: a source
    given twice, or two with one name (``a/x.csv`` and ``b/x.csv``, or model ``mlp`` and
    ``mlp.csv``); None when every name is distinct. Rows, pictures and saved records are filed by
    name: the second of two ``x.csv`` overwrote the first's saved records, and the report showed
    two rows named ``x`` that no one could tell apart."""
    seen: dict[str, str] = {}
    for name, origin in sources:
        if name in seen:
            if seen[name] == origin:
                return f"{origin} given twice; expected each source once"
            return (
                f"two sources are named {name!r}: {seen[name]} and {origin}; expected distinct names "
                "(results and saved records are filed by name)"
            )
        seen[name] = origin
    return None


def add_planning_options(parser: argparse.ArgumentParser) -> None:
    """``--batch``, ``--alignment``, ``--decompose``, ``--time-limit`` and ``--verbose``: how
    models are captured and analysed (see :func:`srbench.memory.sources.model_records`) and how
    long a searching planner may take."""
    parser.add_argument("--batch", type=positive_int, metavar="N", help="batch size of the example inputs")
    parser.add_argument(
        "--alignment", type=positive_int, default=64, metavar="BYTES", help="offset and size alignment (default 64)"
    )
    parser.add_argument(
        "--decompose", action="store_true", help="plan the core-ATen graph (export's run_decompositions())"
    )
    parser.add_argument(
        "--time-limit",
        type=positive_float,
        default=DEFAULT_TIME_LIMIT,
        metavar="SECONDS",
        help=f"time limit per source for searching planners such as exact (default {DEFAULT_TIME_LIMIT:g})",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show what torch.export prints while capturing")


def capture_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords of :func:`srbench.memory.sources.model_records` that
    :func:`add_planning_options` put in ``args``."""
    return {"batch": args.batch, "alignment": args.alignment, "decompose": args.decompose, "quiet": not args.verbose}


def planner_options(
    planners: Mapping[str, Callable[..., Any]], time_limit: float, capacity: int | None = None
) -> dict[str, dict[str, Any]]:
    """What each planner is given besides the records, by name: ``time_limit`` for those whose
    plan() takes it (searching planners), and ``capacity`` (a target in bytes, when given) for
    those whose plan() takes that; nothing for the others."""
    given: dict[str, dict[str, Any]] = {}
    for name, planner in planners.items():
        given[name] = {"time_limit": time_limit} if _takes(planner, "time_limit") else {}
        if capacity is not None and _takes(planner, "capacity"):
            given[name]["capacity"] = capacity
    return given


def _takes(planner: Callable[..., Any], keyword: str) -> bool:
    try:
        return keyword in inspect.signature(planner).parameters
    except (TypeError, ValueError):
        return False
