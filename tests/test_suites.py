"""Suite files: a valid suite expands to the right cases and ids; every kind of malformed suite
fails with a message naming the file, the key path and what was expected."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from srbench.options import STATIC_OPTION_NAMES, RuntimeOptions
from srbench.suites import CaseSpec, SuiteError, load_suite
from srbench.suites.expand import matches
from srbench.zoo import ModelCase, ProviderUnavailable, build_zoo, load_zoo


def write(tmp_path, text: str, name: str = "suite.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def ids(path, **kwargs) -> list[str]:
    return [case.id for case in load_suite(path, **kwargs).cases]


def test_sweep_is_the_product_of_the_axes_with_memory_axes_only_for_srbench(tmp_path):
    path = write(
        tmp_path,
        """
        axes:
          models: {names: [mlp]}
          runtimes: [eager, srbench, static_runtime]
          planners: [greedy_by_size, linear_scan]
          cleanup_activations: [true, false]
          threads: [1, 2]
        exclude:
          - {runtime: srbench, planner: linear_scan, threads: 2}
        """,
    )
    assert ids(path) == [
        "mlp-eager-t1",
        "mlp-eager-t2",
        "mlp-srbench-greedy_by_size-cleanup-out-t1",
        "mlp-srbench-greedy_by_size-cleanup-out-t2",
        "mlp-srbench-greedy_by_size-nocleanup-out-t1",
        "mlp-srbench-greedy_by_size-nocleanup-out-t2",
        "mlp-srbench-linear_scan-cleanup-out-t1",
        "mlp-srbench-linear_scan-nocleanup-out-t1",
        "mlp-static_runtime-t1",
        "mlp-static_runtime-t2",
    ]


def test_left_out_axes_take_the_runtime_defaults_and_the_suite_settings_reach_every_case(tmp_path):
    path = write(
        tmp_path,
        """
        axes:
          models: {names: [mlp]}
          runtimes: [srbench, eager]
        tolerance: {rtol: 0.01}
        repetitions: 7
        slow: true
        """,
    )
    suite = load_suite(path)
    assert suite.name == "suite"
    srbench, eager = suite.cases
    assert srbench == CaseSpec(
        suite="suite",
        model="mlp",
        runtime="srbench",
        options=RuntimeOptions(),
        batch=None,
        rtol=0.01,
        atol=None,
        repetitions=7,
        provider="builtin",
        family="mlp",
        honours=STATIC_OPTION_NAMES,
        slow=True,
    )
    assert srbench.id == "mlp-srbench-greedy_by_size-cleanup-out-t1"
    assert eager.option("planner") is None and eager.honours == () and eager.id == "mlp-eager-t1"


def test_devices_batches_and_flags_show_in_ids_and_cpu_only_runtimes_skip_cuda(tmp_path):
    path = write(
        tmp_path,
        """
        axes:
          models: {names: [mlp]}
          runtimes: [static_runtime, srbench]
          devices: [cpu, cuda]
          batch: [8]
          enable_out_variant: [false]
          manage_output_tensors: [true]
        """,
    )
    assert ids(path) == [
        "mlp-static_runtime-t1-b8",
        "mlp-srbench-greedy_by_size-cleanup-noout-managed-t1-b8",
        "mlp-srbench-greedy_by_size-cleanup-noout-managed-t1-cuda-b8",
    ]


def test_models_by_family_provider_and_exclusion(tmp_path):
    zoo = load_zoo()
    by_family = write(tmp_path, "axes: {models: {families: [vision], exclude: [resnet50]}, runtimes: [eager]}")
    vision = sorted(e.case.name for e in zoo.entries() if e.case.family == "vision" and e.case.name != "resnet50")
    assert sorted(case.model for case in load_suite(by_family).cases) == vision  # unavailable ones too (skipped)
    everything = write(tmp_path, "axes: {models: {all: true}, runtimes: [eager]}", "all.yaml")
    assert [case.model for case in load_suite(everything).cases] == [entry.case.name for entry in zoo.entries()]
    builtin = write(tmp_path, "axes: {models: {providers: [builtin], names: [mlp]}, runtimes: [eager]}", "b.yaml")
    names = [case.model for case in load_suite(builtin).cases]
    assert names[0] == "mlp" and len(names) == len(set(names)) == len(zoo.select(providers=["builtin"]))


def test_tolerance_rules_set_the_tolerance_of_the_cases_they_match(tmp_path):
    path = write(
        tmp_path,
        """
        axes:
          models: {names: [mlp, resnet18]}
          runtimes: [eager, torchscript]
        tolerance: {atol: 1.0e-6}
        tolerance_rules:
          - {runtime: torchscript, atol: 1.0e-4}
          - {runtime: torchscript, family: vision, atol: 1.0e-3, rtol: 0.01}
        """,
    )
    tolerances = {case.id: (case.rtol, case.atol) for case in load_suite(path).cases}
    assert tolerances == {
        "mlp-eager-t1": (None, 1e-6),
        "mlp-torchscript-t1": (None, 1e-4),
        "resnet18-eager-t1": (None, 1e-6),
        "resnet18-torchscript-t1": (0.01, 1e-3),
    }


def test_expected_failure_rules_give_the_cases_they_match_their_reason(tmp_path):
    path = write(
        tmp_path,
        """
        axes:
          models: {names: [mlp, resnet18]}
          runtimes: [eager, torchscript]
          threads: [1, 2]
        expected_failures:
          - {runtime: torchscript, reason: first}
          - {runtime: torchscript, family: vision, threads: 2, reason: second}
        """,
    )
    reasons = {case.id: case.expected_failure for case in load_suite(path).cases}
    assert reasons == {
        "mlp-eager-t1": None,
        "mlp-eager-t2": None,
        "mlp-torchscript-t1": "first",
        "mlp-torchscript-t2": "first",
        "resnet18-eager-t1": None,
        "resnet18-eager-t2": None,
        "resnet18-torchscript-t1": "first",
        "resnet18-torchscript-t2": "second",
    }


SHIPPED_SUITES = sorted((pathlib.Path(__file__).parents[1] / "suites").glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED_SUITES, ids=lambda path: path.name)
def test_every_shipped_suite_loads(path):
    suite = load_suite(path)
    assert suite.cases and suite.description
    assert len({case.id for case in suite.cases}) == len(suite.cases)


def test_the_quick_suite_compares_srbench_with_eager_and_static_runtime_on_every_family():
    cases = load_suite(pathlib.Path(__file__).parents[1] / "suites" / "quick.yaml").cases
    assert {case.runtime for case in cases} == {"eager", "srbench", "static_runtime"}
    assert {case.family for case in cases} == {"mlp", "recommendation", "language", "sequence", "vision"}
    assert {case.option("planner") for case in cases if case.runtime == "srbench"} == {"greedy_by_size", "linear_scan"}
    assert not any(case.slow for case in cases)


def test_exclusion_rules_take_one_value_or_a_list():
    case = CaseSpec("s", "mlp", "eager", RuntimeOptions(threads=2), None, None, None, 1)
    assert matches({"runtime": "eager", "threads": [1, 2]}, case)
    assert not matches({"runtime": "eager", "threads": 1}, case)
    assert not matches({"planner": "greedy_by_size"}, case)  # eager has no planner


class _MissingLibraryProvider:
    """A provider whose library does not import here but which lists its cases."""

    name = "torchvision"

    def catalog(self) -> list[ModelCase]:
        return [ModelCase("tv_net", "torchvision", "vision", build=lambda: None, make_inputs=lambda shape, batch: ())]

    def cases(self) -> list[ModelCase]:
        raise ProviderUnavailable("cannot import torchvision: RuntimeError: operator torchvision::nms does not exist")


def test_models_of_an_unavailable_provider_are_cases_that_say_why(tmp_path):
    zoo = build_zoo([("builtin", lambda: load_zoo_builtin()), ("torchvision", _MissingLibraryProvider)])
    path = write(tmp_path, "axes: {models: {providers: [torchvision], names: [mlp]}, runtimes: [eager]}")
    cases = {case.model: case for case in load_suite(path, zoo=zoo).cases}
    assert cases["mlp"].unavailable is None
    assert "torchvision::nms does not exist" in cases["tv_net"].unavailable


def load_zoo_builtin():
    from srbench_models.builtin import provider

    return provider


def _alias_bomb(levels: int = 9) -> str:
    """About 600 bytes that expand to 9**9 values (a "billion laughs")."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join([*lines, f"axes: {{models: {{names: *a{levels - 1}}}, runtimes: [eager]}}"])


