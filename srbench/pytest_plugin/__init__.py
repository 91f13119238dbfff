"""The srbench pytest plugin (entry point ``pytest11``): suite files become test cases.

``pytest suites/`` collects every ``suites/*.yaml``; each case checks equivalence with eager.
``pytest suites/ --benchmark`` also times each case with pytest-benchmark (which stays disabled
otherwise, so plain runs are quick) and writes a summary to ``results/``. Works under
pytest-xdist: cases run in parallel, only the controller writes the summary.

This module is imported by every pytest run in an environment where srbench is installed, so it
imports nothing heavy; torch and the zoo load when a suite file is collected.
"""

from __future__ import annotations

import datetime
import pathlib
from typing import Any

import pytest

from srbench.pytest_plugin.collect import PARAMETER, SuiteFile, is_suite_file
from srbench.pytest_plugin.results import MERGED_NAME, PROFILES, RunStatus, SessionRun, WrittenRun, write_run
from srbench.pytest_plugin.run import RESULT_PROPERTY
from srbench.pytest_plugin.summary import CaseOutcome, terminal_summary

# pytest-benchmark's own table, kept narrow: its ten default columns (with ratios to the fastest
# case) made lines of 500 characters on a large sweep; srbench's summary has the other figures.
# Cases are grouped per suite and model (run.py sets each benchmark's group) and sorted by name.
BENCHMARK_COLUMNS = ("median", "iqr")


def _narrow_benchmark_table(config: pytest.Config) -> None:
    """Set pytest-benchmark's columns and sort order unless the user chose them (a choice wins).
    Columns default to ``None``; the sort order's default cannot be told from a choice, so the
    command line is read for it."""
    if getattr(config.option, "benchmark_columns", "absent") is None:
        config.option.benchmark_columns = list(BENCHMARK_COLUMNS)
    given = {arg.split("=")[0] for arg in config.invocation_params.args}
    if hasattr(config.option, "benchmark_sort") and "--benchmark-sort" not in given:
        config.option.benchmark_sort = "name"


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
    if config.getoption("srbench_benchmark") and (results := config.getoption("srbench_results")):
        _check_results_folder(pathlib.Path(results))
    timing_asked = config.getoption("srbench_benchmark") or getattr(config.option, "benchmark_enable", False)
    if not timing_asked and hasattr(config.option, "benchmark_disable"):
        config.option.benchmark_disable = True
    _narrow_benchmark_table(config)
    if not hasattr(config, "workerinput"):  # the xdist controller, or a run without xdist
        config.pluginmanager.register(SummaryCollector(config), "srbench-summary")


def _check_results_folder(directory: pathlib.Path) -> None:
    """Refuse, before any case runs, a ``--srbench-results`` that cannot become a folder (a file
    there, or above it): the whole run was measured, then its summary could not be written."""
    existing = next((path for path in (directory, *directory.parents) if path.exists()), None)
    if existing is not None and not existing.is_dir():
        raise pytest.UsageError(f"--srbench-results {directory}: {existing} is a file; expected a folder")


def pytest_collect_file(file_path: pathlib.Path, parent: pytest.Collector) -> pytest.Collector | None:
    if is_suite_file(file_path, parent.session):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    collector = metafunc.definition.parent
    if isinstance(collector, SuiteFile):
        metafunc.parametrize(PARAMETER, collector.parameters())


