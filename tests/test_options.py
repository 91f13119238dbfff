"""The options are defined once (srbench.options); the suite axes, the schema, case ids, the CLI
flags and the runtimes all read them from there."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import textwrap

import pytest
import torch

from srbench.options import (
    STATIC_OPTION_NAMES,
    RuntimeOptions,
    StaticOptions,
    add_option_flags,
    options_from_flags,
    options_of,
)
from srbench.registry import UnknownPluginError
from srbench.runtimes import get_runtime
from srbench.suites import SuiteError, load_suite
from srbench.suites.expand import default_axes
from srbench.suites.schema import SUITE_SCHEMA


def test_runtime_options_are_the_static_options_plus_threads_and_device():
    static = [option.name for option in options_of(StaticOptions)]
    every = [option.name for option in options_of(RuntimeOptions)]
    assert every == [*static, "threads", "device"]
    assert tuple(static) == STATIC_OPTION_NAMES
    assert isinstance(RuntimeOptions(), StaticOptions)


def test_every_option_is_a_suite_axis_a_rule_key_and_has_a_default_axis():
    axes = SUITE_SCHEMA["properties"]["axes"]["properties"]
    rules = SUITE_SCHEMA["properties"]["exclude"]["items"]["properties"]
    defaults = default_axes()
    for option in options_of():
        assert axes[option.info.axis]["items"] == dict(option.info.schema)
        assert option.name in rules
        assert defaults[option.info.axis] == [option.default]


def test_flags_round_trip_every_static_option():
    parser = argparse.ArgumentParser()
    add_option_flags(parser, StaticOptions)
    assert options_from_flags(parser.parse_args([]), StaticOptions) == StaticOptions()
    args = parser.parse_args(
        ["--planner", "linear_scan", "--no-cleanup-activations", "--no-enable-out-variant", "--decompose"]
    )
    assert options_from_flags(args, StaticOptions) == StaticOptions(
        planner="linear_scan", cleanup_activations=False, enable_out_variant=False, decompose=True
    )


def test_integer_flags_are_checked_against_the_schema_minimum(capsys):
    parser = argparse.ArgumentParser()
    add_option_flags(parser, RuntimeOptions)
    assert options_from_flags(parser.parse_args(["--threads", "2"]), RuntimeOptions).threads == 2
    with pytest.raises(SystemExit):
        parser.parse_args(["--threads", "0"])
    assert "expected an integer of at least 1 and at most 2,147,483,647, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--rewrite-rtol", "-1"], "expected a finite number more than 0, got '-1'"),
        (["--rewrite-atol", "0"], "expected a finite number more than 0, got '0'"),
        (["--rewrite-rtol", "nan"], "expected a finite number more than 0, got 'nan'"),
        (["--rewrite-atol", "inf"], "expected a finite number more than 0, got 'inf'"),
    ],
)
def test_number_flags_refuse_what_a_suite_refuses(capsys, flags, expected):
    """``--rewrite-rtol -1`` and ``nan`` were taken (the schema's exclusiveMinimum was not read)."""
    parser = argparse.ArgumentParser()
    add_option_flags(parser, StaticOptions)
    assert options_from_flags(parser.parse_args(["--rewrite-rtol", "0.001"]), StaticOptions).rewrite_rtol == 0.001
    with pytest.raises(SystemExit):
        parser.parse_args(flags)
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "kind"), [("--scheduler", "scheduler"), ("--planner", "planner")])
def test_an_unknown_plugin_name_in_a_flag_is_refused_whatever_the_other_flags(flag, kind):
    """``--scheduler foo`` ran without a word with one stream (the scheduler is read only with several)."""
    parser = argparse.ArgumentParser()
    add_option_flags(parser, StaticOptions)
    with pytest.raises(UnknownPluginError, match=f"unknown {kind} 'foo'"):
        options_from_flags(parser.parse_args([flag, "foo"]), StaticOptions)


@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_a_suite_refuses_a_rewrite_tolerance_that_is_not_finite(tmp_path, value):
    with pytest.raises(SuiteError, match=r"axes.rewrite_rtol\[0\]: expected a finite number"):
        _suite(tmp_path, f"axes: {{models: {{names: [mlp]}}, runtimes: [srbench], rewrite_rtol: [{value}]}}")


