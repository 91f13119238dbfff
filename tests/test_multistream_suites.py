"""The ``streams`` and ``schedulers`` suite axes: defined once with the static options, checked by
the suite schema, part of the case ids, and given to srbench's runtime only."""

from __future__ import annotations

import pathlib

import pytest

from srbench.suites import SuiteError, load_suite

SUITES = pathlib.Path(__file__).resolve().parents[1] / "suites"


def test_the_streams_suite_sweeps_one_two_and_four_streams():
    cases = load_suite(SUITES / "streams.yaml").cases
    srbench = [case for case in cases if case.runtime == "srbench"]
    assert {case.options.streams for case in srbench} == {1, 2, 4}
    assert {case.options.scheduler for case in srbench} == {"critical_path", "parallel_steps"}
    assert not any(case.options.streams == 1 and case.options.scheduler == "parallel_steps" for case in srbench)
    ids = {case.id for case in srbench if case.model == "dlrm"}
    assert "dlrm-srbench-greedy_by_size-cleanup-out-t1" in ids  # one stream adds nothing to the id
    assert "dlrm-srbench-greedy_by_size-cleanup-out-s2-t1" in ids  # nor does the default scheduler
    assert "dlrm-srbench-greedy_by_size-cleanup-out-s4-parallel_steps-t1" in ids
    # eager does not read the static options: one case per model, on one stream
    eager = [case for case in cases if case.runtime == "eager"]
    assert len(eager) == 5 and {case.options.streams for case in eager} == {1}


@pytest.mark.parametrize(
    ("axes", "where", "message"),
    [
        ("streams: [1, 0]", "axes.streams[1]", "0 is less than the minimum of 1"),
        ("streams: [two]", "axes.streams[0]", "expected integer, got str 'two'"),
        ("schedulers: [critical_pth]", "axes.schedulers[0]", "did you mean 'critical_path'"),
    ],
)
def test_bad_stream_axes_name_the_key(tmp_path, axes, where, message):
    path = tmp_path / "bad.yaml"
    path.write_text(f"axes: {{models: {{names: [mlp]}}, runtimes: [srbench], {axes}}}\n")
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    assert where in str(caught.value) and message in str(caught.value), str(caught.value)
