"""asv's configuration read from anywhere, and its results written whole, without changing asv.

asv writes its JSON files in place (open, truncate, stream), so a run killed mid-write leaves half
a file on which every later ``asv publish`` or ``asv compare`` fails, and asv has no setting for
that; patching its functions would tie srbench to asv's internals. So :func:`staged_results` lets
asv write into a private copy of the results and then copies each file asv finished (it reads
back as JSON) into the real folder with an atomic rename (``srbench.fileio``); a file asv was
writing when it stopped keeps its previous version.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from srbench.fileio import atomic_path

CONFIG_PATHS = ("repo", "results_dir", "html_dir", "benchmark_dir", "env_dir")


def load_config(config: Path) -> Any:
    """asv's configuration object for ``config`` with its folders absolute: asv resolves them
    against the working directory, these against the file's folder, so that it runs from anywhere."""
    from asv.config import Config
    from asv.util import UserError

    config = Path(config).absolute()
    try:
        conf = Config.load(str(config))
    except ValueError as error:  # json5's parse error, which asv passes on: a traceback naming no file
        raise UserError(f"{config}: not an asv configuration (JSON): {error}") from error
    for name in CONFIG_PATHS:
        setattr(conf, name, str(config.parent / getattr(conf, name)))
    return conf


@contextlib.contextmanager
def staged_results(config: Path) -> Iterator[Path]:
    """Yield a copy of the asv configuration ``config`` that writes into a copy of its results
    folder (``results`` beside it); on leaving (after an error or Ctrl-C too), the whole JSON
    files that changed there replace those of the configured folder."""
    from asv import util

    conf = load_config(config)
    with tempfile.TemporaryDirectory(prefix="srbench-asv-") as folder:
        staged = Path(folder) / "results"
        staged.mkdir()
        if Path(conf.results_dir).is_dir():
            shutil.copytree(conf.results_dir, staged, dirs_exist_ok=True)
        settings = util.load_json(str(config), js_comments=True)
        settings.update({name: getattr(conf, name) for name in CONFIG_PATHS}, results_dir=str(staged))
        (staged.parent / "asv.conf.json").write_text(json.dumps(settings, indent=1), encoding="utf-8")
        try:
            yield staged.parent / "asv.conf.json"
        finally:
            shutil.copytree(staged, conf.results_dir, copy_function=_copy_if_whole, dirs_exist_ok=True)


def _copy_if_whole(source: str, target: str) -> None:
    """``shutil.copytree``'s copy function: ``source`` replaces ``target`` atomically if it differs
    and reads as JSON; a file asv left unfinished is skipped with a warning."""
    data = Path(source).read_bytes()
    if Path(target).is_file() and Path(target).read_bytes() == data:
        return
    try:
        json.loads(data)
    except ValueError:
        print(f"warning: asv left {Path(target).name} unfinished; {target} keeps its previous version", file=sys.stderr)
        return
    with atomic_path(target) as temporary:
        temporary.write_bytes(data)
