"""Tracking srbench's suites over commits with airspeed velocity (asv).

One job per module: ``suite_selection`` (which suite cases asv tracks), ``tracked_metrics`` (what
is tracked per case, and measuring it), ``staging`` (asv's results written whole or not at all),
``offline_html`` (the published page without CDNs) and ``nightly`` (the loop a scheduler runs,
its exit status from asv's own comparison). The benchmarks are ``benchmarks/suites_asv.py``.
"""
