"""pytest-benchmark's JSON (``pytest suites/ --benchmark --benchmark-json=FILE``) as asv results.

A CI job that already timed the suites with pytest need not time them again under asv: each
case's timing statistics and its ``extra_info`` (the keys of ``tracked_metrics.TRACKED_METRICS``
and the per-op milliseconds) become results of the benchmarks ``benchmarks/suites_asv.py``
defines, filed under the commit pytest-benchmark recorded, in an asv environment named
``pytest-benchmark-py<version>`` (a different timer: its graph lines stay apart from asv's own).
``asv run`` rewrites ``benchmarks.json``, so the converter merges its entries into it afterwards.
(``peakmem_run``, a whole-process measure, has no pytest counterpart.)

Run as ``python -m srbench.asv_tracking.pytest_benchmark_convert FILE [--config asv.conf.json]
[--machine NAME] [--commit HASH] [--allow-dirty]``.
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

from srbench.asv_tracking.staging import load_config, staged_results
from srbench.asv_tracking.tracked_metrics import OP_TIME_BUCKETS, TRACKED_METRICS, op_time_buckets


class ConversionError(ValueError):
    """The pytest-benchmark file cannot be filed as asv results; the message says why."""


def read_pytest_benchmark(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The file's ``commit_info`` and its srbench entries (those with ``extra_info.srbench_case``)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        entries = [entry for entry in data["benchmarks"] if "srbench_case" in (entry.get("extra_info") or {})]
        no_median = [entry["name"] for entry in entries if "median" not in (entry.get("stats") or {})]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ConversionError(f"{path}: not pytest-benchmark JSON with a 'benchmarks' list ({error!r})") from error
    if not entries or no_median:
        problem = f"{no_median[0]} has no stats.median" if no_median else "no srbench case (extra_info.srbench_case)"
        raise ConversionError(f"{path}: {problem}; was it `pytest suites/ --benchmark`?")
    return data.get("commit_info") or {}, entries


def asv_entries(entries: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], list[float], list[Any]]]:
    """(asv benchmark description, values in asv's flattened parameter order, samples) per benchmark."""
    ids = [repr(str(entry["extra_info"]["srbench_case"])) for entry in entries]
    extra = [entry["extra_info"] for entry in entries]
    stats = [entry["stats"] for entry in entries]

    def benchmark(
        name: str, unit: str, params: list[list[str]], values: list[Any], samples: list[Any] | None = None
    ) -> tuple[dict[str, Any], list[float], list[Any]]:
        kind = "time" if ".time_" in name else "track"
        names = ["case", "node_kind"][: len(params)]
        description = {"name": f"suites_asv.{name}", "type": kind, "unit": unit, "params": params, "version": None}
        numbers = [math.nan if value is None else float(value) for value in values]  # NaN: n/a in asv
        return {**description, "param_names": names}, numbers, samples or [None] * len(numbers)

    profiles = [{kind: ms / 1000.0 for kind, ms in (info.get("op_profile_ms") or {}).items()} for info in extra]
    seconds = [op_time_buckets(profile) for profile in profiles]
    return [
        benchmark(
            "EndToEnd.time_run", "seconds", [ids], [s["median"] for s in stats], [s.get("data") or None for s in stats]
        ),
        *(
            benchmark(f"Memory.track_{m.name}", m.unit, [ids], [info.get(m.key) for info in extra])
            for m in TRACKED_METRICS
        ),
        benchmark(
            "OpTime.track_op_time",
            "seconds",
            [ids, [repr(b) for b in OP_TIME_BUCKETS]],
            [s.get(b) for s in seconds for b in OP_TIME_BUCKETS],
        ),
    ]


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
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    env_name = f"pytest-benchmark-py{python}"
    timestamp = commit_info.get("time")  # the commit's date, which asv's graphs are ordered by
    when = datetime.datetime.fromisoformat(timestamp) if timestamp else datetime.datetime.now(datetime.timezone.utc)
    results = Results(
        {"machine": machine, "python": python}, {}, commit, util.datetime_to_js_timestamp(when), python, env_name, {}
    )
    converted = asv_entries(entries)
    with staged_results(config) as staged_config:
        staged = str(load_config(staged_config).results_dir)
        machine_info = dict(MachineCollection.load(machine), machine=machine)
        util.write_json(f"{staged}/{machine}/machine.json", machine_info, api_version=1)
        results.load_data(staged)  # earlier conversions of the same commit
        for description, values, samples in converted:
            numbers = [1 if sample else None for sample in samples]  # with samples, asv computes its statistics
            outcome = BenchmarkResult(
                result=values, samples=samples, number=numbers, errcode=0, stderr="", profile=None
            )
            results.add_result(description, outcome, record_samples=True)
        results.save(staged)
        # asv run rewrites benchmarks.json with what it ran: add the converted benchmarks, widening parameter lists
        path = Path(staged) / "benchmarks.json"
        benchmarks = util.load_json(str(path), api_version=2) if path.is_file() else {}
        benchmarks.pop("version", None)
        for description, _, _ in converted:
            for axis, values in zip(
                benchmarks.setdefault(description["name"], description)["params"], description["params"]
            ):
                axis.extend(value for value in values if value not in axis)
        util.write_json(str(path), benchmarks, api_version=2)
    return Path(load_config(config).results_dir) / machine / f"{commit[:8]}-{env_name}.json"


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
