"""Planner comparison across model zoos: which planner to use, judged on the models you run.

One job per module: :mod:`.run` plans every source with every planner and collects the figures,
:mod:`.summary` reduces them per planner (geometric mean of the ratio to the lower bound, worst
case, how often the bound is reached), :mod:`.tables` lays them out as aligned text and Markdown,
:mod:`.pictures` draws memory layouts and ratio charts (matplotlib, Agg), :mod:`.html` builds the
self-contained report, and :mod:`.output` writes everything atomically. ``srbench compare``
(:mod:`srbench.cli.compare`) wires them to the zoo and to MiniMalloc CSV files.
"""

from srbench.compare.run import Comparison, PlanRow, Source, SourceError, compare
from srbench.compare.summary import PlannerSummary, summarize

__all__ = ["Comparison", "PlanRow", "PlannerSummary", "Source", "SourceError", "compare", "summarize"]
