"""The bound of the runtime's small caches kept in use order (a ``dict`` whose entry is taken out
and put back last at each use): programs refused by signature, compiled call-form adapters, and
each bound program's adapters."""

from __future__ import annotations

from typing import Any


def keep_newest(entries: dict[Any, Any], count: int) -> None:
    """Drop the oldest entries of ``entries`` (insertion order: the least recently used first)
    past ``count``."""
    for stale in list(entries)[: max(0, len(entries) - count)]:
        del entries[stale]
