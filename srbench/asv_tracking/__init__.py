"""Tracking srbench's suites over commits with airspeed velocity (asv).

One job per module: ``suite_selection`` (which suite files asv tracks), ``case_measurements``
(each case measured once per code version, cached on disk), ``atomic_json`` (an asv plugin that
makes asv's JSON writes atomic), ``offline_html`` (the published pages without CDNs),
``regressions`` (asv's own comparison, as an exit status), ``pytest_benchmark_convert``
(pytest-benchmark JSON into asv results) and ``nightly`` (the loop a scheduler runs).
"""
