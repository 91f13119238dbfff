"""pytest-benchmark's JSON (``pytest suites/ --benchmark --benchmark-json=FILE``) as asv results.

A CI job that already timed the suites with pytest need not time them again under asv: each
case's timing statistics and its ``extra_info`` (planned bytes, ratio to the lower bound,
allocations, observed peak, per-op milliseconds) become results of the same benchmarks
``benchmarks/suites_asv.py`` defines, filed under the commit pytest-benchmark recorded, in an asv
environment named ``pytest-benchmark-py<version>`` (a different timer: its graph lines stay apart
from asv's own). ``asv run`` rewrites ``benchmarks.json``, so the converter merges its entries
into it afterwards. (``peakmem_run``, a whole-process measure, has no pytest counterpart.)

Run as ``python -m srbench.asv_tracking.pytest_benchmark_convert FILE [--config asv.conf.json]
[--machine NAME]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srbench.asv_tracking.regressions import load_config
from srbench.asv_tracking.tracked_metrics import tracked_op_times

BENCHMARK_MODULE = "suites_asv"
TIME_RUN = f"{BENCHMARK_MODULE}.EndToEnd.time_run"
# asv benchmark name -> (extra_info key, unit)
TRACKED_EXTRA_INFO = {
    f"{BENCHMARK_MODULE}.Memory.track_planned_bytes": ("planned_bytes", "bytes"),
    f"{BENCHMARK_MODULE}.Memory.track_lower_bound_ratio": ("planned_to_lower_bound", "planned/lower bound"),
    f"{BENCHMARK_MODULE}.Memory.track_allocations_per_run": ("allocations", "allocations"),
    f"{BENCHMARK_MODULE}.Memory.track_observed_peak_bytes": ("peak_bytes", "bytes"),
}
OP_TIME = f"{BENCHMARK_MODULE}.OpTime.track_op_time"


class ConversionError(ValueError):
    """The pytest-benchmark file cannot be filed as asv results; the message says why."""


@dataclass(frozen=True)
class CaseTiming:
    case_id: str
    stats: Mapping[str, Any]
    extra_info: Mapping[str, Any]


def read_pytest_benchmark(path: Path) -> tuple[dict[str, Any], list[CaseTiming]]:
    """The file's ``commit_info`` and its srbench cases (entries with ``extra_info.srbench_case``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConversionError(f"{path}: cannot read pytest-benchmark JSON: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ConversionError(f"{path}: expected pytest-benchmark JSON with a 'benchmarks' list")
    cases = []
    for index, entry in enumerate(data["benchmarks"]):
        extra = entry.get("extra_info") or {}
        if "srbench_case" not in extra:
            continue
        if "stats" not in entry or "median" not in entry["stats"]:
            raise ConversionError(f"{path}: benchmarks[{index}] ({entry.get('name')}) has no stats.median")
        cases.append(CaseTiming(str(extra["srbench_case"]), entry["stats"], extra))
    if not cases:
        raise ConversionError(
            f"{path}: no srbench case (extra_info.srbench_case); was it `pytest suites/ --benchmark`?"
        )
    return data.get("commit_info") or {}, cases


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _benchmark(name: str, kind: str, unit: str, params: list[list[str]], param_names: list[str]) -> dict[str, Any]:
    quoted = [[repr(value) for value in axis] for axis in params]
    return {"name": name, "type": kind, "unit": unit, "params": quoted, "param_names": param_names, "version": None}


