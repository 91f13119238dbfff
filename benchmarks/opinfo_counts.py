"""Totals of the OpInfo every-sample groups, read from the JUnit XML of a pytest run.

``tests/test_conformance_opinfo.py`` records, on each case of the every-sample groups, its
samples by outcome (the case's ``samples`` property) and its passing samples by the streams their
prepared programs run on (``streams_used``). The README's figures for a group are these summed
over the run; summing them here, not by hand, lets a reader reproduce them with one command:

    SRBENCH_OPINFO_SWEEP=full \\
    SRBENCH_OPINFO_SAMPLE_OPTIONS="streams=2,scheduler='parallel_steps',measure_choices=False" \\
        pytest tests/test_conformance_opinfo.py -k every_sample -rxs --junitxml=samples.xml
    python benchmarks/opinfo_counts.py samples.xml

It prints the cases (OpInfos) by outcome, the samples by outcome, the passing samples by streams
used, and how many OpInfos had a sample on more than one stream.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from xml.etree import ElementTree

SAMPLES = "samples"
STREAMS = "streams_used"


@dataclass
class Totals:
    """A run's cases by outcome, and the sum of each case's recorded counts."""

    cases: Counter[str] = field(default_factory=Counter)
    samples: Counter[str] = field(default_factory=Counter)
    streams: Counter[int] = field(default_factory=Counter)
    spread_cases: int = 0  # cases with a passing sample on more than one stream

    def add_case(self, outcome: str, properties: dict[str, str]) -> None:
        self.cases[outcome] += 1
        self.samples.update(ast.literal_eval(properties.get(SAMPLES, "{}")))
        streams = ast.literal_eval(properties.get(STREAMS, "{}"))
        self.streams.update(streams)
        self.spread_cases += any(used > 1 and count for used, count in streams.items())


def case_outcome(case: ElementTree.Element) -> str:
    """A ``testcase`` element's outcome as pytest's JUnit XML writes it."""
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    skipped = case.find("skipped")
    if skipped is None:
        return "passed"
    return "expected failure" if skipped.get("type") == "pytest.xfail" else "skipped"


def totals(junit_xml: str) -> Totals:
    """The counts of every case in ``junit_xml`` that recorded samples (the every-sample groups)."""
    found = Totals()
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        properties = {prop.get("name", ""): prop.get("value", "") for prop in case.iter("property")}
        if SAMPLES in properties:
            found.add_case(case_outcome(case), properties)
    return found


def report(found: Totals) -> str:
    def counts(counter: Counter) -> str:
        return ", ".join(f"{key} {value:,}" for key, value in sorted(counter.items(), key=lambda item: str(item[0])))

    passed = sum(found.streams.values())
    several = sum(count for used, count in found.streams.items() if used > 1)
    share = f" ({several / passed:.0%})" if passed else ""
    return "\n".join(
        [
            f"cases: {counts(found.cases)}",
            f"samples: {counts(found.samples)}",
            f"passing samples by streams used: {counts(found.streams)}",
            f"on more than one stream: {several:,} of {passed:,} passing samples{share}, "
            f"from {found.spread_cases} cases",
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("junit_xml", help="pytest's --junitxml file of an every-sample run")
    print(report(totals(parser.parse_args(argv).junit_xml)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
