"""Regressions between two measured commits, decided by asv's own comparison.

``asv compare`` prints the table but always exits 0, and ``asv continuous`` times both commits
again; the nightly already has both results. So this calls the function behind ``asv compare``
(``Compare.print_table``), which applies the factor and, where samples allow, asv's statistical
test, counts a benchmark that newly fails as worse, and returns whether anything got worse. Every
srbench benchmark is lower-is-better (seconds, bytes, ratio to the lower bound, allocations).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from srbench.asv_tracking.staging import load_config

DEFAULT_FACTOR = 1.1


class ComparisonError(RuntimeError):
    """The two commits cannot be compared (no results for one of them)."""


@dataclass(frozen=True)
class Comparison:
    worsened: bool
    improved: bool
    table: str  # asv's table of the benchmarks that changed


def compare_commits(
    config: Path, before: str, after: str, *, machine: str, factor: float, env_names: Sequence[str] | None = None
) -> Comparison:
    """Compare the results of commit ``after`` with those of ``before`` on ``machine`` (and, when
    given, only in the asv environments ``env_names``); ``factor`` is a ratio above 1."""
    from asv import util
    from asv.commands.compare import Compare

    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output):
            worsened, improved = Compare.print_table(
                load_config(config),
                before,
                after,
                factor=factor,
                split=True,
                only_changed=True,
                machine=machine,
                env_names=None if env_names is None else list(env_names),
            )
    except util.UserError as error:
        raise ComparisonError(f"cannot compare {before} with {after} on machine {machine!r}: {error}") from error
    return Comparison(bool(worsened), bool(improved), output.getvalue())
