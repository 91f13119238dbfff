"""Plugins by name, through Python entry points.

Planners, runtimes and model providers are all found the same way: a third party adds one with
a line in its own ``pyproject.toml`` under the group, and srbench loads it by name. Unknown names
fail with the closest known names, so a typo in a suite or on the command line is obvious.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any


class UnknownPluginError(KeyError):
    """A name that no installed plugin of the group answers to."""

    def __str__(self) -> str:  # KeyError quotes its message; show it plainly
        return str(self.args[0])


class PluginConflict(ValueError):
    """Two plugins name one thing alike (two model providers, one model name): which one the name
    means cannot be chosen, so the command stops (the command line says so in one line, exit 2)."""


def nearest(name: str, choices: list[str], n: int = 3) -> list[str]:
    """The known names closest to ``name`` (for "did you mean" messages)."""
    return difflib.get_close_matches(name, choices, n=n, cutoff=0.4)


def unknown_name_message(kind: str, name: str, choices: list[str]) -> str:
    close = nearest(name, choices)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (known: {', '.join(sorted(choices))})"


class Registry:
    """The plugins of one entry-point group, loaded lazily by name."""

    def __init__(self, group: str, kind: str):
        self.group = group
        self.kind = kind

    def entry_points(self) -> dict[str, EntryPoint]:
        return _group(self.group)

    def names(self) -> list[str]:
        return sorted(self.entry_points())

    def load(self, name: str) -> Any:
        found = self.entry_points().get(name)
        if found is None:
            raise UnknownPluginError(unknown_name_message(self.kind, name, self.names()))
        return found.load()


@cache
def _group(group: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}