def asv_entries(cases: Sequence[CaseTiming]) -> list[tuple[dict[str, Any], list[float], list[list[float] | None]]]:
    """(benchmark description, values in asv's flattened parameter order, samples) per benchmark."""
    ids = [case.case_id for case in cases]
    entries = [
        (
            _benchmark(TIME_RUN, "time", "seconds", [ids], ["case"]),
            [float(case.stats["median"]) for case in cases],
            [list(case.stats["data"]) if case.stats.get("data") else None for case in cases],
        )
    ]
    for name, (key, unit) in TRACKED_EXTRA_INFO.items():
        entries.append(
            (
                _benchmark(name, "track", unit, [ids], ["case"]),
                [_number(c.extra_info.get(key)) for c in cases],
                [None] * len(cases),
            )
        )
    profiles = [{kind: ms / 1000.0 for kind, ms in (c.extra_info.get("op_profile_ms") or {}).items()} for c in cases]
    op_times = [tracked_op_times(profile) if profile else {} for profile in profiles]
    kinds = sorted({kind for times in op_times for kind in times})
    op_values = [_number(times.get(kind)) for times in op_times for kind in kinds]
    entries.append(
        (
            _benchmark(OP_TIME, "track", "seconds", [ids, kinds], ["case", "node_kind"]),
            op_values,
            [None] * len(op_values),
        )
    )
    return entries


def _merge_benchmarks_json(results_dir: Path, descriptions: Sequence[dict[str, Any]]) -> None:
    """Add the converted benchmarks to ``benchmarks.json``, widening parameter lists as needed."""
    from asv import util

    path = results_dir / "benchmarks.json"
    existing = util.load_json(str(path), api_version=2) if path.is_file() else {}
    existing.pop("version", None)
    for description in descriptions:
        current = existing.get(description["name"])
        if current is None:
            existing[description["name"]] = description
            continue
        for axis, values in zip(current["params"], description["params"]):
            axis.extend(value for value in values if value not in axis)
    util.write_json(str(path), existing, api_version=2)


def convert(
    pytest_json: Path, config: Path, *, machine: str, commit: str | None = None, allow_dirty: bool = False
) -> Path:
    """File ``pytest_json`` as asv results of ``machine``; return the results file written."""
    from asv import util
    from asv.machine import MachineCollection
    from asv.results import Results
    from asv.runner import BenchmarkResult

    commit_info, cases = read_pytest_benchmark(pytest_json)
    commit = commit or commit_info.get("id")
    if not commit:
        raise ConversionError(f"{pytest_json}: no commit_info.id; pass the commit explicitly")
    if commit_info.get("dirty") and not allow_dirty:
        raise ConversionError(f"{pytest_json}: measured on a working tree with uncommitted changes (commit_info.dirty)")
    conf = load_config(config)
    results_dir = Path(conf.results_dir)
    machine_info = dict(MachineCollection.load(machine), machine=machine)
    util.write_json(str(results_dir / machine / "machine.json"), machine_info, api_version=1)

    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    env_name = f"pytest-benchmark-py{python}"
    timestamp = commit_info.get("time")  # the commit's date, which asv's graphs are ordered by
    when = datetime.datetime.fromisoformat(timestamp) if timestamp else datetime.datetime.now(datetime.timezone.utc)
    date = util.datetime_to_js_timestamp(when)
    results = Results({"machine": machine, "python": python}, {}, commit, date, python, env_name, {})
    result_path = results_dir / machine / f"{commit[:8]}-{env_name}.json"
    if result_path.is_file():
        results.load_data(str(results_dir))
    entries = asv_entries(cases)
    for description, values, samples in entries:
        numbers = [1 if sample else None for sample in samples]  # with samples, asv computes its statistics
        results.add_result(
            description,
            BenchmarkResult(result=values, samples=samples, number=numbers, errcode=0, stderr="", profile=None),
            record_samples=True,
        )
    results.save(str(results_dir))
    _merge_benchmarks_json(results_dir, [description for description, _, _ in entries])
    return result_path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pytest_json", type=Path)
    parser.add_argument("--config", type=Path, default=Path(__file__).resolve().parents[2] / "asv.conf.json")
    parser.add_argument("--machine", default=None, help="asv machine name (default: the host name)")
    parser.add_argument(
        "--commit", default=None, help="file under this commit (default: pytest-benchmark's commit_info.id)"
    )
    parser.add_argument(
        "--allow-dirty", action="store_true", help="accept results from a tree with uncommitted changes"
    )
    args = parser.parse_args(argv)
    import platform

    from asv.util import UserError

    try:
        path = convert(
            args.pytest_json,
            args.config,
            machine=args.machine or platform.node(),
            commit=args.commit,
            allow_dirty=args.allow_dirty,
        )
    except (ConversionError, UserError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
