"""asv end to end, as CI runs it: ``asv run --quick`` with the existing environment on a few cases
of the quick suite plus a case whose runtime is broken, then ``asv publish`` and the page in a
headless browser.

asv runs once (module fixture) in a temporary project: a copy of the shipped ``asv.conf.json``
whose results, HTML and environments go to a temporary folder, and whose benchmark folder links to
``benchmarks/suites_asv.py`` (other benchmark modules are not this test's business). The broken
runtime is a third-party plugin, declared through an entry point like any other, whose calls all
raise.
"""

from __future__ import annotations

import functools
import http.server
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from srbench.asv_tracking.offline_html import OfflineAssetError, make_offline, vendor_dir
from srbench.suites import load_suite

REPO_ROOT = Path(__file__).resolve().parents[1]
MACHINE = "srbench-ci"
BROKEN_CASE = "mlp-broken-t1"
CASES_PER_RUNTIME = 1
MAX_QUICK_CASES = 2
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSTALL_BROWSER = "apt-get install -y chromium (or run scripts/asv-setup --browser)"

BROKEN_RUNTIMES = '''
import os


class BrokenRuntime:
    """A runtime plugin that prepares fine and fails every call."""
    honours = ()
    devices = ("cpu",)
    slow = False

    def __init__(self, model, example_inputs, options):
        self.model = model

    def __call__(self, *inputs):
        raise RuntimeError("BrokenRuntime fails every call on purpose")


class CrashingRuntime(BrokenRuntime):
    """A runtime plugin whose calls kill the interpreter, as a segfault in native code would."""

    def __call__(self, *inputs):
        os._exit(3)
'''


def quick_case_ids() -> list[str]:
    """A few cases of the quick suite, one per runtime, so the run stays well under two minutes."""
    by_runtime = itertools.groupby(
        sorted(load_suite(REPO_ROOT / "suites" / "quick.yaml").cases, key=lambda c: c.runtime), key=lambda c: c.runtime
    )
    chosen = [case.id for _, cases in by_runtime for case in itertools.islice(cases, CASES_PER_RUNTIME)]
    return chosen[:MAX_QUICK_CASES]


def write_broken_runtime_plugin(folder: Path) -> None:
    folder.mkdir()
    (folder / "srbench_broken_runtime.py").write_text(BROKEN_RUNTIMES)
    info = folder / "srbench_broken_runtime-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: srbench-broken-runtime\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[srbench.runtimes]\nbroken = srbench_broken_runtime:BrokenRuntime\n"
        "crash = srbench_broken_runtime:CrashingRuntime\n"
    )


def temporary_config(project: Path) -> Path:
    from asv import util

    config = util.load_json(str(REPO_ROOT / "asv.conf.json"), js_comments=True)
    benchmarks = project / "benchmarks"
    benchmarks.mkdir()
    for name in ("__init__.py", "suites_asv.py"):
        (benchmarks / name).symlink_to(REPO_ROOT / "benchmarks" / name)
    config.update(
        repo=str(REPO_ROOT),
        benchmark_dir=str(benchmarks),
        results_dir=str(project / "results"),
        html_dir=str(project / "html"),
        env_dir=str(project / "env"),
    )
    path = project / "asv.conf.json"
    path.write_text(json.dumps(config, indent=1))
    return path


class AsvProject:
    def __init__(self, root: Path, config: Path, environ: dict[str, str], quick_cases: list[str]):
        self.root, self.config, self.environ, self.quick_cases = root, config, environ, quick_cases

    def asv(self, *arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "asv", *arguments, "--config", str(self.config)],
            cwd=self.root,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def results(self) -> tuple[dict, dict]:
        """(benchmarks.json, the one results file of the run)."""
        benchmarks = json.loads((self.root / "results" / "benchmarks.json").read_text())
        files = [p for p in (self.root / "results" / MACHINE).glob("*.json") if p.name != "machine.json"]
        assert len(files) == 1, files
        return benchmarks, json.loads(files[0].read_text())


