"""Which suite cases asv tracks, read from the same suite files pytest runs.

asv imports the benchmark module several times per run (discovery, then the benchmark processes)
and needs the same parameters each time, so the selection is a pure function of the suite files
and the environment: ``SRBENCH_ASV_SUITES`` names the suite files (paths, or names of files in
``suites/``, separated by commas; default ``quick``, the suite CI runs; ``none`` selects no case,
so that ``asv run --bench other_module`` does not measure the suites) and ``SRBENCH_ASV_CASES``
optionally keeps only the case ids matching a regular expression (a quick look at one model).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from srbench.suites import CaseSpec, SuiteError, load_suite

SUITES_VARIABLE = "SRBENCH_ASV_SUITES"
CASES_VARIABLE = "SRBENCH_ASV_CASES"


def suite_path(entry: str, suites_dir: Path) -> Path:
    """The file of one entry of ``SRBENCH_ASV_SUITES``: a suite name (``quick``), or a path (a
    relative one from the repository's root too, as asv runs the benchmarks elsewhere)."""
    path = Path(entry) if entry.endswith((".yaml", ".yml")) else suites_dir / f"{entry}.yaml"
    path = path if path.is_file() else suites_dir.parent / path
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in suites_dir.glob("*.yaml"))) or "(no suites found)"
        raise SuiteError(Path(entry), SUITES_VARIABLE, f"no such suite file; expected a path or one of {known}")
    return path


def selected_cases(suites_dir: Path, environ: Mapping[str, str] = os.environ) -> dict[str, CaseSpec]:
    """The tracked cases by id, in suite order (a case in two suites counts once); none for ``none``."""
    entries = [entry.strip() for entry in (environ.get(SUITES_VARIABLE) or "quick").split(",") if entry.strip()]
    try:
        keep = re.compile(environ.get(CASES_VARIABLE) or "")
    except re.error as error:
        raise SuiteError(suites_dir, CASES_VARIABLE, f"not a valid regular expression ({error})") from error
    if entries == ["none"]:
        return {}
    cases = {case.id: case for entry in entries for case in load_suite(suite_path(entry, suites_dir)).cases}
    if not (kept := {id_: case for id_, case in cases.items() if keep.search(id_)}):
        raise SuiteError(suites_dir, SUITES_VARIABLE, f"the suites {entries} have no case matching {CASES_VARIABLE}")
    return kept
