"""asv end to end, as CI runs it: ``asv run --quick`` with the existing environment on every case
of the quick suite plus a case whose runtime is broken, into a staged copy of the results as the
nightly does; then the nightly's publish (the page made offline) and, in a headless browser,
every benchmark's graph and legend.

asv runs once (module fixture) in a temporary project: a copy of the shipped ``asv.conf.json``
whose results, HTML and environments go to a temporary folder, and whose benchmark folder links to
``benchmarks/suites_asv.py`` (other benchmark modules are not this test's business). The broken
runtime is a third-party plugin, declared through an entry point like any other, whose calls all
raise. On 2 cores the run takes about 3 minutes with the machine to itself.
"""

from __future__ import annotations

import functools
import http.server
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from srbench.asv_tracking.nightly import NightlyOptions, publish
from srbench.asv_tracking.offline_html import OfflineAssetError, vendor_dir
from srbench.asv_tracking.staging import staged_results
from srbench.asv_tracking.tracked_metrics import TRACKED_METRICS
from srbench.suites import load_suite

REPO_ROOT = Path(__file__).resolve().parents[1]
MACHINE = "srbench-ci"
BROKEN_CASE = "mlp-broken-t1"
QUICK_CASES = [case.id for case in load_suite(REPO_ROOT / "suites" / "quick.yaml").cases]
BENCHMARKS = sorted(
    [
        "suites_asv.EndToEnd.time_run",
        "suites_asv.EndToEnd.peakmem_run",
        "suites_asv.OpTime.track_op_time",
        *(f"suites_asv.Memory.track_{metric.name}" for metric in TRACKED_METRICS),
    ]
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
INSTALL_BROWSER = "apt-get install -y chromium (or run scripts/asv-setup --browser)"

BROKEN_RUNTIME = '''
class BrokenRuntime:
    """A runtime plugin that prepares fine and fails every call."""
    honours = ()
    devices = ("cpu",)
    slow = False

    def __init__(self, model, example_inputs, options):
        self.model = model

    def __call__(self, *inputs):
        raise RuntimeError("BrokenRuntime fails every call on purpose")
'''


def write_broken_runtime_plugin(folder: Path) -> None:
    folder.mkdir()
    (folder / "srbench_broken_runtime.py").write_text(BROKEN_RUNTIME)
    info = folder / "srbench_broken_runtime-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: srbench-broken-runtime\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[srbench.runtimes]\nbroken = srbench_broken_runtime:BrokenRuntime\n")


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
        # the branch being tested (a fresh clone: main), so that asv publish finds its HEAD
        branches=[
            subprocess.run(
                ["git", "-C", str(REPO_ROOT), "rev-parse", "--abbrev-ref", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        ],
    )
    path = project / "asv.conf.json"
    path.write_text(json.dumps(config, indent=1))
    return path


class AsvProject:
    def __init__(self, root: Path, config: Path, environ: dict[str, str]):
        self.root, self.config, self.environ = root, config, environ

    def asv(self, *arguments: str, config: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "asv", *arguments, "--config", str(config or self.config)],
            cwd=self.root,
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=1800,
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
    write_broken_runtime_plugin(root / "plugins")
    (root / "broken.yaml").write_text("axes:\n  models: {names: [mlp]}\n  runtimes: [broken]\n")
    environ = dict(
        {key: value for key, value in os.environ.items() if key != "SRBENCH_ASV_CASES"},
        HOME=str(root / "home"),  # asv's ~/.asv-machine.json
        HF_HUB_OFFLINE="1",
        SRBENCH_ASV_SUITES=f"quick,{root / 'broken.yaml'}",
        PYTHONPATH=str(root / "plugins"),
        ASV_PYTHONPATH=str(root / "plugins"),  # asv drops PYTHONPATH in its benchmark processes otherwise
    )
    project = AsvProject(root, temporary_config(root), environ)
    machine = project.asv("machine", "--yes", "--machine", MACHINE)
    assert machine.returncode == 0, machine.stderr
    with staged_results(project.config) as config:  # as the nightly runs asv
        run = project.asv(
            "run",
            "--python=same",
            "--set-commit-hash=HEAD",
            "--quick",
            "--machine",
            MACHINE,
            "--no-pull",
            config=config,
        )
    yield project, run


def values_by_combination(results: dict, name: str) -> dict[tuple[str, ...], Any]:
    """One benchmark's values keyed by parameter combination (asv stores them flattened)."""
    row = dict(zip(results["result_columns"], results["results"][name]))
    combinations = [
        tuple(json.loads(p.replace("'", '"')) for p in combo) for combo in itertools.product(*row["params"])
    ]
    values = row["result"] if row["result"] is not None else [None] * len(combinations)
    return dict(zip(combinations, values))


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


@pytest.mark.slow
def test_every_benchmark_records_a_number_for_every_quick_case(asv_run):
    project, run = asv_run
    assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]  # 2: a benchmark failed (the broken case)
    benchmarks, results = project.results()
    assert sorted(name for name in benchmarks if name.startswith("suites_asv.")) == BENCHMARKS
    assert set(results["results"]) == set(BENCHMARKS)
    setup_caches = [key for key in results["durations"] if key.startswith("<setup_cache")]
    assert len(setup_caches) == 1, setup_caches  # Memory and OpTime share one measurement of the cases
    for name in BENCHMARKS:
        assert benchmarks[name]["unit"], name
        values = values_by_combination(results, name)
        for case in QUICK_CASES:
            recorded = {combo: value for combo, value in values.items() if combo[0] == case}
            assert recorded and all(isinstance(v, (int, float)) for v in recorded.values()), (name, case, recorded)
    for name in ("EndToEnd.time_run", "EndToEnd.peakmem_run", "Memory.track_allocations_per_run"):
        values = values_by_combination(results, f"suites_asv.{name}")
        assert all(values[(case,)] > 0 for case in QUICK_CASES), (name, values)
    planned = values_by_combination(results, "suites_asv.Memory.track_planned_bytes")
    ratio = values_by_combination(results, "suites_asv.Memory.track_lower_bound_ratio")
    planning = [case for case in QUICK_CASES if is_number(planned[(case,)])]
    assert len(planning) >= 10, planned  # srbench's runtime plans memory in most of its quick cases
    assert all(ratio[(case,)] >= 1.0 for case in planning), ratio
    assert all(math.isnan(planned[(case,)]) for case in QUICK_CASES if "-eager-" in case)  # eager plans nothing
    op_time = values_by_combination(results, "suites_asv.OpTime.track_op_time")
    for case in QUICK_CASES:
        total = op_time[(case, "total")]
        buckets = [v for (c, bucket), v in op_time.items() if c == case and bucket != "total" and is_number(v)]
        assert total > 0 and math.isclose(sum(buckets), total, rel_tol=1e-6), (case, total, buckets)
    assert op_time[("resnet18-eager-t1", "convolution")] > 0.5 * op_time[("resnet18-eager-t1", "total")]


