"""Collection: a suite file becomes a Python-module-like collector over the one test function of
:mod:`srbench.pytest_plugin.suite_case`, parametrized with the suite's cases.

A custom ``pytest.Item`` per case (the documented YAML example) could not use fixtures, so it
could not use pytest-benchmark's ``benchmark``; a ``pytest.Module`` whose object is our own module
gets pytest's ordinary function collection, ``pytest_generate_tests`` and fixtures for free.
A suite that fails to load becomes one item that errors at setup with the file, key path and
what was expected, so that the other suites still run.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

TEST_FUNCTION = "case"
PARAMETER = "spec"


def is_suite_file(file_path: Any, session: pytest.Session) -> bool:
    """A YAML file in a folder named ``suites``, or any YAML file named on the command line."""
    if file_path.suffix not in (".yaml", ".yml"):
        return False
    return file_path.parent.name == "suites" or session.isinitpath(file_path)


class SuiteFile(pytest.Module):
    """One suite file; its object is :mod:`suite_case`, whose only test is :data:`TEST_FUNCTION`."""

    suite: Any = None

    def _getobj(self) -> types.ModuleType:
        from srbench.pytest_plugin import suite_case

        return suite_case

    def funcnamefilter(self, name: str) -> bool:
        return name == TEST_FUNCTION

    def classnamefilter(self, name: str) -> bool:
        return False

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        from srbench.suites import SuiteError, load_suite

        try:
            self.suite = load_suite(self.path)
        except SuiteError as error:
            return [InvalidSuite.from_parent(self, name="suite", error=error)]
        return list(super().collect())

    def parameters(self) -> list[Any]:
        """One ``pytest.param`` per case, with its marks; one skipped param per unavailable provider."""
        params = [pytest.param(spec, id=spec.id, marks=case_marks(self.config, spec)) for spec in self.suite.cases]
        for provider, reason in self.suite.unavailable.items():
            marks = pytest.mark.skip(reason=f"model provider {provider!r} is unavailable here: {reason}")
            params.append(pytest.param(None, id=f"{provider}-unavailable", marks=marks))
        return params


def register_family_marker(config: pytest.Config, family: str) -> None:
    """Families come from the zoo (loaded with the first suite), so their markers are added then."""
    if not any(line.split(":")[0].strip() == family for line in config.getini("markers")):
        config.addinivalue_line("markers", f"{family}: srbench suite cases of {family} models")


def case_marks(config: pytest.Config, spec: Any) -> list[pytest.MarkDecorator]:
    register_family_marker(config, spec.family)
    marks = [getattr(pytest.mark, spec.family)]
    if not config.getoption("srbench_benchmark"):
        # The case takes the benchmark fixture (so that --benchmark can time it) and leaves it unused.
        marks.append(pytest.mark.filterwarnings("ignore:Benchmark fixture was not used at all"))
    if spec.slow:
        marks.append(pytest.mark.slow)
    if spec.options.device == "cuda":
        import torch

        marks.append(pytest.mark.cuda)
        if not torch.cuda.is_available():
            marks.append(pytest.mark.skip(reason="needs a CUDA GPU; torch.cuda.is_available() is False here"))
    if spec.unavailable:
        marks.append(pytest.mark.skip(reason=spec.unavailable))
    if spec.expected_failure:
        # not strict: a known difference that rounds within tolerance on some machines is no error
        marks.append(pytest.mark.xfail(reason=spec.expected_failure, strict=False))
    return marks


class InvalidSuite(pytest.Item):
    """Stands for a suite file that cannot be loaded: errors at setup with the loader's message
    (shown without a traceback by the plugin's ``pytest_runtest_makereport``)."""

    def __init__(self, *, error: Exception, **kwargs: Any):
        super().__init__(**kwargs)
        self.error = error

    def setup(self) -> None:
        raise self.error

    def runtest(self) -> None:  # never reached: setup raises
        raise self.error

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"invalid suite {self.path.name}"
