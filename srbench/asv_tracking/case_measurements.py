"""Each tracked case measured once per code version, kept on disk for asv's processes.

asv needs every benchmark's parameters when it imports the benchmark module, and the node kinds
of a case's per-op profile are only known once the case has run; asv also imports the module in
a fresh process per benchmark, and ``setup_cache`` is not parametrized. So the expensive part
(preparing the runtime, profiling it, reading its memory plan) runs here once per case and
version of the code, in a subprocess (one for all the cases still to measure, so torch is
imported once; a case that crashes or hangs it is recorded as failed and a new subprocess takes
the rest), and the numbers, or the failure, are written to a JSON file per case that every later
import reads. asv imports this module for discovery and again to run the benchmarks, and needs
the same parameter grid both times, so a failure is cached too rather than measured again (delete
``.asv/measurements`` to retry after fixing the environment rather than the code), and the first
import of an asv run pins the code version for the others (:func:`asv_run_key`).

The cache key covers what the numbers depend on: the case's settings, the source of the
installed ``srbench`` and ``srbench_models`` packages, the torch version and the interpreter.
Only the newest few code versions are kept.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from srbench.fileio import atomic_write_text
from srbench.suites import CaseSpec

CACHE_VARIABLE = "SRBENCH_ASV_CACHE"
MEASURE_TIMEOUT_VARIABLE = "SRBENCH_ASV_MEASURE_TIMEOUT"
DEFAULT_MEASURE_TIMEOUT_S = 900.0  # per case
KEPT_CODE_VERSIONS = 8
_FORMAT_VERSION = 1
_LINE_PREFIX = "srbench-case-metrics "  # marks the subprocess's result lines among other output


@dataclass(frozen=True)
class CaseMetrics:
    """The tracked numbers of one case. ``None`` where the runtime has no such number
    (eager plans no memory). ``allocations_per_run`` and ``observed_peak_bytes`` are what
    ``torch.profiler`` saw in one steady-state call; ``failure`` holds the error of a case that could not be measured
    and ``skipped`` the reason of one that does not apply here (an unsupported runtime)."""

    case_id: str
    planned_bytes: int | None = None
    lower_bound_bytes: int | None = None
    allocations_per_run: float | None = None
    observed_peak_bytes: int | None = None
    op_seconds_by_kind: dict[str, float] = field(default_factory=dict)
    failure: str | None = None
    skipped: str | None = None

    @property
    def lower_bound_ratio(self) -> float | None:
        if self.planned_bytes is None or not self.lower_bound_bytes:
            return None
        return self.planned_bytes / self.lower_bound_bytes

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseMetrics:
        return cls(**data)


def default_cache_dir(repo_root: Path) -> Path:
    return Path(os.environ.get(CACHE_VARIABLE) or repo_root / ".asv" / "measurements")


def _package_source_digest(module_names: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for module_name in module_names:
        spec = importlib.util.find_spec(module_name)
        if spec is None or not spec.submodule_search_locations:
            digest.update(f"{module_name}:absent".encode())
            continue
        for root in spec.submodule_search_locations:
            for source in sorted(Path(root).rglob("*.py")):
                digest.update(str(source.relative_to(root)).encode())
                digest.update(source.read_bytes())
    return digest.hexdigest()


def code_fingerprint() -> str:
    """What the measurements of a given case depend on besides the case itself."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "absent"
    parts = [str(_FORMAT_VERSION), _package_source_digest(["srbench", "srbench_models"]), torch_version, sys.executable]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def case_file_name(case: CaseSpec) -> str:
    settings = json.dumps(case.to_json(), sort_keys=True, default=str)
    return hashlib.sha256(settings.encode()).hexdigest()[:24] + ".json"


