"""Regressions between two measured commits, decided by asv's own comparison.

``asv compare`` prints the table but always exits 0, and ``asv continuous`` times both commits
again; the nightly already has both results. So this calls the function behind ``asv compare``
(``Compare.print_table``), which applies ``--factor`` and, where samples allow, asv's statistical
test, counts a benchmark that newly fails as worse, and returns whether anything got worse. Every
srbench benchmark is lower-is-better (seconds, bytes, ratio to the lower bound, allocations).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_FACTOR = 1.1


class ComparisonError(RuntimeError):
    """The two commits cannot be compared (no results for one of them)."""


@dataclass(frozen=True)
class Comparison:
    before: str
    after: str
    factor: float
    worsened: bool
    improved: bool
    table: str  # asv's table of the benchmarks that changed


CONFIG_PATHS = ("repo", "results_dir", "html_dir", "benchmark_dir", "env_dir")


def load_config(config_path: Path) -> Any:
    """asv's configuration object for ``config_path``, its folders made absolute.

    asv resolves them against the working directory (it expects to run where the file is);
    resolving them against the file's folder lets the nightly and the tests run from anywhere.
    """
    from asv.config import Config

    config_path = Path(config_path).absolute()
    conf = Config.load(str(config_path))
    for name in CONFIG_PATHS:
        setattr(conf, name, str(config_path.parent / getattr(conf, name)))
    return conf


def compare_commits(
    config_path: Path,
    before: str,
    after: str,
    *,
    machine: str,
    factor: float = DEFAULT_FACTOR,
    env_names: Sequence[str] | None = None,
) -> Comparison:
    """Compare the results of commit ``after`` with those of ``before`` on ``machine`` (and, when
    given, only in the asv environments ``env_names``)."""
    from asv import util
    from asv.commands.compare import Compare

    if factor <= 1.0:
        raise ValueError(f"factor must be greater than 1 (a ratio such as 1.1 for 10%), got {factor}")
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            worsened, improved = Compare.print_table(
                load_config(config_path),
                before,
                after,
                factor=factor,
                split=True,
                only_changed=True,
                machine=machine,
                env_names=list(env_names) if env_names is not None else None,
            )
    except util.UserError as error:
        raise ComparisonError(f"cannot compare {before} with {after} on machine {machine!r}: {error}") from error
    return Comparison(before, after, factor, bool(worsened), bool(improved), output.getvalue())
