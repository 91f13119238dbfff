"""Which suite cases asv tracks, read from the same suite files pytest runs.

asv imports the benchmark module several times per run (discovery, then every benchmark
process) and needs the same parameter grid each time, so the selection is a pure function of the
environment: ``SRBENCH_ASV_SUITES`` names the suite files (paths, or names of files in
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
DEFAULT_SUITES = "quick"
NO_SUITES = "none"


def suite_paths(spec: str, suites_dir: Path) -> list[Path]:
    """The files named by a comma-separated ``spec`` of paths or suite names (``quick``)."""
    paths = []
    for entry in (part.strip() for part in spec.split(",")):
        if not entry:
            continue
        candidate = Path(entry)
        if candidate.suffix not in (".yaml", ".yml"):
            candidate = suites_dir / f"{entry}.yaml"
        elif not candidate.is_absolute() and not candidate.exists():
            candidate = suites_dir.parent / candidate
        if not candidate.is_file():
            known = sorted(p.stem for p in suites_dir.glob("*.yaml"))
            raise SuiteError(
                candidate,
                SUITES_VARIABLE,
                f"no such suite file; expected a path or one of {', '.join(known) or '(no suites found)'}",
            )
        paths.append(candidate)
    if not paths:
        raise SuiteError(suites_dir, SUITES_VARIABLE, f"names no suite; expected e.g. {DEFAULT_SUITES!r}")
    return paths


def selected_cases(suites_dir: Path, environ: Mapping[str, str] = os.environ) -> dict[str, CaseSpec]:
    """The tracked cases by id, in suite order. A case id found in two suites is measured once."""
    spec = environ.get(SUITES_VARIABLE) or DEFAULT_SUITES
    if spec == NO_SUITES:
        return {}
    pattern = environ.get(CASES_VARIABLE)
    try:
        keep = re.compile(pattern) if pattern else None
    except re.error as error:
        raise SuiteError(
            suites_dir, CASES_VARIABLE, f"not a valid regular expression ({error}): {pattern!r}"
        ) from error
    cases: dict[str, CaseSpec] = {}
    for path in suite_paths(spec, suites_dir):
        for case in load_suite(path).cases:
            if keep is None or keep.search(case.id):
                cases.setdefault(case.id, case)
    return cases
