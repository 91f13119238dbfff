"""``srbench compare --observe MODEL``: the live-bytes picture of a model in the comparison's report.

Each named zoo model is estimated, prepared, planned and observed (:mod:`srbench.observe.sidebyside`)
and its picture (:mod:`srbench.observe.picture`) joins the comparison's pictures (PNG files, the
Markdown and the self-contained HTML). A model that cannot be observed costs its picture only:
one line says why, and the comparison goes on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from srbench.compare.output import Picture


def observation_pictures(models: Sequence[str], *, batch: int | None = None) -> tuple[list[Picture], list[str]]:
    """The live-bytes picture of each zoo model in ``models``, and one line per model that failed."""
    from srbench.memory.sources import _silenced
    from srbench.observe.picture import live_bytes_png
    from srbench.observe.sidebyside import side_by_side
    from srbench.zoo import load_zoo

    pictures: list[Picture] = []
    failures: list[str] = []
    for name in models:
        try:
            with _silenced(True):
                sbs = side_by_side(load_zoo().get(name), batch=batch)
            png = live_bytes_png(sbs)
        except Exception as error:  # capture, preparing, running or drawing: any of them costs this picture only
            failures.append(f"cannot observe model {name!r}: {type(error).__name__}: {error}")
            continue
        file_name = "observed-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".png"
        pictures.append(Picture(f"{name}: live bytes, estimated, planned and observed", file_name, png))
    return pictures, failures
