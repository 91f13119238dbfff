"""Every allocation and free of a run, attributed to the graph node that caused it (issue 12's
observation half): :mod:`srbench.observe.record` records and attributes, :mod:`.observation`
summarises per node, :mod:`.eager` observes eager mode node by node."""

from srbench.observe.eager import observe_eager
from srbench.observe.observation import NodeObservation, Observation, Workspace
from srbench.observe.record import Allocation, RecordedRun, node_label, record

__all__ = [
    "Allocation",
    "NodeObservation",
    "Observation",
    "RecordedRun",
    "Workspace",
    "node_label",
    "observe_eager",
    "record",
]
