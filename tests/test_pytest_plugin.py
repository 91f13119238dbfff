"""The pytest plugin, driven through pytest itself (``pytester``): suite files collect into cases
with readable ids, invalid suites error without stopping the others, ``--benchmark`` times cases
and writes the summary, and ``-n 2`` gives the same outcomes as a serial run.

Suites here use the zoo's smallest model (``mlp``) with eager, TorchScript and PyTorch's Static
Runtime, so each in-process pytest run takes a few seconds.
"""

from __future__ import annotations

import json
import signal
import textwrap
import xml.etree.ElementTree as ElementTree

import pytest
import torch

from srbench.measure import prepare_case
from srbench.options import STATIC_OPTION_NAMES, RuntimeOptions
from srbench.suites import CaseSpec

pytest_plugins = ["pytester"]


def _import_what_cases_import() -> None:
    """pytester's in-process runs drop the modules imported during a run when it ends, but torch
    registers operator libraries once per process (re-importing ``torch.distributed``, which
    ``torch.testing.assert_close`` pulls in lazily, fails): run one case of every runtime used
    here first, so that those imports belong to this process."""
    for runtime in ("eager", "torchscript", "static_runtime"):
        prepared = prepare_case(CaseSpec("warm", "mlp", runtime, RuntimeOptions(), None, None, None, 1))
        prepared.check_equivalence()
        prepared.measure_memory()
        prepared.op_profile(iterations=1)


_import_what_cases_import()


@pytest.fixture(autouse=True)
def _rootdir_is_the_run_folder(pytester: pytest.Pytester) -> None:
    """pytest takes as rootdir the first folder above a run's arguments with an ini file, or
    failing that with a ``setup.py``: a stray ``/tmp/setup.py`` above pytester's folder moved the
    rootdir, and with it the results folder and the cases' ids, to ``/tmp``. An ini file in
    pytester's folder keeps every run here rooted there."""
    pytester.makeini("[pytest]\n")


TINY_SUITE = """
    axes:
      models: {names: [mlp]}
      runtimes: [eager, torchscript, static_runtime]
    repetitions: 3
"""


def write_suite(pytester: pytest.Pytester, name: str, text: str) -> None:
    suites = pytester.path / "suites"
    suites.mkdir(exist_ok=True)
    (suites / name).write_text(textwrap.dedent(text))


def outcomes_by_nodeid(junit_xml) -> dict[str, str]:
    """Every test case of a JUnit XML report with its outcome."""
    outcomes = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        nodeid = f"{case.get('classname')}::{case.get('name')}"
        children = {child.tag: child for child in case}
        if "failure" in children:
            outcome = "failed"
        elif "error" in children:
            outcome = "error"
        elif "skipped" in children:
            outcome = "xfailed" if children["skipped"].get("type") == "pytest.xfail" else "skipped"
        else:
            outcome = "passed"
        outcomes[nodeid] = outcome
    return outcomes


def test_a_suite_collects_into_cases_with_readable_ids(pytester):
    write_suite(
        pytester,
        "tiny.yaml",
        """
        axes:
          models: {names: [mlp]}
          runtimes: [eager, srbench]
          planners: [greedy_by_size, linear_scan]
          devices: [cpu, cuda]
        """,
    )
    result = pytester.runpytest("suites", "--collect-only", "-q")
    result.assert_outcomes()
    assert [line for line in result.outlines if "::" in line] == [
        "suites/tiny.yaml::case[mlp-eager-t1]",
        "suites/tiny.yaml::case[mlp-eager-t1-cuda]",
        "suites/tiny.yaml::case[mlp-srbench-greedy_by_size-cleanup-out-t1]",
        "suites/tiny.yaml::case[mlp-srbench-greedy_by_size-cleanup-out-t1-cuda]",
        "suites/tiny.yaml::case[mlp-srbench-linear_scan-cleanup-out-t1]",
        "suites/tiny.yaml::case[mlp-srbench-linear_scan-cleanup-out-t1-cuda]",
    ]


