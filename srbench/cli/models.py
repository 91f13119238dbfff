"""``srbench models``: every case of the zoo, its provider, family, size, and whether it works here."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from srbench.cli._args import ExitStatus, print_error
from srbench.formatting import aligned_table


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "models",
        help="list the model zoo's cases and whether each is available here",
        description="List every model case with its provider, family, parameter count and availability "
        "(with the reason when its provider cannot work here).",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON document instead of a table")
    parser.add_argument("--provider", action="append", help="only this provider's cases (repeatable)")
    parser.add_argument("--family", action="append", help="only this family's cases (repeatable)")
    parser.set_defaults(run=run)


def rows(providers: Sequence[str] | None = None, families: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One record per known case. Parameters are counted on the models built here; for a case that
    cannot be built here, the published count is shown when the provider states one."""
    from srbench.zoo import load_zoo

    listed = []
    for entry in load_zoo().entries():
        case = entry.case
        if (providers and case.provider not in providers) or (families and case.family not in families):
            continue
        parameters: int | None
        source: str | None
        if entry.available:
            parameters, source = case.parameter_count(), "counted"
        else:
            parameters = case.published_parameters
            source = None if parameters is None else "published"
        listed.append(
            {
                "name": case.name,
                "provider": case.provider,
                "family": case.family,
                "parameters": parameters,
                "parameters_source": source,
                "batch_size": case.batch_size,
                "dtype": str(case.dtype).removeprefix("torch."),
                "rtol": case.rtol,
                "atol": case.atol,
                "available": entry.available,
                "reason": entry.reason,
                "description": case.description,
            }
        )
    return listed


def _parameters_cell(row: dict[str, Any], marks: bool) -> str:
    """The count, marked ``*`` when published rather than counted (a space keeps digits aligned)."""
    mark = ("*" if row["parameters_source"] == "published" else " ") if marks else ""
    return ("-" if row["parameters"] is None else f"{row['parameters']:,}") + mark


def format_table(listed: list[dict[str, Any]], silent: dict[str, str]) -> str:
    """The listing, then each of ``silent`` (unavailable providers that list no case at all, by
    name and reason) in a line of its own."""
    header = ("NAME", "PROVIDER", "FAMILY", "PARAMETERS", "AVAILABLE")
    marks = any(row["parameters_source"] == "published" for row in listed)
    cells = [
        (
            row["name"],
            row["provider"],
            row["family"],
            _parameters_cell(row, marks),
            "yes" if row["available"] else f"no: {row['reason']}",
        )
        for row in listed
    ]
    lines = [aligned_table(header, cells, right_aligned={header.index("PARAMETERS")})]
    if marks:
        lines.append("* published count; the model cannot be built here")
    for provider, reason in sorted(silent.items()):
        lines.append(f"provider {provider!r} is unavailable and lists no cases: {reason}")
    return "\n".join(lines)


def check_filters(providers: Sequence[str] | None, families: Sequence[str] | None) -> None:
    """Unknown provider or family names are errors naming the nearest known ones, not empty listings."""
    from srbench.registry import UnknownPluginError, unknown_name_message
    from srbench.zoo import FAMILIES, PROVIDERS

    checks = (("model provider", providers, PROVIDERS.names()), ("model family", families, list(FAMILIES)))
    for kind, given, known in checks:
        for name in given or ():
            if name not in known:
                raise UnknownPluginError(unknown_name_message(kind, name, known))


def run(args: argparse.Namespace) -> ExitStatus:
    """Lists every case, available or not (an unavailable provider is part of the listing, not a
    failure of it): 0, or 2 for an unknown filter name."""
    from srbench.registry import UnknownPluginError
    from srbench.zoo import load_zoo

    try:
        check_filters(args.provider, args.family)
    except UnknownPluginError as error:
        print_error("models", str(error))
        return ExitStatus.UNUSABLE
    listed = rows(args.provider, args.family)
    zoo = load_zoo()
    if args.json:
        print(json.dumps({"models": listed, "unavailable_providers": zoo.unavailable}, indent=2))
    else:
        # Not a provider whose cases the filters left out: `--provider builtin` said torchvision,
        # which lists seven, "lists no cases".
        catalogued = {case.provider for case in zoo.unavailable_cases.values()}
        silent = {
            name: reason
            for name, reason in zoo.unavailable.items()
            if name not in catalogued and (not args.provider or name in args.provider)
        }
        print(format_table(listed, silent))
    return ExitStatus.DONE
