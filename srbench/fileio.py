"""Files and folders that appear whole or not at all.

Every results file srbench writes (reports, CSV records, asv results, the session summary) goes
through :func:`atomic_path`, and every folder written as one piece (a run's results, a report's
pictures) through :func:`atomic_directory`: the content is written under a temporary name in the
same folder, flushed, and renamed over the target (``os.replace`` is atomic on POSIX), so an
interrupted run leaves the old file or the new one, never half of one.

An exception (Ctrl-C included) removes the temporary at once. A process killed outright
(SIGKILL, a power cut) cannot clean up, so temporaries are named so that they cannot be taken for
results -- hidden, ending in ``.partial``, and carrying the writer's process id -- and the next
write into the same folder removes those whose writer is gone (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

TEMPORARY_SUFFIX = ".partial"
# ".<target name>.<pid>.<random>.partial": what atomic_path and atomic_directory create.
_TEMPORARY = re.compile(r"^\..+\.(?P<pid>\d+)\.[A-Za-z0-9_]+\.partial$")


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _process_exists(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries in ``directory`` left by writers that no longer run (killed while
    writing); returns what was removed. Those of live processes are left alone: they may still
    be renamed into place."""
    removed = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            match = _TEMPORARY.match(entry.name)
            if match is None or _process_exists(int(match["pid"])):
                continue
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _temporary_prefix(target: Path) -> str:
    return f".{target.name}.{os.getpid()}."


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    On any exception the temporary file is removed and ``path`` is left as it was. The file gets
    the permissions a plain ``open(path, "w")`` would give (mkstemp's are owner-only).
    """
    target = Path(path).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    handle, temporary_name = tempfile.mkstemp(
        prefix=_temporary_prefix(target), suffix=TEMPORARY_SUFFIX, dir=target.parent
    )
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


def _fsync_files(directory: Path) -> None:
    """Flush every file under ``directory`` to disk, so the rename never publishes empty files."""
    for file in directory.rglob("*"):
        if file.is_file():
            with open(file, "rb") as written:
                os.fsync(written.fileno())


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], *, replace: bool = True) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; on success it becomes ``path``.

    With ``replace``, an existing ``path`` is swapped out and removed, so the folder holds only
    what this writer put there (never files of an earlier run beside the new ones); without it,
    an existing ``path`` is an error (:class:`FileExistsError`) and the temporary is removed. On
    any exception the temporary is removed and ``path`` is left as it was.
    """
    target = Path(path).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target.parent)
    temporary = Path(tempfile.mkdtemp(prefix=_temporary_prefix(target), suffix=TEMPORARY_SUFFIX, dir=target.parent))
    try:
        yield temporary
        _fsync_files(temporary)
        os.chmod(temporary, 0o777 & ~_umask())
        if not replace:
            if target.exists():
                raise FileExistsError(f"{target} exists already")
            os.rename(temporary, target)
            return
        # The old folder goes to a temporary name first: a kill between the two renames leaves no
        # folder at ``path`` (and both temporaries for the next write to remove), never a mixture.
        old = temporary.with_name(temporary.name.removesuffix(TEMPORARY_SUFFIX) + "old" + TEMPORARY_SUFFIX)
        had_old = target.exists()
        if had_old:
            os.rename(target, old)
        os.rename(temporary, target)
        if had_old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


class NotUtf8Error(ValueError):
    """Bytes that are not UTF-8 text; ``line`` (1-based) is where the first bad byte is."""

    def __init__(self, line: int, byte: int):
        super().__init__(f"not UTF-8 text (byte 0x{byte:02x})")
        self.line = line


def decode_utf8(data: bytes) -> str:
    """The UTF-8 text in ``data``, without the byte-order mark some editors and spreadsheets put
    first; raises :class:`NotUtf8Error` with the line of the first byte that is not UTF-8, so a
    reader can name the file and the line instead of showing a traceback."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotUtf8Error(data[: error.start].count(b"\n") + 1, data[error.start]) from None