@pytest.fixture(scope="module")
def asv_run(tmp_path_factory) -> Iterator[tuple[AsvProject, subprocess.CompletedProcess]]:
    root = tmp_path_factory.mktemp("asv")
    plugins = root / "plugins"
    write_broken_runtime_plugin(plugins)
    (root / "broken.yaml").write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [broken]\n")
    quick_cases = quick_case_ids()
    environ = dict(
        os.environ,
        HOME=str(root / "home"),  # asv's ~/.asv-machine.json
        HF_HUB_OFFLINE="1",
        SRBENCH_ASV_SUITES=f"quick,{root / 'broken.yaml'}",
        SRBENCH_ASV_CASES="^(" + "|".join([*quick_cases, BROKEN_CASE]) + ")$",
        SRBENCH_ASV_CACHE=str(root / "measurements"),
        PYTHONPATH=str(plugins),
        ASV_PYTHONPATH=str(plugins),  # asv drops PYTHONPATH in its benchmark processes otherwise
    )
    project = AsvProject(root, temporary_config(root), environ, quick_cases)
    machine = project.asv("machine", "--yes", "--machine", MACHINE)
    assert machine.returncode == 0, machine.stderr
    run = project.asv("run", "--python=same", "--set-commit-hash=HEAD", "--quick", "--machine", MACHINE, "--no-pull")
    yield project, run


def values_by_case(benchmarks: dict, results: dict, name: str) -> dict[tuple[str, ...], float | None]:
    """One benchmark's values keyed by parameter combination (asv stores them flattened)."""
    columns = results["result_columns"]
    row = dict(zip(columns, results["results"][name]))
    params = row["params"] or [[]]
    values = row["result"] if row["result"] is not None else [None] * math.prod(len(p) for p in params)
    combinations = [tuple(json.loads(p.replace("'", '"')) for p in combo) for combo in itertools.product(*params)]
    return dict(zip(combinations, values))


@pytest.mark.slow
def test_quick_run_records_a_number_for_every_benchmark_of_every_quick_case(asv_run):
    project, run = asv_run
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]  # 2: a benchmark failed (the broken case)
    pins = list((project.root / "measurements" / "runs").iterdir())
    assert len(pins) == 1, pins  # discovery and the benchmark processes shared one code version
    benchmarks, results = project.results()
    names = sorted(name for name in benchmarks if name.startswith("suites_asv."))
    assert names == [
        "suites_asv.EndToEnd.peakmem_run",
        "suites_asv.EndToEnd.time_run",
        "suites_asv.Memory.track_allocations_per_run",
        "suites_asv.Memory.track_lower_bound_ratio",
        "suites_asv.Memory.track_observed_peak_bytes",
        "suites_asv.Memory.track_planned_bytes",
        "suites_asv.OpTime.track_op_time",
    ]
    assert set(results["results"]) == set(names)
    for name in names:
        assert benchmarks[name]["unit"], name
        values = values_by_case(benchmarks, results, name)
        for case in project.quick_cases:
            recorded = {combo: value for combo, value in values.items() if combo[0] == case}
            assert recorded, (name, case)
            assert all(isinstance(value, (int, float)) for value in recorded.values()), (name, case, recorded)
    for name in (
        "suites_asv.EndToEnd.time_run",
        "suites_asv.EndToEnd.peakmem_run",
        "suites_asv.Memory.track_allocations_per_run",
    ):
        for case in project.quick_cases:
            value = values_by_case(benchmarks, results, name)[(case,)]
            assert math.isfinite(value) and value > 0, (name, case, value)
    planned = values_by_case(benchmarks, results, "suites_asv.Memory.track_planned_bytes")
    ratio = values_by_case(benchmarks, results, "suites_asv.Memory.track_lower_bound_ratio")
    planning_cases = [case for case in project.quick_cases if case.split("-")[1] == "srbench"]
    assert planning_cases, "the chosen quick cases should include srbench's static runtime, which plans memory"
    for case in planning_cases:
        assert planned[(case,)] > 0 and ratio[(case,)] >= 1.0, (case, planned[(case,)], ratio[(case,)])
    op_total = values_by_case(benchmarks, results, "suites_asv.OpTime.track_op_time")
    for case in project.quick_cases:
        assert op_total[(case, "total")] > 0
        per_kind = [v for (c, kind), v in op_total.items() if c == case and kind != "total" and not math.isnan(v)]
        assert len(per_kind) >= 2 and math.isclose(sum(per_kind), op_total[(case, "total")], rel_tol=1e-6)


