"""pytest-benchmark's JSON (``pytest suites/ --benchmark --benchmark-json=FILE``) as asv results.

A CI job that already timed the suites with pytest need not time them again under asv: each
case's timing statistics and its ``extra_info`` (the keys of ``tracked_metrics.TRACKED_METRICS``
and the per-op milliseconds) become results of the benchmarks ``benchmarks/suites_asv.py``
defines, filed under the commit pytest-benchmark recorded, in an asv environment named
``pytest-benchmark-py<version>`` (a different timer: its graph lines stay apart from asv's own).
``asv run`` rewrites ``benchmarks.json``, so the converter merges its entries into it afterwards.
(``peakmem_run``, a whole-process measure, has no pytest counterpart.)

Run as ``python -m srbench.asv_tracking.pytest_benchmark_convert FILE [--config asv.conf.json]
[--machine NAME]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from srbench.asv_tracking.regressions import load_config
from srbench.asv_tracking.staging import staged_results
from srbench.asv_tracking.tracked_metrics import OP_TIME_BUCKETS, TRACKED_METRICS, op_time_buckets

MODULE = "suites_asv"


class ConversionError(ValueError):
    """The pytest-benchmark file cannot be filed as asv results; the message says why."""


def read_pytest_benchmark(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The file's ``commit_info`` and its srbench entries (those with ``extra_info.srbench_case``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        entries = [entry for entry in data["benchmarks"] if "srbench_case" in (entry.get("extra_info") or {})]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ConversionError(f"{path}: not pytest-benchmark JSON with a 'benchmarks' list ({error})") from error
    if not entries:
        raise ConversionError(
            f"{path}: no srbench case (extra_info.srbench_case); was it `pytest suites/ --benchmark`?"
        )
    for entry in entries:
        if "median" not in (entry.get("stats") or {}):
            raise ConversionError(f"{path}: {entry.get('name')} has no stats.median")
    return data.get("commit_info") or {}, entries


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def asv_entries(entries: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], list[float], list[Any]]]:
    """(asv benchmark description, values in asv's flattened parameter order, samples) per benchmark."""
    ids = [str(entry["extra_info"]["srbench_case"]) for entry in entries]
    extra = [entry["extra_info"] for entry in entries]

    def benchmark(name: str, kind: str, unit: str, params: list[list[str]]) -> dict[str, Any]:
        names = ["case", "node_kind"][: len(params)]
        quoted = [[repr(value) for value in axis] for axis in params]
        return {
            "name": f"{MODULE}.{name}",
            "type": kind,
            "unit": unit,
            "params": quoted,
            "param_names": names,
            "version": None,
        }

    times = [float(entry["stats"]["median"]) for entry in entries]
    samples = [entry["stats"].get("data") or None for entry in entries]
    result = [(benchmark("EndToEnd.time_run", "time", "seconds", [ids]), times, samples)]
    for metric in TRACKED_METRICS:
        values = [_number(info.get(metric.key)) for info in extra]
        result.append(
            (benchmark(f"Memory.track_{metric.name}", "track", metric.unit, [ids]), values, [None] * len(ids))
        )
    profiles = [{kind: ms / 1000.0 for kind, ms in (info.get("op_profile_ms") or {}).items()} for info in extra]
    buckets = [op_time_buckets(profile) for profile in profiles]
    op_times = [_number(seconds.get(bucket)) for seconds in buckets for bucket in OP_TIME_BUCKETS]
    op_description = benchmark("OpTime.track_op_time", "track", "seconds", [ids, OP_TIME_BUCKETS])
    result.append((op_description, op_times, [None] * len(op_times)))
    return result


def _merge_benchmarks_json(path: Path, descriptions: Sequence[dict[str, Any]]) -> None:
    """Add the converted benchmarks to ``benchmarks.json``, widening parameter lists as needed."""
    from asv import util

    existing = util.load_json(str(path), api_version=2) if path.is_file() else {}
    existing.pop("version", None)
    for description in descriptions:
        current = existing.setdefault(description["name"], description)
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

    commit_info, entries = read_pytest_benchmark(pytest_json)
    commit = commit or commit_info.get("id")
    if not commit:
        raise ConversionError(f"{pytest_json}: no commit_info.id; pass the commit explicitly")
    if commit_info.get("dirty") and not allow_dirty:
        raise ConversionError(f"{pytest_json}: measured on a working tree with uncommitted changes (commit_info.dirty)")
    results_dir = Path(load_config(config).results_dir)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    env_name = f"pytest-benchmark-py{python}"
    timestamp = commit_info.get("time")  # the commit's date, which asv's graphs are ordered by
    when = datetime.datetime.fromisoformat(timestamp) if timestamp else datetime.datetime.now(datetime.timezone.utc)
    results = Results(
        {"machine": machine, "python": python}, {}, commit, util.datetime_to_js_timestamp(when), python, env_name, {}
    )
    converted = asv_entries(entries)
    with staged_results(results_dir) as staged:
        machine_info = dict(MachineCollection.load(machine), machine=machine)
        util.write_json(str(staged / machine / "machine.json"), machine_info, api_version=1)
        if (staged / machine / f"{commit[:8]}-{env_name}.json").is_file():
            results.load_data(str(staged))
        for description, values, samples in converted:
            numbers = [1 if sample else None for sample in samples]  # with samples, asv computes its statistics
            outcome = BenchmarkResult(
                result=values, samples=samples, number=numbers, errcode=0, stderr="", profile=None
            )
            results.add_result(description, outcome, record_samples=True)
        results.save(str(staged))
        _merge_benchmarks_json(staged / "benchmarks.json", [description for description, _, _ in converted])
    return results_dir / machine / f"{commit[:8]}-{env_name}.json"


def main(argv: Sequence[str] | None = None) -> int:
    from asv.util import UserError

    parser = argparse.ArgumentParser(description="File pytest-benchmark's JSON of srbench suites as asv results.")
    parser.add_argument("pytest_json", type=Path)
    parser.add_argument("--config", type=Path, default=Path(__file__).resolve().parents[2] / "asv.conf.json")
    parser.add_argument("--machine", default=platform.node(), help="asv machine name (default: the host name)")
    parser.add_argument("--commit", help="file under this commit (default: pytest-benchmark's commit_info.id)")
    parser.add_argument("--allow-dirty", action="store_true", help="accept results of a tree with uncommitted changes")
    args = parser.parse_args(argv)
    try:
        path = convert(
            args.pytest_json, args.config, machine=args.machine, commit=args.commit, allow_dirty=args.allow_dirty
        )
    except (ConversionError, UserError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