def test_cases_check_equivalence_and_markers_select_them(pytester):
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    result = pytester.runpytest("suites", "-m", "mlp and not cuda", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.no_fnmatch_line("*benchmark: * tests*")  # no timing without --benchmark
    assert not (pytester.path / "results").exists()


def test_an_invalid_suite_errors_with_file_key_and_expectation_while_other_suites_run(pytester):
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    write_suite(pytester, "typo.yaml", "axes: {models: {names: [mlp]}, runtimes: [eager], planers: [greedy_by_size]}")
    write_suite(pytester, "unknown.yaml", "axes: {models: {names: [mlp]}, runtimes: [eagr]}")
    result = pytester.runpytest("suites")
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*SuiteError: *suites/typo.yaml: axes: unknown key 'planers' (did you mean 'planners'?);"
            " expected only these keys:*",
            "*SuiteError: *suites/unknown.yaml: axes.runtimes[[]0[]]: unknown runtime 'eagr'; did you mean 'eager'?*",
        ]
    )


def test_suites_that_are_not_utf8_alias_bombs_or_repeat_keys_error_alone(pytester):
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    (pytester.path / "suites" / "latin1.yaml").write_bytes(
        "description: café\naxes: {models: {names: [mlp]}, runtimes: [eager]}\n".encode("latin-1")
    )
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    write_suite(pytester, "bomb.yaml", "\n".join([*levels, "axes: {models: {names: *a8}, runtimes: [eager]}"]))
    write_suite(
        pytester, "twice.yaml", "axes: {models: {names: [mlp]}, runtimes: [eager]}\nrepetitions: 3\nrepetitions: 4"
    )
    result = pytester.runpytest("suites", "-p", "no:randomly")
    result.assert_outcomes(passed=3, errors=3)
    result.stdout.fnmatch_lines_random(
        [
            "*SuiteError: *suites/latin1.yaml: line 1: not UTF-8 text (byte 0xe9); expected a UTF-8 YAML file",
            "*SuiteError: *suites/bomb.yaml: more than 100,000 values once aliases (*name) are expanded;*",
            "*SuiteError: *suites/twice.yaml: line 3, column 1: key 'repetitions' given twice in one mapping*",
        ]
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the skip reason on a machine without a GPU")
def test_cuda_cases_are_skipped_with_the_reason_without_a_gpu(pytester):
    write_suite(pytester, "gpu.yaml", "axes: {models: {names: [mlp]}, runtimes: [eager], devices: [cuda]}")
    result = pytester.runpytest("suites", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs a CUDA GPU; torch.cuda.is_available() is False here*"])


EXPECTED_FAILURES = """
    import pytest
    from srbench.runtimes import UnsupportedRuntime
    from srbench.runtimes.torchscript import TorchScriptRuntime

    @pytest.fixture(autouse=True)
    def torchscript_cannot_take_models(monkeypatch):
        def refuse(self, model, example_inputs, options):
            raise UnsupportedRuntime("TorchScript can neither script nor trace this model (test)")

        monkeypatch.setattr(TorchScriptRuntime, "__init__", refuse)
"""


def test_a_model_a_runtime_cannot_take_is_an_expected_failure_with_the_reason(pytester):
    pytester.makeconftest(EXPECTED_FAILURES)
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    result = pytester.runpytest("suites", "-rx")
    result.assert_outcomes(passed=2, xfailed=1)
    result.stdout.fnmatch_lines(["*case[[]mlp-torchscript-t1[]]*UnsupportedRuntime: TorchScript can neither script*"])


def test_a_known_difference_is_an_expected_failure_with_the_suites_reason(pytester):
    """A case an ``expected_failures`` rule matches fails as expected with the rule's reason; a
    matched case that gives eager's answers is reported as an unexpected pass, not an error."""
    pytester.makeconftest(
        """
        import pytest
        from srbench.runtimes.torchscript import TorchScriptRuntime

        @pytest.fixture(autouse=True)
        def torchscript_off_by_one(monkeypatch):
            plain = TorchScriptRuntime.__call__
            monkeypatch.setattr(TorchScriptRuntime, "__call__", lambda self, *inputs: plain(self, *inputs) + 1)
        """
    )
    write_suite(
        pytester,
        "tiny.yaml",
        """
        axes: {models: {names: [mlp]}, runtimes: [eager, torchscript, srbench]}
        expected_failures:
          - {runtime: [torchscript, srbench], reason: rounds otherwise (test)}
        """,
    )
    result = pytester.runpytest("suites", "-rxX")
    result.assert_outcomes(passed=1, xfailed=1, xpassed=1)
    result.stdout.fnmatch_lines(["XFAIL*case[[]mlp-torchscript-t1[]]*rounds otherwise (test)*"])


def test_an_equivalence_failure_reports_the_run_and_the_largest_differences(pytester):
    pytester.makeconftest(
        """
        import pytest
        from srbench.runtimes.eager import EagerRuntime

        @pytest.fixture(autouse=True)
        def eager_off_by_one_on_the_second_shape(monkeypatch):
            plain = EagerRuntime.__call__

            def wrong(self, *inputs):
                output = plain(self, *inputs)
                return output + 1 if inputs[0].shape[0] != 64 else output

            monkeypatch.setattr(EagerRuntime, "__call__", wrong)
        """
    )
    write_suite(pytester, "tiny.yaml", "axes: {models: {names: [mlp]}, runtimes: [eager]}")
    result = pytester.runpytest("suites")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "EquivalenceError: run 2 (second shape): output output differs from eager: "
            "largest absolute difference 1, largest relative difference *(rtol=0.0001, atol=1e-05)",
        ]
    )


