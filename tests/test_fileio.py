"""Files and folders written whole or not at all; temporaries of killed writers are recognisable
and removed by the next write into the same folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from srbench.fileio import (
    NotUtf8Error,
    atomic_directory,
    atomic_path,
    atomic_write_text,
    decode_utf8,
    remove_stale_temporaries,
)


def _dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_an_exception_while_writing_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise KeyboardInterrupt
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_temporaries_are_hidden_partial_files_named_after_the_writer(tmp_path):
    with atomic_path(tmp_path / "report.json") as temporary:
        assert temporary.name.startswith(f".report.json.{os.getpid()}.") and temporary.name.endswith(".partial")
        temporary.write_text("new")
    assert (tmp_path / "report.json").read_text() == "new"


def test_a_writer_killed_with_sigkill_leaves_a_temporary_that_the_next_write_removes(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    script = (
        "import os, signal, sys\n"
        "from srbench.fileio import atomic_path\n"
        "with atomic_path(sys.argv[1]) as temporary:\n"
        "    temporary.write_text('half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script, str(target)], check=False)
    assert killed.returncode == -signal.SIGKILL
    (leftover,) = [p for p in tmp_path.iterdir() if p.name != "report.json"]
    assert leftover.name.startswith(".report.json.") and leftover.name.endswith(".partial")
    assert target.read_text() == "old"

    atomic_write_text(tmp_path / "other.md", "next run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.md", "report.json"]


def test_temporaries_of_live_writers_are_left_alone(tmp_path):
    live = tmp_path / f".report.json.{os.getppid()}.abc123.partial"
    dead = tmp_path / f".report.json.{_dead_pid()}.abc123.partial"
    dead_folder = tmp_path / f".figures.{_dead_pid()}.xyz.partial"
    for path in (live, dead):
        path.write_text("x")
    dead_folder.mkdir()
    (dead_folder / "a.png").write_bytes(b"png")
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted([dead, dead_folder])
    assert [p.name for p in tmp_path.iterdir()] == [live.name]


def test_a_directory_is_replaced_whole(tmp_path):
    target = tmp_path / "figures"
    target.mkdir()
    (target / "earlier.png").write_bytes(b"old")
    with atomic_directory(target) as temporary:
        (temporary / "new.png").write_bytes(b"new")
        assert not (target / "new.png").exists()  # nothing visible before the end
    assert [p.name for p in target.iterdir()] == ["new.png"]
    assert [p.name for p in tmp_path.iterdir()] == ["figures"]


def test_an_interrupted_directory_leaves_the_old_one(tmp_path):
    target = tmp_path / "figures"
    target.mkdir()
    (target / "earlier.png").write_bytes(b"old")
    with pytest.raises(KeyboardInterrupt), atomic_directory(target) as temporary:
        (temporary / "new.png").write_bytes(b"new")
        raise KeyboardInterrupt
    assert [p.name for p in target.iterdir()] == ["earlier.png"]
    assert [p.name for p in tmp_path.iterdir()] == ["figures"]


def test_a_new_directory_never_replaces_an_existing_one_unless_asked(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(FileExistsError), atomic_directory(tmp_path / "run", replace=False) as temporary:
        (temporary / "summary.json").write_text("{}")
    assert list((tmp_path / "run").iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_utf8_text_drops_a_byte_order_mark_and_names_the_line_of_a_bad_byte():
    assert decode_utf8("\ufeffid\nx".encode()) == "id\nx"
    with pytest.raises(NotUtf8Error, match=r"^not UTF-8 text \(byte 0xff\)$") as caught:
        decode_utf8(b"a\nb\n\xff")
    assert caught.value.line == 3