ALIAS_BOMB = _alias_bomb()

MALFORMED = [
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], thread: [1]}",
        "axes",
        ["unknown key 'thread'", "did you mean 'threads'", "expected only these keys"],
        id="unknown-key",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nrepeat: 3",
        "",
        ["unknown key 'repeat'", "expected only these keys"],
        id="unknown-top-level-key",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], threads: [one]}",
        "axes.threads[0]",
        ["expected integer, got str 'one'"],
        id="wrong-item-type",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], threads: [100000000000000000000]}",
        "axes.threads[0]",
        ["100000000000000000000 is greater than the maximum of 2147483647"],
        id="more-threads-than-torch-takes",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], threads: [2.0]}",
        "axes.threads[0]",
        ["expected integer, got float 2.0"],
        id="whole-float-for-integer",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], batch: [4, 8.0]}",
        "axes.batch[1]",
        ["expected integer or null, got float 8.0"],
        id="whole-float-batch",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nrepetitions: 5.0",
        "repetitions",
        ["expected integer, got float 5.0"],
        id="whole-float-repetitions",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexclude: [{threads: 1.0}]",
        "exclude[0].threads",
        ["expected integer or a list of them", "1.0"],
        id="whole-float-in-rule",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], threads: 2}",
        "axes.threads",
        ["expected array, got int 2"],
        id="scalar-for-list",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager], devices: [tpu]}",
        "axes.devices[0]",
        ["expected one of 'cpu', 'cuda'", "'tpu'"],
        id="unknown-device",
    ),
    pytest.param(
        "axes: {models: {names: [mpl]}, runtimes: [eager]}",
        "axes.models.names[0]",
        ["unknown model 'mpl'", "did you mean 'mlp'", "known:"],
        id="unknown-model",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager, srbench], planners: [greedy_by_size, gredy_by_size]}",
        "axes.planners[1]",
        ["unknown planner 'gredy_by_size'", "did you mean 'greedy_by_size'"],
        id="unknown-planner",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eagr]}",
        "axes.runtimes[0]",
        ["unknown runtime 'eagr'", "did you mean 'eager'"],
        id="unknown-runtime",
    ),
    pytest.param(
        "axes: {models: {families: [vison]}, runtimes: [eager]}",
        "axes.models.families[0]",
        ["unknown model family 'vison'", "did you mean 'vision'"],
        id="unknown-family",
    ),
    pytest.param(
        "axes: {models: {providers: [hugingface]}, runtimes: [eager]}",
        "axes.models.providers[0]",
        ["unknown model provider 'hugingface'"],
        id="unknown-provider",
    ),
    pytest.param(
        "axes: {models: {}, runtimes: [eager]}",
        "axes.models",
        ["expected at least one of the keys all, exclude, families, names, providers"],
        id="empty-model-selection",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}}", "axes", ["'runtimes' is a required property"], id="missing-runtimes"
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexclude: [{threads: two}]",
        "exclude[0].threads",
        ["expected integer or a list of them", "'two'"],
        id="bad-rule-value",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexclude: [{runtime: [eager, srbnch]}]",
        "exclude[0].runtime[1]",
        ["unknown runtime 'srbnch'", "did you mean 'srbench'"],
        id="unknown-runtime-in-rule",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\ntolerance: {rtol: -1}",
        "tolerance.rtol",
        ["-1 is less than the minimum of 0"],
        id="negative-tolerance",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nrepetitions: 0",
        "repetitions",
        ["0 is less than the minimum of 1"],
        id="zero-repetitions",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\ntolerance_rules: [{runtime: eager}]",
        "tolerance_rules[0]",
        ["expected at least one of the keys rtol, atol"],
        id="tolerance-rule-without-tolerance",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexpected_failures: [{runtime: eager}]",
        "expected_failures[0]",
        ["'reason' is a required property", "expected keys: reason"],
        id="expected-failure-without-reason",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexpected_failures: [{reason: always}]",
        "expected_failures[0]",
        ["expected at least one of the keys batch, cleanup_activations,", "threads besides reason"],
        id="expected-failure-matching-every-case",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexpected_failures: [{runtme: eager, reason: x}]",
        "expected_failures[0]",
        ["unknown key 'runtme'", "did you mean 'runtime'?"],
        id="expected-failure-key-typo",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [static_runtime], devices: [cuda]}",
        "axes",
        ["the sweep is empty", "runtimes' devices"],
        id="no-runtime-for-the-device",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nexclude: [{model: mlp}]",
        "exclude",
        ["the sweep is empty: every combination is excluded"],
        id="everything-excluded",
    ),
    pytest.param("axes: [", "line 1, column 8", ["not valid YAML"], id="not-yaml"),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\ndescription: a\x00b",
        "line 2, column 15",
        ["not valid YAML: character U+0000 is not allowed in YAML; expected printable text"],
        id="nul-character",
    ),
    pytest.param(
        "axes: {models: {names: [mlp]}, runtimes: [eager]}\nrepetitions: 3\nrepetitions: 5",
        "line 3, column 1",
        ["key 'repetitions' given twice in one mapping (first on line 2); expected each key once"],
        id="duplicate-key",
    ),
    pytest.param(
        "axes:\n  models: {names: [mlp]}\n  runtimes: [eager]\n  runtimes: [srbench]",
        "line 4, column 3",
        ["key 'runtimes' given twice"],
        id="duplicate-nested-key",
    ),
    pytest.param(
        ALIAS_BOMB,
        "",
        ["more than 100,000 values once aliases (*name) are expanded", "alias bomb"],
        id="alias-bomb",
    ),
    pytest.param("axes: &a [*a]", "line 1, column 7", ["contains an alias to itself"], id="self-alias"),
    pytest.param("[" * 5000 + "]" * 5000, "", ["nested too deeply"], id="too-deep"),
    pytest.param(
        "- eager\n- srbench", "", ["expected a YAML mapping with an 'axes' key, got list"], id="not-a-mapping"
    ),
    pytest.param("", "", ["holds no YAML document; expected a YAML mapping with an 'axes' key"], id="empty-file"),
    pytest.param("# only a comment\n", "", ["holds no YAML document; expected a YAML mapping"], id="only-comments"),
]