def _pump(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def measure_in_subprocess(cases: Sequence[CaseSpec], timeout_s: float) -> Iterator[tuple[CaseSpec, CaseMetrics]]:
    """Measure ``cases`` in a fresh interpreter, yielding each case's metrics as it is done.

    When the subprocess dies or spends more than ``timeout_s`` on one case, that case is recorded
    as failed (with the end of its error output) and a new subprocess takes the rest.
    """
    remaining = list(cases)
    while remaining:
        with tempfile.TemporaryFile("w+") as errors:
            process = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(json.dumps([case.to_json() for case in remaining]))
            process.stdin.close()
            lines: queue.Queue[str | None] = queue.Queue()
            threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
            problem = None
            while remaining and problem is None:
                try:
                    line = lines.get(timeout=timeout_s)
                except queue.Empty:
                    problem = f"measuring took longer than {timeout_s:.0f} s ({MEASURE_TIMEOUT_VARIABLE})"
                    break
                if line is None:
                    problem = f"measuring exited with status {process.wait()}"
                elif line.startswith(_LINE_PREFIX):
                    yield remaining.pop(0), CaseMetrics.from_json(json.loads(line[len(_LINE_PREFIX) :]))
            process.kill()
            process.wait()
            if remaining:
                errors.seek(0)
                tail = "\n".join(errors.read().strip().splitlines()[-15:])
                case = remaining.pop(0)
                yield case, CaseMetrics(case.id, failure=f"{problem}:\n{tail}")


RUNS_SUBDIR = "runs"
_PIN_LIFETIME_S = 2 * 24 * 3600


def asv_run_key() -> str | None:
    """Which ``asv run`` this interpreter serves, or ``None`` outside asv.

    asv imports the benchmark module in a discovery process and again in the processes that run
    the benchmarks, all children of the ``asv`` process; if the code changed in between (an
    editable install being edited), they would measure two code versions with two parameter
    grids, and asv would run the wrong parameters. Keyed by the parent's pid and start time
    (Linux), the first import pins the code version for the rest of that run.
    """
    entry = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if entry is None or entry.name != "benchmark.py" or entry.parent.name != "asv":
        return None
    parent = os.getppid()
    try:
        stat = Path(f"/proc/{parent}/stat").read_text()
    except OSError:
        return None
    start_ticks = stat.rsplit(")", 1)[1].split()[19]  # field 22, counting from the state (field 3)
    return f"{parent}-{start_ticks}"


def _pinned_fingerprint(cache_dir: Path, run_key: str | None) -> str:
    """The code version of this asv run: pinned by its first import, else the current one."""
    pin = cache_dir / RUNS_SUBDIR / run_key if run_key else None
    if pin is not None and pin.is_file():
        return pin.read_text(encoding="utf-8").strip()
    fingerprint = code_fingerprint()
    if pin is not None:
        atomic_write_text(pin, fingerprint)
    return fingerprint


def _prune(cache_dir: Path, keep: Path) -> None:
    """Remove all but the newest code versions' folders (``keep`` among them) and old run pins."""
    versions = sorted(
        (p for p in cache_dir.iterdir() if p.is_dir() and p.name != RUNS_SUBDIR),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for stale in [p for p in versions if p != keep][KEPT_CODE_VERSIONS - 1 :]:
        shutil.rmtree(stale, ignore_errors=True)
    now = time.time()
    for pin in (cache_dir / RUNS_SUBDIR).glob("*"):
        if now - pin.stat().st_mtime > _PIN_LIFETIME_S:
            pin.unlink(missing_ok=True)


def load_or_measure(cases: Sequence[CaseSpec], cache_dir: Path, run_key: str | None = None) -> dict[str, CaseMetrics]:
    """The metrics of every case, measuring (and caching) only those not measured before.
    ``run_key`` (see :func:`asv_run_key`) keeps one code version for all imports of one asv run."""
    cache_dir = Path(cache_dir)
    version_dir = cache_dir / _pinned_fingerprint(cache_dir, run_key)
    cached: dict[str, CaseMetrics] = {}
    for case in cases:
        try:
            data = json.loads((version_dir / case_file_name(case)).read_text(encoding="utf-8"))
            cached[case.id] = CaseMetrics.from_json(data)
        except (OSError, ValueError, TypeError):
            pass
    missing = [case for case in cases if case.id not in cached]
    if missing:
        timeout_s = float(os.environ.get(MEASURE_TIMEOUT_VARIABLE) or DEFAULT_MEASURE_TIMEOUT_S)
        for case, metrics in measure_in_subprocess(missing, timeout_s):  # each cached as soon as measured
            atomic_write_text(version_dir / case_file_name(case), json.dumps(asdict(metrics), indent=1, sort_keys=True))
            cached[case.id] = metrics
        _prune(cache_dir, keep=version_dir)
    return {case.id: cached[case.id] for case in cases}


def main() -> int:
    """Subprocess entry point: read a JSON list of ``CaseSpec.to_json()`` on stdin and print one
    line of metrics per case as soon as it is measured. An exception in one case is that case's
    failure; the others go on."""
    import traceback

    from srbench.asv_tracking.tracked_metrics import case_from_json, measure

    for data in json.load(sys.stdin):
        spec = case_from_json(data)
        try:
            metrics = measure(spec)
        except Exception:  # recorded as this case's failure, reported by asv for this case only
            metrics = CaseMetrics(spec.id, failure=traceback.format_exc(limit=8))
        print(_LINE_PREFIX + json.dumps(asdict(metrics)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
