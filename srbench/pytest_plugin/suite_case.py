"""The one test function every suite case runs: collected under each suite file and parametrized
by ``pytest_generate_tests`` with the suite's cases, so that fixtures, pytest-benchmark's
``benchmark`` among them, work as in any Python test."""

from __future__ import annotations

from srbench.pytest_plugin.run import run_case


def case(spec, benchmark, request):
    run_case(spec, benchmark if request.config.getoption("srbench_benchmark") else None, request.node.user_properties)
