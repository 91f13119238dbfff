"""Elementwise ops writing their result over an input that dies with them.

``torch.export`` gives a functional graph: ``gelu(linear(x))`` and ``h + residual`` allocate new
results even where eager code wrote ``+=`` or where the input is read by nothing else. In a plan
the input and the result then overlap in time at the op, so both need room in the slab
(BERT's feed-forward: 512 KiB for the projection and 512 KiB more for its GELU). An elementwise
op (tagged ``pointwise``: its out kernel reads and writes element by element, which ATen's
TensorIterator allows with ``out`` the very tensor it reads) can write into its input's slab
tensor instead, when that input has the result's geometry and no later op reads its storage.
The result then takes over the input's storage: one record in the plan instead of two. Not
where another argument of the op lives in that storage otherwise laid out (``h / h[..., 2:3,
2:3]``, the tenth round's kornia homographies): the kernel would write elements it reads later,
which ATen refuses where it sees the overlap and computes wrong where it does not.

Only srbench's own candidates are used so (a user's registered out variant may not read its
input before writing), only where both tensors are managed, and only on one stream: with
several, a reader of the input on another stream may still be running.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx

from srbench.memory.lifetimes import LifetimeAnalysis
from srbench.static.choose import NodePlan, RunAs
from srbench.static.resolve import REGISTERED_LABEL


def _geometry(value: object) -> tuple | None:
    if not isinstance(value, torch.Tensor):
        return None
    return (tuple(value.shape), value.stride(), value.storage_offset(), value.dtype, value.device)


def dying_input_reuses(graph: torch.fx.Graph, plans: Sequence[NodePlan], analysis: LifetimeAnalysis) -> dict[str, str]:
    """Nodes that can write their result over an input, each mapped to that input's node (the
    ``aliases`` a second lifetime analysis takes: the result is the input's storage)."""
    by_name = {plan.node.name: plan for plan in plans}
    step = {node.name: index for index, node in enumerate(graph.nodes)}
    records = {record.id: record for record in analysis.records}
    reuses: dict[str, str] = {}
    for plan in plans:
        node, target = plan.node, plan.node.target
        if (
            plan.how is not RunAs.OUT
            or len(plan.result_storages) != 1
            or not isinstance(target, torch._ops.OpOverload)
            or torch.Tag.pointwise not in target.tags
            or plan.runs.label.startswith(REGISTERED_LABEL)
        ):
            continue
        geometry = _geometry(node.meta.get("val"))
        for argument in node.all_input_nodes:
            producer = by_name.get(argument.name)
            storage = analysis.storage_of.get(argument.name)
            record = records.get(storage) if storage is not None else None
            if (
                producer is not None
                and producer.how is RunAs.OUT
                and producer.result_storages == (storage,)
                and record is not None
                and record.last == step[node.name]
                and geometry is not None
                and _geometry(argument.meta.get("val")) == geometry
                and not _read_otherwise(node, storage, geometry, analysis)
            ):
                reuses[node.name] = argument.name
                break
    return reuses


def _read_otherwise(node: torch.fx.Node, storage: str | None, geometry: tuple, analysis: LifetimeAnalysis) -> bool:
    """Whether an argument of ``node`` reads ``storage`` laid out otherwise than ``geometry`` (a
    view of the input the result would be written over): the same tensor read twice is
    element-for-element, which out kernels allow; any other view reads what the kernel writes."""
    return any(
        analysis.storage_of.get(argument.name) == storage and _geometry(argument.meta.get("val")) != geometry
        for argument in node.all_input_nodes
    )
