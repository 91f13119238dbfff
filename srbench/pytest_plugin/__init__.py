"""The srbench pytest plugin (entry point ``pytest11``): suite files become test cases.

``pytest suites/`` collects every ``suites/*.yaml``; each case checks equivalence with eager.
``pytest suites/ --benchmark`` also times each case with pytest-benchmark (which stays disabled
otherwise, so plain runs are quick) and writes a summary to ``results/``. Works under
pytest-xdist: cases run in parallel, only the controller writes the summary.

This module is imported by every pytest run in an environment where srbench is installed, so it
imports nothing heavy; torch and the zoo load when a suite file is collected.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from srbench.pytest_plugin.collect import PARAMETER, SuiteFile, is_suite_file
from srbench.pytest_plugin.run import RESULT_PROPERTY
from srbench.pytest_plugin.summary import CaseOutcome, build_summary, write_summary


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("srbench", "srbench suites")
    group.addoption(
        "--benchmark",
        action="store_true",
        dest="srbench_benchmark",
        help="time every suite case with pytest-benchmark and record memory and per-op profiles "
        "(without it, suite cases only check equivalence with eager, and pytest-benchmark is disabled)",
    )
    group.addoption(
        "--srbench-results",
        dest="srbench_results",
        default=None,
        metavar="DIR",
        help="where the --benchmark session summary goes (default: results/ under the rootdir)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark reads its options
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (skipped with the reason without one)")
    timing_asked = config.getoption("srbench_benchmark") or getattr(config.option, "benchmark_enable", False)
    if not timing_asked and hasattr(config.option, "benchmark_disable"):
        config.option.benchmark_disable = True
    if not hasattr(config, "workerinput"):  # the xdist controller, or a run without xdist
        config.pluginmanager.register(SummaryCollector(config), "srbench-summary")


def pytest_collect_file(file_path: pathlib.Path, parent: pytest.Collector) -> pytest.Collector | None:
    if is_suite_file(file_path, parent.session):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    collector = metafunc.definition.parent
    if isinstance(collector, SuiteFile):
        metafunc.parametrize(PARAMETER, collector.parameters())


SUITE_ITEM_PROPERTY = "srbench-suite-item"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Tag the reports of suite cases (with the reason of a failure, for the summary), and show
    an equivalence failure or an invalid suite as its message rather than a traceback into srbench."""
    report = yield
    if not isinstance(item.parent, SuiteFile):
        return report
    reason = ""
    if call.excinfo is not None:
        from srbench.measure import EquivalenceError
        from srbench.suites import SuiteError

        error = call.excinfo.value
        lines = str(error).strip().splitlines()
        reason = f"{type(error).__name__}: {lines[0] if lines else ''}"
        if report.failed and call.excinfo.errisinstance((EquivalenceError, SuiteError)):
            report.longrepr = f"{type(error).__name__}: {error}"
    report.user_properties.append((SUITE_ITEM_PROPERTY, reason))
    return report


class SummaryCollector:
    """Gathers every suite case's outcome and measurements; writes the summary at the end."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.outcomes: list[CaseOutcome] = []
        self.written: tuple[pathlib.Path, ...] = ()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if SUITE_ITEM_PROPERTY not in properties:
            return
        if report.when == "call" or not report.passed:
            if hasattr(report, "wasxfail"):
                outcome, message = "xfailed", report.wasxfail
            elif report.skipped and isinstance(report.longrepr, tuple):
                outcome, message = "skipped", str(report.longrepr[2])
            else:
                outcome, message = report.outcome, properties[SUITE_ITEM_PROPERTY]
            self.outcomes.append(CaseOutcome(report.nodeid, outcome, properties.get(RESULT_PROPERTY), message))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.config.getoption("srbench_benchmark") or not self.outcomes:
            return
        timed = any((o.result or {}).get("latency") for o in self.outcomes)
        directory = self.config.getoption("srbench_results")
        directory = pathlib.Path(directory) if directory else self.config.rootpath / "results"
        self.written = write_summary(build_summary(self.outcomes, timed=timed), directory)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written:
            terminalreporter.write_sep("-", "srbench summary")
            for path in self.written:
                terminalreporter.write_line(f"wrote {path}")
