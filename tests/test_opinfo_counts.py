"""``benchmarks/opinfo_counts.py``: the every-sample groups' totals read back from pytest's JUnit
XML, on a run of pytest itself (the properties as pytest writes them, each outcome)."""

from __future__ import annotations

import pytest

from benchmarks.opinfo_counts import main, totals

pytest_plugins = ["pytester"]

CASES = """
import pytest

def test_two_streams(record_property):
    record_property("samples", {"passed": 3, "expected failure": 1, "eager refuses": 0, "failed": 0})
    record_property("streams_used", {2: 2, 1: 1})

def test_one_stream(record_property):
    record_property("samples", {"passed": 2, "expected failure": 0, "eager refuses": 1, "failed": 0})
    record_property("streams_used", {1: 2})

def test_export_refuses(record_property):
    record_property("samples", {"passed": 0, "expected failure": 2, "eager refuses": 0, "failed": 0})
    record_property("streams_used", {})
    pytest.xfail("torch.export refuses")

def test_eager_refuses(record_property):
    record_property("samples", {"passed": 0, "expected failure": 0, "eager refuses": 4, "failed": 0})
    record_property("streams_used", {})
    pytest.skip("eager refuses every sample")

def test_differs(record_property):
    record_property("samples", {"passed": 1, "expected failure": 0, "eager refuses": 0, "failed": 1})
    record_property("streams_used", {0: 1})
    raise AssertionError("1 of 2 samples differ from eager")

def test_of_another_group():
    pass
"""


def test_the_totals_sum_every_recorded_case(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini("[pytest]\n")  # rooted in pytester's folder, whatever ini files lie above it
    pytester.makepyfile(test_cases=CASES)
    pytester.runpytest("-p", "no:cacheprovider", "--junitxml=run.xml").assert_outcomes(
        passed=3, xfailed=1, skipped=1, failed=1
    )
    xml = str(pytester.path / "run.xml")
    found = totals(xml)
    assert found.cases == {"passed": 2, "expected failure": 1, "skipped": 1, "failed": 1}
    assert found.samples == {"passed": 6, "expected failure": 3, "eager refuses": 5, "failed": 1}
    assert found.streams == {2: 2, 1: 3, 0: 1}
    assert found.spread_cases == 1
    assert main([xml]) == 0
    assert "on more than one stream: 2 of 6 passing samples (33%), from 1 cases" in capsys.readouterr().out