@pytest.mark.parametrize(("text", "key_path", "fragments"), MALFORMED)
def test_malformed_suites_name_file_key_path_and_what_was_expected(tmp_path, text, key_path, fragments):
    path = write(tmp_path, text, "broken.yaml")
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    error = caught.value
    assert error.path == str(path) and error.key_path == key_path
    message = str(error)
    assert message.startswith(f"{path}: {key_path + ': ' if key_path else ''}")
    for fragment in fragments:
        assert fragment in message


def test_aliases_and_merge_keys_within_bounds_are_fine(tmp_path):
    path = write(
        tmp_path,
        """
        axes: {models: {names: [mlp]}, runtimes: [eager, torchscript]}
        tolerance_rules:
          - &loose {runtime: eager, rtol: 0.01, atol: 0.001}
          - {<<: *loose, runtime: torchscript, rtol: 0.1}
        """,
    )
    eager, torchscript = load_suite(path).cases
    assert (eager.rtol, eager.atol, torchscript.rtol) == (0.01, 0.001, 0.1)


def test_two_providers_naming_one_model_make_the_suite_invalid_not_the_session(tmp_path, monkeypatch):
    """A zoo with one model name twice stopped pytest's collection with a traceback; now each
    suite is reported invalid with the clash, as other bad suites are."""
    import srbench.suites.loader
    from srbench.registry import PluginConflict

    def clashing():
        raise PluginConflict("model name 'mlp' is provided by both 'builtin' and 'mine'")

    monkeypatch.setattr(srbench.suites.loader, "load_zoo", clashing)
    path = write(tmp_path, "axes: {models: {names: [mlp]}, runtimes: [eager]}")
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    assert str(caught.value) == f"{path}: axes.models: model name 'mlp' is provided by both 'builtin' and 'mine'"


def test_a_file_that_is_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("axes: {models: {names: [mlp]}, runtimes: [eager]}\ndescription: café\n".encode("latin-1"))
    with pytest.raises(SuiteError) as caught:
        load_suite(path)
    assert str(caught.value) == f"{path}: line 2: not UTF-8 text (byte 0xe9); expected a UTF-8 YAML file"


def test_a_file_larger_than_a_suite_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("# " + "x" * (1 << 20) + "\n")
    with pytest.raises(SuiteError, match=r"huge.yaml: larger than 1,048,576 bytes; expected a suite written"):
        load_suite(path)


def test_a_missing_file_is_a_suite_error(tmp_path):
    with pytest.raises(SuiteError, match="cannot read the file"):
        load_suite(tmp_path / "absent.yaml")