def _suite(tmp_path, text: str):
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent(text))
    return load_suite(path)


def test_decompose_reaches_srbench_from_a_suite(tmp_path):
    suite = _suite(
        tmp_path,
        """
        axes:
          models: {names: [mlp]}
          runtimes: [srbench, eager]
          decompose: [true]
        """,
    )
    srbench, eager = suite.cases
    assert srbench.id == "mlp-srbench-greedy_by_size-cleanup-out-decomposed-t1"
    assert eager.id == "mlp-eager-t1" and eager.option("decompose") is None
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    runtime = get_runtime("srbench")(model, (torch.randn(2, 4),), srbench.options)
    assert runtime.module.options.decompose is True
    targets = {str(node.target) for node in runtime.module.prepared.captured.graph.nodes}
    assert "aten.linear.default" not in targets and "aten.addmm.default" in targets  # core ATen


def test_a_bad_option_value_names_the_axis(tmp_path):
    with pytest.raises(SuiteError, match=r"axes\.decompose\[0\]: expected boolean"):
        _suite(tmp_path, "axes: {models: {names: [mlp]}, runtimes: [srbench], decompose: [yes please]}")


def test_unknown_planner_in_an_axis_or_a_rule_is_named_with_the_nearest(tmp_path):
    with pytest.raises(SuiteError, match=r"axes\.planners\[0\]: unknown planner 'gredy'"):
        _suite(tmp_path, "axes: {models: {names: [mlp]}, runtimes: [srbench], planners: [gredy]}")
    with pytest.raises(SuiteError, match=r"exclude\[0\]\.planner: unknown planner 'naiv'; did you mean 'naive'"):
        _suite(tmp_path, "axes: {models: {names: [mlp]}, runtimes: [srbench]}\nexclude: [{planner: naiv}]")


def test_options_are_frozen_records():
    with pytest.raises(dataclasses.FrozenInstanceError):
        RuntimeOptions().threads = 2  # type: ignore[misc]


def test_a_case_is_written_as_flat_json_with_every_option(tmp_path):
    suite = _suite(
        tmp_path,
        """
        axes:
          models: {names: [mlp]}
          runtimes: [srbench, eager]
          threads: [2]
          manage_output_tensors: [true]
        """,
    )
    names = {option.name for option in options_of()}
    for case in suite.cases:
        data = json.loads(json.dumps(case.to_json()))
        assert data["id"] == case.id and data["model"] == "mlp" and data["runtime"] == case.runtime
        assert names <= data.keys()
        assert {name: data[name] for name in names} == {name: case.option(name) for name in names}
        if case.runtime == "srbench":
            assert data["manage_output_tensors"] is True and data["threads"] == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rewrite_rtol": math.nan}, "rewrite_rtol must be a finite number more than 0, got nan"),
        ({"rewrite_atol": -1.0}, "rewrite_atol must be a finite number more than 0, got -1.0"),
        ({"cleanup_activations": "yes"}, "cleanup_activations must be True or False, got 'yes'"),
        ({"streams": 2.0}, "streams must be an integer of at least 1, got 2.0"),
        ({"streams": True}, "streams must be an integer of at least 1, got True"),
        ({"planner": ""}, "planner must be a non-empty str, got ''"),
        ({"max_signatures": 1}, "max_signatures must be an integer of at least 2, got 1"),
    ],
)
def test_options_made_in_python_refuse_what_a_flag_or_a_suite_refuses(options, message):
    """In Python, ``rewrite_rtol=nan`` (every rewrite refused) and ``cleanup_activations="yes"``
    were taken, and ``streams=2.0`` failed deep in preparing, with a message about ints."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        StaticOptions(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threads": 0}, "threads must be an integer of at least 1 and at most 2,147,483,647, got 0"),
        ({"threads": 2**31}, "threads must be an integer of at least 1 and at most 2,147,483,647, got 2147483648"),
        ({"device": "tpu"}, "device must be one of 'cpu', 'cuda', got 'tpu'"),
    ],
)
def test_runtime_options_refuse_what_a_suite_refuses(options, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        RuntimeOptions(**options)
