"""Files that appear whole or not at all.

Every results file srbench writes (reports, CSV records, asv results, the session summary) goes
through :func:`atomic_path`: the content is written to a temporary file in the same folder,
flushed to disk, and renamed over the target (``os.replace`` is atomic on POSIX and Windows), so
an interrupted run leaves the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    On any exception the temporary file is removed and ``path`` is left as it was. The file gets
    the permissions a plain ``open(path, "w")`` would give (mkstemp's are owner-only).
    """
    target = Path(path).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    os.close(handle)
    temporary = Path(temporary_name)
    try:
        yield temporary
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) so that no reader ever sees part of it."""
    with atomic_path(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