def test_a_batch_the_inputs_cannot_be_made_at_fails_its_case_in_one_line_while_the_others_run(pytester):
    """torch's allocation failure was a traceback through the plugin, the runner and the zoo."""
    write_suite(pytester, "tiny.yaml", "axes: {models: {names: [mlp]}, runtimes: [eager], batch: [2, 10000000000000]}")
    result = pytester.runpytest("suites", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "ExampleInputsError: model 'mlp': cannot make its example inputs at batch 10,000,000,000,000: "
            "RuntimeError: *can't allocate memory*",
        ]
    )
    result.stdout.no_fnmatch_line("*srbench/zoo.py*")


def test_a_results_folder_that_cannot_be_made_is_a_usage_error_before_any_case_runs(pytester):
    """The whole run was measured, then its summary could not be written (and pytest exited 0)."""
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    taken = pytester.path / "taken"
    taken.write_text("a file\n")
    result = pytester.runpytest("suites", "--benchmark", "--srbench-results", str(taken / "results"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --srbench-results {taken / 'results'}: {taken} is a file; expected a folder"])
    result.stdout.no_fnmatch_line("*passed*")


def test_benchmark_times_cases_and_writes_the_run_and_the_merged_summary(pytester, monkeypatch):
    # The inner run is serial; when this test itself runs in an xdist worker, pytest-benchmark
    # would read the worker's environment variable and turn itself off.
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    result = pytester.runpytest("suites", "--benchmark", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=3)
    # pytest-benchmark's table: one per model, two columns, sorted by name
    result.stdout.fnmatch_lines(
        ["*benchmark 'tiny: mlp': 3 tests*", "Name (time in *) * Median * IQR *", "case[[]mlp-eager-t1[]]*"]
    )
    (run_dir,) = (pytester.path / "results" / "runs").iterdir()
    result.stdout.fnmatch_lines(
        [
            "mlp (3 passed)",
            "  case * result * median µs * vs eager * plan/LB * peak * peak/gLB * allocs",
            "  eager-t1 * ok * 1.00x *",
            "  top ops, eager: aten::addmm *",
            f"wrote {run_dir}/summary.json and summary.md, 3 per-op profile(s) in {run_dir}/profiles",
            "wrote *results/suites-summary.json and suites-summary.md (latest complete result of 3 case(s))",
        ]
    )
    srbench_lines = result.stdout.lines[result.stdout.lines.index("mlp (3 passed)") :]
    assert max(len(line) for line in srbench_lines[: srbench_lines.index("") if "" in srbench_lines else None]) <= 120

    benchmarks = {
        entry["param"]: entry for entry in json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    }
    assert set(benchmarks) == {"mlp-eager-t1", "mlp-torchscript-t1", "mlp-static_runtime-t1"}
    static = benchmarks["mlp-static_runtime-t1"]
    assert static["stats"]["rounds"] == 3
    extra = static["extra_info"]
    assert extra["peak_bytes"] > 0 and extra["allocations"] >= 1
    assert set(extra["op_profile_ms"]) == {"aten::linear", "aten::relu"}
    assert extra["planned_bytes"] is None and extra["lower_bound"] is None  # Static Runtime does not report its plan

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["timed"] and summary["counts"] == {"passed": 3}
    rows = {row["runtime"]: row for row in summary["models"]["mlp"]}
    assert rows["eager"]["latency_to_eager"] == 1.0
    # eager's peak estimated on fake tensors, once per model, beside each case's observed peak
    assert rows["eager"]["estimated_peak_bytes"] == rows["static_runtime"]["estimated_peak_bytes"] > 0
    ratio = rows["static_runtime"]["latency_median_s"] / rows["eager"]["latency_median_s"]
    assert rows["static_runtime"]["latency_to_eager"] == pytest.approx(ratio)
    profile = json.loads((pytester.path / "results" / rows["static_runtime"]["profile"]).read_text())
    assert profile["op_profile_ms"] == extra["op_profile_ms"]  # saved per case, without --benchmark-json too
    merged = json.loads((pytester.path / "results" / "suites-summary.json").read_text())
    assert merged["counts"] == {"passed": 3} and merged["runs"] == [run_dir.name]
    markdown = (pytester.path / "results" / "suites-summary.md").read_text()
    assert "## mlp" in markdown and "| mlp-static\\_runtime-t1 | passed |" not in markdown
    assert "| mlp-static_runtime-t1 | passed |" in markdown
    assert not [p for p in (pytester.path / "results").rglob(".*")]  # written atomically: no temporary left


@pytest.mark.slow  # three pytest sessions
def test_a_k_run_merges_only_its_cases_and_a_run_stopped_at_a_failure_is_partial(pytester, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    merged_path = pytester.path / "results" / "suites-summary.json"
    pytester.runpytest("suites", "--benchmark", "-p", "no:randomly").assert_outcomes(passed=3)
    first = json.loads(merged_path.read_text())["runs"]
    pytester.runpytest("suites", "--benchmark", "-k", "eager").assert_outcomes(passed=1, deselected=2)
    merged = json.loads(merged_path.read_text())
    second = [run for run in merged["runs"] if run not in first]
    assert merged["counts"] == {"passed": 3} and len(second) == 1
    assert {row["runtime"]: row["run"] for row in merged["models"]["mlp"]} == {
        "eager": second[0],
        "torchscript": first[0],
        "static_runtime": first[0],
    }

    pytester.makeconftest(
        """
        import pytest
        from srbench.runtimes.eager import EagerRuntime

        @pytest.fixture(autouse=True)
        def eager_is_wrong(monkeypatch):
            monkeypatch.setattr(EagerRuntime, "__call__", lambda self, *inputs: 0)
        """
    )
    before = merged_path.read_bytes()
    stopped = pytester.runpytest("suites", "--benchmark", "-x", "-p", "no:randomly")
    stopped.assert_outcomes(failed=1)
    stopped.stdout.fnmatch_lines(["partial run: not merged*"])
    assert merged_path.read_bytes() == before
    (partial,) = [
        summary
        for summary in (json.loads(p.read_text()) for p in (pytester.path / "results").glob("runs/*/summary.json"))
        if summary["status"] == "partial"
    ]
    assert partial["reason"] == "stopped early: stopping after 1 failures"
    assert partial["counts"] == {"failed": 1}


INTERRUPTIONS = """
    import os, signal

    STOP = os.environ["SRBENCH_TEST_STOP"]  # "<signal> <when>"
    SIGNAL, WHEN = STOP.split()
    # Ctrl-C as a terminal delivers it: a process started in the background by a shell without job
    # control (CI launched with `&`) inherits SIGINT ignored, and Python then installs no handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    calls = []

    def pytest_runtest_call(item):
        calls.append(item.nodeid)
        if WHEN == "second-case" and len(calls) == 2:
            os.kill(os.getpid(), getattr(signal, SIGNAL))

    if WHEN == "merging":  # the moment the merged view's new JSON is about to replace the old one
        replace = os.replace

        def replace_then_stop(source, target, *args, **kwargs):
            if str(target).endswith("suites-summary.json"):
                os.kill(os.getpid(), getattr(signal, SIGNAL))
            return replace(source, target, *args, **kwargs)

        os.replace = replace_then_stop
"""


@pytest.mark.slow  # four pytest sessions, three of them in subprocesses that import torch
def test_an_interrupted_or_killed_run_never_replaces_the_complete_summary(pytester, monkeypatch):
    """Ctrl-C (SIGINT) in the middle of a case and while the merged view is written, and SIGKILL
    in the middle of a case and while the merged view is written: the summary of the earlier
    complete run stays as it was, an interrupted run is kept apart and marked partial, and no
    temporary file stays behind where it could be taken for a result (the one a SIGKILL cannot
    clean is hidden, ends in .partial, and the next run removes it)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    pytester.makeconftest(INTERRUPTIONS)
    results = pytester.path / "results"
    monkeypatch.setenv("SRBENCH_TEST_STOP", "SIGINT never")
    pytester.runpytest("suites", "--benchmark").assert_outcomes(passed=3)
    merged = {name: (results / name).read_bytes() for name in ("suites-summary.json", "suites-summary.md")}
    (complete_run,) = (results / "runs").iterdir()

    def stopped(stop: str) -> pytest.RunResult:
        monkeypatch.setenv("SRBENCH_TEST_STOP", stop)
        return pytester.runpytest_subprocess("suites", "--benchmark", "-p", "no:randomly")

    def runs() -> list[str]:
        return sorted(path.name for path in (results / "runs").iterdir())

    interrupted = stopped("SIGINT second-case")
    assert interrupted.ret == pytest.ExitCode.INTERRUPTED
    interrupted.stdout.fnmatch_lines(["partial run: not merged; the suite summary * is as it was"])
    assert {name: (results / name).read_bytes() for name in merged} == merged
    (partial_run,) = set(runs()) - {complete_run.name}
    partial = json.loads((results / "runs" / partial_run / "summary.json").read_text())
    assert partial["status"] == "partial" and partial["reason"] == "interrupted"
    assert partial["counts"] == {"passed": 1}
    assert not list(results.rglob(".*"))

    killed = stopped("SIGKILL second-case")
    assert killed.ret == -signal.SIGKILL
    assert {name: (results / name).read_bytes() for name in merged} == merged
    assert len(runs()) == 2 and not list(results.rglob(".*"))  # killed before writing: nothing left

    interrupted_writing = stopped("SIGINT merging")
    assert interrupted_writing.ret == pytest.ExitCode.INTERRUPTED
    assert {name: (results / name).read_bytes() for name in merged} == merged
    assert len(runs()) == 3 and not list(results.rglob(".*"))  # the run itself was complete and kept

    killed_writing = stopped("SIGKILL merging")
    assert killed_writing.ret == -signal.SIGKILL
    assert {name: (results / name).read_bytes() for name in merged} == merged
    (leftover,) = list(results.rglob(".*"))
    assert leftover.parent == results and leftover.name.startswith(".suites-summary.json.")
    assert leftover.name.endswith(".partial")

    monkeypatch.setenv("SRBENCH_TEST_STOP", "SIGINT never")
    pytester.runpytest("suites", "--benchmark").assert_outcomes(passed=3)
    assert not list(results.rglob(".*")) and len(runs()) == 5
    assert json.loads((results / "suites-summary.json").read_text())["counts"] == {"passed": 3}


def test_a_run_that_ends_before_every_selected_case_ran_is_partial_whatever_its_exit_status(pytester, monkeypatch):
    """Ctrl-C during a case, and pytest's own report of the interrupt then failed (pytest 9.2,
    formatting the traceback: ``TypeError: unsupported operand type(s) for -: 'NoneType' and
    'int'``): the session ended before its exit status was set to interrupted, so the run was
    marked complete and its 4 of 14 cases replaced the merged view. A run is complete only
    when every selected case has an outcome."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    write_suite(pytester, "tiny.yaml", TINY_SUITE)
    pytester.makeconftest(
        """
        import pytest

        calls = []

        def pytest_runtest_call(item):
            calls.append(item.nodeid)
            if len(calls) == 2:
                raise KeyboardInterrupt

        @pytest.hookimpl(tryfirst=True)
        def pytest_keyboard_interrupt(excinfo):
            raise TypeError("unsupported operand type(s) for -: 'NoneType' and 'int'")
        """
    )
    pytester.runpytest("suites", "--benchmark", "-p", "no:randomly")
    results = pytester.path / "results"
    assert not (results / "suites-summary.json").exists()
    (summary,) = results.glob("runs/*/summary.json")
    run = json.loads(summary.read_text())
    assert run["status"] == "partial" and run["reason"] == "stopped early: 2 of 3 selected cases did not run"


MIXED_SUITE = """
    axes:
      models: {names: [mlp, resnet18]}
      runtimes: [eager, torchscript, static_runtime]
      devices: [cpu, cuda]
    tolerance: {rtol: 0, atol: 0}   # frozen TorchScript folds batch norm into convolutions: not bit-exact
    exclude:
      - {model: resnet18, runtime: [eager, static_runtime]}
      - {model: mlp, runtime: torchscript, device: cpu}
"""


@pytest.mark.slow  # three pytest sessions, two of them with xdist workers importing torch
def test_xdist_gives_the_same_outcomes_as_a_serial_run(pytester):
    """Passes, a real failure (TorchScript's conv-bn folding under zero tolerance), skips (cuda
    without a GPU) and expected failures (from the conftest) come out the same with ``-n 2``;
    ``--benchmark`` under xdist (where pytest-benchmark does not time) still writes one summary,
    from the controller, with the memory figures the workers measured."""
    pytester.makeconftest(
        """
        import pytest
        from srbench.runtimes import UnsupportedRuntime
        from srbench.runtimes.cxx_static_runtime import CxxStaticRuntime

        @pytest.fixture(autouse=True)
        def static_runtime_refuses(monkeypatch):
            def refuse(self, model, example_inputs, options):
                raise UnsupportedRuntime("refused (test)")

            monkeypatch.setattr(CxxStaticRuntime, "__init__", refuse)
        """
    )
    write_suite(pytester, "mixed.yaml", MIXED_SUITE)
    serial = pytester.runpytest("suites", "--junitxml=serial.xml")
    parallel = pytester.runpytest("suites", "-n", "2", "--benchmark", "--junitxml=parallel.xml")
    expected = outcomes_by_nodeid(pytester.path / "serial.xml")
    # the cuda cases skip without a GPU; with one they run (TorchScript's folding fails them too)
    skips = set() if torch.cuda.is_available() else {"skipped"}
    assert set(expected.values()) >= {"passed", "failed", "xfailed"} | skips
    assert outcomes_by_nodeid(pytester.path / "parallel.xml") == expected
    assert serial.ret == parallel.ret == pytest.ExitCode.TESTS_FAILED

    (run_dir,) = (pytester.path / "results" / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert not summary["timed"]  # pytest-benchmark does not time under xdist
    assert summary["counts"] == {outcome: list(expected.values()).count(outcome) for outcome in set(expected.values())}
    (eager,) = [row for row in summary["models"]["mlp"] if row["outcome"] == "passed" and row["device"] == "cpu"]
    assert eager["latency_median_s"] is None and eager["peak_bytes"] > 0
    merged = json.loads((pytester.path / "results" / "suites-summary.json").read_text())
    assert merged["counts"] == summary["counts"]


def test_a_model_that_cannot_be_captured_is_an_expected_failure(monkeypatch):
    """``run_case`` itself (what every suite case runs): a CaptureError from preparing becomes
    ``pytest.xfail`` with the reason, and nothing is recorded."""
    from srbench.graph import CaptureError
    from srbench.pytest_plugin.run import run_case

    def cannot_capture(spec):
        raise CaptureError(spec.model, "Could not guard on data-dependent expression u0 > 0")

    monkeypatch.setattr("srbench.measure.prepare_case", cannot_capture)
    properties: list = []
    spec = CaseSpec("s", "mlp", "srbench", RuntimeOptions(), None, None, None, 1, honours=STATIC_OPTION_NAMES)
    with pytest.raises(pytest.xfail.Exception, match=r"^CaptureError: cannot capture model 'mlp': Could not guard"):
        run_case(spec, None, properties)
    assert properties == []
