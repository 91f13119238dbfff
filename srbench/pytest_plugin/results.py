"""Where the results of ``pytest suites/... --benchmark`` go, so that none is ever lost:

- ``runs/<run id>/``: one folder per session, never overwritten: ``summary.json`` and
  ``summary.md`` (every case of the session, marked ``complete`` or ``partial``) and
  ``profiles/<suite>/<case id>.json`` (each measured case's full per-op profile);
- ``suites-summary.json`` and ``.md``: the merged view, per case (suite and case id) the latest
  result of a *complete* session, with the run it came from. A session that stopped early
  (Ctrl-C, ``-x``) is kept in its own folder and never replaces what the merged view holds; a
  session with ``-k`` replaces only the cases it ran.

Each run folder appears whole (written under a temporary name, then renamed: see
:mod:`srbench.fileio`), the merged view is rewritten atomically under a lock on the results
folder (two sessions finishing together both land), and a merged view that cannot be read is set
aside under another name rather than overwritten.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srbench.fileio import atomic_directory, atomic_write_text
from srbench.formatting import escape_markdown
from srbench.pytest_plugin.summary import CaseOutcome, Row, by_model, case_key, counts, render_markdown, summary_rows

MERGED_NAME = "suites-summary"
RUNS = "runs"
PROFILES = "profiles"


class RunStatus(enum.Enum):
    COMPLETE = "complete"  # every selected case ran
    PARTIAL = "partial"  # stopped early: interrupted, or stopped at a failure (-x, --maxfail)


@dataclass(frozen=True)
class SessionRun:
    """What one pytest session measured, and whether it ran to its end."""

    outcomes: Sequence[CaseOutcome]
    status: RunStatus
    started: datetime.datetime
    command: Sequence[str]
    timed: bool  # pytest-benchmark timed the cases (it does not under xdist)
    reason: str = ""  # why the run is partial


@dataclass(frozen=True)
class WrittenRun:
    """What :func:`write_run` wrote: the run's folder and files, and the merged view's files
    (``None`` when the run was partial and left the merged view as it was)."""

    run_id: str
    run_dir: Path
    rows: list[Row]  # the run's cases, as in its summary
    files: tuple[Path, ...]
    profiles: int
    merged: tuple[Path, ...] | None
    merged_cases: int
    set_aside: Path | None  # an unreadable merged view, moved here instead of overwritten


def _file_part(text: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(text)) or "_"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (flock on the folder itself: no lock file left)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: sessions finishing at the same moment are not serialized
        yield
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _free_run_id(runs: Path, started: datetime.datetime) -> str:
    base = started.astimezone(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_id, number = base, 1
    while (runs / run_id).exists():
        number += 1
        run_id = f"{base}-{number}"
    return run_id


def _save_profiles(folder: Path, run_id: str, outcomes: Sequence[CaseOutcome]) -> dict[str, str]:
    """Write each measured case's per-op profile; returns, by case key, its path relative to the
    results folder (where it will be once the run folder is in place)."""
    saved = {}
    for outcome in outcomes:
        profile = (outcome.result or {}).get("op_profile_ms")
        if not profile or not outcome.case:
            continue
        relative = Path(PROFILES, _file_part(outcome.case["suite"]), f"{_file_part(outcome.case['id'])}.json")
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        document = {"case": dict(outcome.case), "op_profile_ms": profile}
        (folder / relative).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        saved[case_key(outcome.case)] = (Path(RUNS, run_id) / relative).as_posix()
    return saved


def _document(rows: Sequence[Row], **fields: Any) -> dict[str, Any]:
    return {**fields, "counts": counts(rows), "models": by_model(rows)}


def _rows_of(document: dict[str, Any]) -> list[Row]:
    """The rows of a summary document (and of the single-file summaries of earlier versions,
    whose rows were all passed cases and carry no run)."""
    rows = [row for group in document["models"].values() for row in group]
    return [{"outcome": "passed", "run": "", **row} for row in rows]


def _read_merged(path: Path) -> tuple[list[Row], Path | None]:
    """The merged view's rows; one that cannot be read is moved aside (returned) and counts as empty."""
    if not path.exists():
        return [], None
    try:
        return _rows_of(json.loads(path.read_text(encoding="utf-8"))), None
    except (ValueError, KeyError, TypeError, AttributeError):
        aside = path.with_name(f"{path.stem}.unreadable-{datetime.datetime.now():%Y%m%dT%H%M%S}{path.suffix}")
        os.replace(path, aside)
        return [], aside


def merge(previous: Sequence[Row], new: Sequence[Row], run_id: str) -> list[Row]:
    """``previous`` with each case of ``new`` put in (tagged with ``run_id``), in place of the
    same case's earlier row or after the others."""
    merged = {case_key(row): row for row in previous}
    for row in new:
        merged[case_key(row)] = {**row, "run": run_id}
    return list(merged.values())


def write_run(directory: Path, run: SessionRun) -> WrittenRun:
    """Write ``run``'s folder under ``directory/runs/``; if it is complete, merge its cases into
    the merged view. See the module's docstring for the layout."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    finished = datetime.datetime.now(datetime.timezone.utc)
    with _locked(directory):
        run_id = _free_run_id(directory / RUNS, run.started)
        run_dir = directory / RUNS / run_id
        with atomic_directory(run_dir, replace=False) as folder:
            profiles = _save_profiles(folder, run_id, run.outcomes)
            rows = summary_rows(run.outcomes, profiles)
            fields = {
                "run": run_id,
                "status": run.status.value,
                "reason": run.reason,
                "started": run.started.isoformat(timespec="seconds"),
                "finished": finished.isoformat(timespec="seconds"),
                "command": list(run.command),
                "timed": run.timed,
            }
            (folder / "summary.json").write_text(json.dumps(_document(rows, **fields), indent=2) + "\n")
            (folder / "summary.md").write_text(render_markdown(f"srbench suite run {run_id}", _run_preamble(run), rows))
        files = (run_dir / "summary.json", run_dir / "summary.md")
        if run.status is not RunStatus.COMPLETE:
            return WrittenRun(run_id, run_dir, rows, files, len(profiles), None, 0, None)
        merged_json, merged_markdown = directory / f"{MERGED_NAME}.json", directory / f"{MERGED_NAME}.md"
        previous, set_aside = _read_merged(merged_json)
        merged = merge(previous, rows, run_id)
        runs = sorted({row["run"] for row in merged if row.get("run")})
        document = _document(merged, updated=finished.isoformat(timespec="seconds"), runs=runs)
        atomic_write_text(merged_json, json.dumps(document, indent=2) + "\n")
        preamble = [
            f"Updated {document['updated']}: per case, the latest result of a complete `--benchmark` run "
            f"(runs {', '.join(runs)}; each row's run is in the JSON; every run is kept in `{RUNS}/`).",
            "",
        ]
        atomic_write_text(merged_markdown, render_markdown("srbench suite summary", preamble, merged))
    merged_files = (merged_json, merged_markdown)
    return WrittenRun(run_id, run_dir, rows, files, len(profiles), merged_files, len(merged), set_aside)


def _run_preamble(run: SessionRun) -> list[str]:
    lines = [f"Started {run.started.isoformat(timespec='seconds')}: {escape_markdown(' '.join(run.command))}."]
    if run.status is not RunStatus.COMPLETE:
        lines.append(f"**Partial run** ({run.reason}): not merged into the suite summary.")
    if not run.timed:
        lines.append("Latency: n/a (run with `--benchmark`, without `-n`: pytest-benchmark does not time under xdist).")
    return [*lines, ""]
