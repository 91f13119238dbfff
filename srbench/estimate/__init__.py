"""Memory and FLOPs of a model, node by node, without running it (issue 12's estimation half).

As ColossalAI's MetaInfoProp did on the meta device, with today's pieces: the model is built and
captured on FakeTensors (:mod:`srbench.estimate.fake`), on any device, present or not; every node
is run once more on fake tensors to learn its FLOPs, its temporaries and whether it really
allocates (:mod:`srbench.estimate.ops`); the graph's storages and lifetimes come from
:mod:`srbench.memory.lifetimes`, eager's peak from replaying them through the device's allocator
model (:mod:`srbench.estimate.allocators`), and each planner's slab from
:func:`srbench.planners.plan_memory`.
"""

from srbench.estimate.allocators import AllocatorStats, CpuAllocator, CudaCachingAllocator, allocator_for
from srbench.estimate.graph import GraphEstimate, NodeEstimate, NodeKind, NodeProblem, PlanFootprint, estimate_graph
from srbench.estimate.kernels import TemporarySource
from srbench.estimate.model import estimate_case, estimate_model
from srbench.estimate.sizes import Bound, ByteCount

__all__ = [
    "AllocatorStats",
    "Bound",
    "ByteCount",
    "CpuAllocator",
    "CudaCachingAllocator",
    "GraphEstimate",
    "NodeEstimate",
    "NodeKind",
    "NodeProblem",
    "PlanFootprint",
    "TemporarySource",
    "allocator_for",
    "estimate_case",
    "estimate_graph",
    "estimate_model",
]