@pytest.mark.slow
def test_a_case_that_errors_is_recorded_as_failed_and_the_others_still_run(asv_run):
    project, run = asv_run
    benchmarks, results = project.results()
    for name in (n for n in benchmarks if n.startswith("suites_asv.")):
        values = values_by_case(benchmarks, results, name)
        broken = [value for combo, value in values.items() if combo[0] == BROKEN_CASE]
        assert broken and all(value is None for value in broken), (name, broken)  # null: failed
        others = [value for combo, value in values.items() if combo[0] != BROKEN_CASE]
        assert any(value is not None for value in others), name
    assert "BrokenRuntime fails every call on purpose" in run.stdout + run.stderr


@pytest.mark.slow
def test_result_files_are_whole_json_and_no_temporary_files_remain(asv_run):
    project, _ = asv_run
    written = list((project.root / "results").rglob("*"))
    assert not [p for p in written if p.name.endswith(".partial")]
    for path in (p for p in written if p.suffix == ".json"):
        json.loads(path.read_text())


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def published_site(asv_run) -> Iterator[str]:
    """The run's results published, made offline, and served on 127.0.0.1; yields the base URL."""
    project, _ = asv_run
    publish = project.asv("publish")
    assert publish.returncode == 0, publish.stdout[-2000:] + publish.stderr[-2000:]
    try:
        make_offline(project.root / "html")
    except OfflineAssetError as error:
        pytest.skip(f"asv's JavaScript libraries are not installed in {vendor_dir()} and cannot be fetched: {error}")
    handler = functools.partial(_QuietHandler, directory=str(project.root / "html"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()


def chromium(url: str, *options: str) -> str:
    """Load ``url`` in headless Chromium (virtual time lets asv's scripts draw); return stdout."""
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--virtual-time-budget=10000",
        *options,
        url,
    ]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason=f"no headless browser (chromium) installed: {INSTALL_BROWSER}")
def test_published_page_lists_the_benchmarks_and_draws_a_graph_offline(asv_run, published_site, tmp_path):
    project, _ = asv_run
    listing = chromium(f"{published_site}#summarylist", "--dump-dom")
    for name in ("EndToEnd.time_run", "Memory.track_planned_bytes", "OpTime.track_op_time"):
        assert f"suites_asv.{name}" in listing, name

    graph = chromium(f"{published_site}#suites_asv.EndToEnd.time_run", "--dump-dom")
    assert 'class="flot-base"' in graph  # flot drew its canvas
    for case in project.quick_cases:
        assert f"case-{case}<" in graph, case  # one plotted series per case, in the legend

    screenshot = tmp_path / "graph.png"
    chromium(f"{published_site}#suites_asv.EndToEnd.time_run", "--window-size=1200,800", f"--screenshot={screenshot}")
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)[..., :3]
    plot_area = pixels[150:650, 300:1150]  # the graph's frame at this window size
    spread = plot_area.max(axis=2) - plot_area.min(axis=2)
    assert (spread > 0.3).sum() > 20, "no coloured series drawn inside the graph"


@pytest.mark.slow
def test_a_case_that_kills_the_measuring_interpreter_fails_alone(tmp_path, monkeypatch):
    """The crash is that case's failure; a new interpreter measures the cases after it."""
    from dataclasses import replace

    from srbench.asv_tracking.case_measurements import load_or_measure

    write_broken_runtime_plugin(tmp_path / "plugins")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plugins"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    eager = next(case for case in load_suite(REPO_ROOT / "suites" / "quick.yaml").cases if case.id == "mlp-eager-t1")
    crashing = replace(eager, runtime="crash")
    metrics = load_or_measure([crashing, eager], tmp_path / "cache")
    assert "exited with status 3" in metrics[crashing.id].failure
    assert metrics[eager.id].failure is None and metrics[eager.id].op_seconds_by_kind
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2  # both cached, the failure too
