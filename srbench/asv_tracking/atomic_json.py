"""An asv plugin that makes every JSON file asv writes appear whole or not at all.

asv writes its results, ``benchmarks.json``, ``machine.json`` and the published graph data with
``asv.util.write_json``, which truncates the target and streams into it: a run killed at that
moment leaves half a JSON file, and every later ``asv publish`` or ``asv compare`` fails on it.
Listed in ``asv.conf.json`` under ``"plugins"``, this module replaces that function with one that
writes a temporary file in the same folder, flushes it to disk and renames it over the target
(``os.replace`` is atomic on POSIX and Windows), so readers see the old file or the new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from srbench.fileio import atomic_path

_ORIGINAL_ATTRIBUTE = "_srbench_original_write_json"


def atomic_write_json(
    original: Callable[..., None],
) -> Callable[..., None]:
    """Wrap asv's ``write_json(path, data, api_version=None, compact=False)`` to be atomic.

    asv's own serialisation (indentation, key order, the ``version`` field) is kept by calling
    the original function on the temporary path.
    """

    def write_json(path: str, data: Any, api_version: int | None = None, compact: bool = False) -> None:
        with atomic_path(path) as temporary:
            original(str(temporary), data, api_version=api_version, compact=compact)

    setattr(write_json, _ORIGINAL_ATTRIBUTE, original)
    return write_json


def setup() -> None:
    """asv's plugin hook: install the atomic writer (once, however often asv loads the plugin)."""
    from asv import util

    if not hasattr(util.write_json, _ORIGINAL_ATTRIBUTE):
        util.write_json = atomic_write_json(util.write_json)