@pytest.mark.slow
def test_a_case_that_errors_is_recorded_as_failed_and_the_others_still_run(asv_run):
    project, run = asv_run
    _, results = project.results()
    for name in BENCHMARKS:
        values = values_by_combination(results, name)
        broken = [value for combo, value in values.items() if combo[0] == BROKEN_CASE]
        assert broken and all(value is None for value in broken), (name, broken)  # null: failed
        assert any(value is not None for combo, value in values.items() if combo[0] != BROKEN_CASE), name
    assert "BrokenRuntime fails every call on purpose" in run.stdout + run.stderr


@pytest.mark.slow
def test_result_files_are_whole_json_and_no_temporary_files_remain(asv_run):
    project, _ = asv_run
    written = list((project.root / "results").rglob("*"))
    assert not [p for p in written if p.name.startswith(".") or p.name.endswith(".partial")]
    for path in (p for p in written if p.suffix == ".json"):
        json.loads(path.read_text())


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def published_site(asv_run) -> Iterator[str]:
    """The run's results published by the nightly (offline), served on 127.0.0.1; yields the base URL."""
    project, _ = asv_run
    try:
        publish(NightlyOptions(config=project.config))
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
    assert CHROMIUM is not None
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


def graph_url(site: str, benchmark: dict, **settings: str) -> str:
    """The page of one benchmark with every parameter value selected (asv draws 8 lines unless told)."""
    selection = [
        (f"p-{name}", value) for name, values in zip(benchmark["param_names"], benchmark["params"]) for value in values
    ]
    return f"{site}#{benchmark['name']}?{urllib.parse.urlencode(selection + list(settings.items()))}"


def legend_label(benchmark: dict, combination: tuple[str, ...]) -> str:
    """asv's legend label of one series: ``name-value`` per parameter with several values, sorted."""
    return "; ".join(sorted(f"{name}-{value}" for name, value in zip(benchmark["param_names"], combination)))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason=f"no headless browser (chromium) installed: {INSTALL_BROWSER}")
def test_every_benchmark_draws_its_graph_offline_with_every_series_in_the_legend(asv_run, published_site, tmp_path):
    project, _ = asv_run
    benchmarks, results = project.results()
    for name in BENCHMARKS:
        benchmark = benchmarks[name]
        values = values_by_combination(results, name)
        page = chromium(graph_url(published_site, benchmark), "--dump-dom")
        assert 'class="flot-base"' in page, name  # flot drew its canvas: the offline scripts ran
        legend = re.findall(r'class="legendLabel">(.*?)</td>', page)
        assert sorted(legend) == sorted(legend_label(benchmark, combo) for combo in values), name

        # The graph data the page plotted holds a number exactly where the run recorded one.
        (graph,) = (project.root / "html" / "graphs").glob(f"branch-*/**/{name}.json")
        (_, plotted), *_ = json.loads(graph.read_text())
        assert [v is not None for v in plotted] == [is_number(v) for v in values.values()], name

        screenshot = tmp_path / f"{name}.png"
        chromium(
            graph_url(published_site, benchmark, **{"show-legend": "false"}),
            "--window-size=1200,800",
            f"--screenshot={screenshot}",
        )
        assert coloured_pixels(screenshot) > 20, f"{name}: no series drawn inside the graph"


def coloured_pixels(screenshot: Path) -> int:
    """Pixels of the graph's frame (at a 1200x800 window) that are neither grey nor white: the series."""
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)[108:674, 253:1166, :3]  # the frame and its edges
    # 0.15, not more: asv's palette has pale colours, and where several cases share a figure (the
    # estimated peak is one per model) their markers overlap, so few pixels are strongly coloured
    return int(((pixels.max(axis=2) - pixels.min(axis=2)) > 0.15).sum())
