"""asv's results and site written whole or not at all, without changing asv.

asv writes its JSON files in place (open, truncate, stream), so a run killed mid-write leaves half
a file, on which every later ``asv publish`` or ``asv compare`` fails; and ``asv publish`` deletes
the site before writing the new one. asv has no setting for either, and patching its functions
would tie srbench to asv's internals. So srbench lets asv write into private copies:
:func:`staged_results` hands asv a copy of the results folder and afterwards moves each file asv
finished (it reads back as JSON) into the real folder with an atomic rename (``srbench.fileio``);
a file asv was writing when it stopped is left out, and the real folder keeps its previous
version. :func:`replace_directory` swaps a freshly published site in with two renames.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from srbench.fileio import atomic_path


@contextlib.contextmanager
def staged_results(results_dir: Path) -> Iterator[Path]:
    """Yield a private copy of ``results_dir``; on leaving (after an error or Ctrl-C too), the
    whole JSON files written there replace those of ``results_dir``."""
    with tempfile.TemporaryDirectory(prefix="srbench-asv-") as staging:
        staged = Path(staging) / "results"
        if results_dir.is_dir():
            shutil.copytree(results_dir, staged)
        staged.mkdir(exist_ok=True)
        try:
            yield staged
        finally:
            commit_results(staged, results_dir)


def commit_results(staged: Path, results_dir: Path) -> list[Path]:
    """Move every whole JSON file of ``staged`` that differs from its copy in ``results_dir``
    there, atomically; return the files replaced."""
    replaced = []
    for source in sorted(staged.rglob("*.json")):
        target = results_dir / source.relative_to(staged)
        data = source.read_bytes()
        if target.is_file() and target.read_bytes() == data:
            continue
        try:
            json.loads(data)
        except ValueError:
            print(f"warning: asv left {target.name} unfinished; {target} keeps its previous version", file=sys.stderr)
            continue
        with atomic_path(target) as temporary:
            temporary.write_bytes(data)
        replaced.append(target)
    return replaced


def staged_config(config: Path, results_dir: Path) -> Path:
    """A copy of the asv configuration ``config`` (beside ``results_dir``) that writes its results
    to ``results_dir``; its other folders are made absolute, as asv reads them from where it runs."""
    from asv import util

    from srbench.asv_tracking.regressions import CONFIG_PATHS, load_config

    absolute = load_config(config)
    settings = util.load_json(str(config), js_comments=True)
    settings.update({name: getattr(absolute, name) for name in CONFIG_PATHS}, results_dir=str(results_dir))
    staged = results_dir.parent / "asv.conf.json"
    staged.write_text(json.dumps(settings, indent=1), encoding="utf-8")
    return staged


def replace_directory(new: Path, target: Path) -> None:
    """Put folder ``new`` at ``target`` (same file system), removing the old one: readers see the
    old folder or the new one, except between two renames."""
    old = new.parent / f".{new.name}.old"
    if target.exists():
        os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old, ignore_errors=True)