SUITE_ITEM_PROPERTY = "srbench-suite-item"
CASE_PROPERTY = "srbench-case"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Tag the reports of suite cases with the case and the reason of a failure (for the summary),
    and show an equivalence failure, an invalid suite or example inputs that cannot be made (a
    ``batch`` axis past memory) as its message rather than a traceback into srbench."""
    report = yield
    if not isinstance(item.parent, SuiteFile):
        return report
    reason = ""
    if call.excinfo is not None:
        from srbench.measure import EquivalenceError
        from srbench.suites import SuiteError
        from srbench.zoo import ExampleInputsError

        error = call.excinfo.value
        lines = str(error).strip().splitlines()
        reason = f"{type(error).__name__}: {lines[0] if lines else ''}"
        if report.failed and call.excinfo.errisinstance((EquivalenceError, SuiteError, ExampleInputsError)):
            report.longrepr = f"{type(error).__name__}: {error}"
    report.user_properties.append((SUITE_ITEM_PROPERTY, reason))
    callspec = getattr(item, "callspec", None)  # None for the stand-in of an invalid suite
    spec = callspec.params.get(PARAMETER) if callspec is not None else None
    report.user_properties.append((CASE_PROPERTY, spec.to_json() if spec is not None else None))
    return report


def _outcome(report: pytest.TestReport, reason: str) -> tuple[str, str]:
    """pytest's outcome as the summary names it (a failure outside the test itself is an error),
    and its message."""
    if hasattr(report, "wasxfail"):
        return "xfailed", report.wasxfail
    if report.skipped:
        return "skipped", str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
    if report.failed and report.when != "call":
        return "error", reason
    return report.outcome, reason


class SummaryCollector:
    """Gathers every suite case's outcome and measurements; at the end of a ``--benchmark``
    session writes them (:func:`srbench.pytest_plugin.results.write_run`) and prints the summary."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.outcomes: dict[str, CaseOutcome] = {}
        self.written: WrittenRun | None = None
        self.problem = ""

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        properties = dict(report.user_properties)
        if SUITE_ITEM_PROPERTY not in properties:
            return
        if report.when != "call" and report.passed:
            return
        if report.nodeid in self.outcomes and report.passed:
            return  # a setup or teardown problem already said more than a passing call
        outcome, message = _outcome(report, str(properties[SUITE_ITEM_PROPERTY]))
        case = properties.get(CASE_PROPERTY)
        result = properties.get(RESULT_PROPERTY)
        self.outcomes[report.nodeid] = CaseOutcome(
            report.nodeid,
            outcome,
            case if isinstance(case, dict) else None,
            result if isinstance(result, dict) else None,
            message,
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.config.getoption("srbench_benchmark") or not self.outcomes:
            return
        outcomes = list(self.outcomes.values())
        stopped = session.shouldfail or session.shouldstop
        # The exit status alone is not enough: where pytest's own report of a Ctrl-C fails, the
        # session ends with the status it had, and the run looked complete. Under xdist the
        # controller has no items, and the workers' reports say what ran.
        selected = [item.nodeid for item in session.items if isinstance(item.parent, SuiteFile)]
        missing = sum(nodeid not in self.outcomes for nodeid in selected)
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            status, reason = RunStatus.PARTIAL, "interrupted"
        elif stopped:
            status, reason = RunStatus.PARTIAL, f"stopped early: {stopped}"
        elif missing:
            status, reason = (
                RunStatus.PARTIAL,
                f"stopped early: {missing} of {len(selected)} selected cases did not run",
            )
        else:
            status, reason = RunStatus.COMPLETE, ""
        run = SessionRun(
            outcomes=outcomes,
            status=status,
            started=self.started,
            command=["pytest", *self.config.invocation_params.args],
            timed=any(((o.result or {}).get("latency") or {}).get("median") is not None for o in outcomes),
            reason=reason,
        )
        directory = self.config.getoption("srbench_results")
        directory = pathlib.Path(directory) if directory else self.config.rootpath / "results"
        try:
            self.written = write_run(directory, run)
        except OSError as error:
            self.problem = f"cannot write the results to {directory}: {error}"
        except KeyboardInterrupt:  # a second Ctrl-C: what was being written was removed whole
            self.problem = f"interrupted while writing the results; {directory / MERGED_NAME}.* is as it was"
            session.exitstatus = pytest.ExitCode.INTERRUPTED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (self.written or self.problem):
            return
        terminalreporter.write_sep("-", "srbench summary")
        if self.written:
            for line in terminal_summary(self.written.rows):
                terminalreporter.write_line(line)
            terminalreporter.write_line("")
            self._report_files(terminalreporter, self.written)
        if self.problem:
            terminalreporter.write_line(f"srbench: {self.problem}", red=True)

    @staticmethod
    def _report_files(terminalreporter: Any, written: WrittenRun) -> None:
        line = f"wrote {written.files[0]} and {written.files[1].name}"
        if written.profiles:
            line += f", {written.profiles} per-op profile(s) in {written.run_dir / PROFILES}"
        terminalreporter.write_line(line)
        if written.merged is None:
            terminalreporter.write_line(
                "partial run: not merged; the suite summary (suites-summary.json, .md) is as it was", yellow=True
            )
            return
        terminalreporter.write_line(
            f"wrote {written.merged[0]} and {written.merged[1].name} "
            f"(latest complete result of {written.merged_cases} case(s))"
        )
        if written.set_aside:
            terminalreporter.write_line(f"the unreadable earlier summary was moved to {written.set_aside}", yellow=True)
