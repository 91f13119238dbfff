"""Which outputs of a prepared graph can host intermediates, which intermediates can be hosted, and
the tensors a run makes for them (:mod:`srbench.memory.hosting` plans them).

A *host* is an output storage that a run allocates afresh (outputs not managed) and whose producer
runs as out variant into it: the run allocates it (with eager's shape and strides, so the caller
gets the tensor eager returns) before the first intermediate it hosts is written, and the producer
then writes it with ``out=``. Outputs that are (views of) inputs own no planned storage, outputs
of fallback or opaque ops are allocated by their op, and a producer of several results is left as
it is: none of those hosts. A *hostable* intermediate is a slab tensor that one single-result out
variant produces (and elementwise ops may write over, :mod:`srbench.static.reuse`): a hosted
tensor is a view of its host's storage made at every run, like the slab's views but per call,
since the host is new at every run. So views of it are not made once per runtime either
(:class:`~srbench.static.choose.Chooser` is told which tensors are made per run).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from srbench.memory.hosting import Host, Hosting
from srbench.memory.lifetimes import LifetimeAnalysis
from srbench.static.choose import NodePlan, RunAs


@dataclass(frozen=True)
class RunBuffer:
    """A tensor a run makes for itself at every run: an output allocated before what it hosts
    (``host`` is ``None``), or a hosted intermediate, a typed strided view ``offset`` bytes into
    its host's storage."""

    storage: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype
    device: torch.device
    host: str | None = None
    offset: int = 0


def _single_results(plans: Iterable[NodePlan]) -> dict[str, NodePlan]:
    """Storage -> the first out-variant plan that writes it alone (its producer), for storages no
    multi-result out variant writes."""
    single: dict[str, NodePlan] = {}
    multi: set[str] = set()
    for plan in plans:
        if plan.how is not RunAs.OUT:
            continue
        if len(plan.result_storages) == 1 and plan.result_storages[0] is not None:
            single.setdefault(plan.result_storages[0], plan)
        else:
            multi.update(s for s in plan.result_storages if s is not None)
    return {storage: plan for storage, plan in single.items() if storage not in multi}


def output_hosts(plans: Sequence[NodePlan], analysis: LifetimeAnalysis, steps: Mapping[str, int]) -> list[Host]:
    """The outputs of ``plans`` (chosen with outputs allowed as out-variant results) that can host:
    each written first by a single-result out variant; ``steps``: node name -> step."""
    producers = _single_results(plans)
    hosts = []
    for record in analysis.output_records:
        plan = producers.get(record.id)
        if plan is None or steps[plan.node.name] != record.first:
            continue
        value = plan.node.meta["val"]
        if value.storage_offset() == 0:  # allocated as eager's result: from the storage's first byte
            hosts.append(Host(record.id, record.first, _extent(value)))
    return hosts


def _extent(value: torch.Tensor) -> int:
    """Bytes of the storage ``torch.empty_strided`` allocates for ``value``'s shape and strides."""
    if value.numel() == 0:
        return 0
    return (1 + sum((size - 1) * stride for size, stride in zip(value.shape, value.stride()))) * value.element_size()


def hostable(plans: Sequence[NodePlan], slab_ids: Collection[str]) -> frozenset[str]:
    """The slab tensors that can be hosted (see the module docstring)."""
    return frozenset(storage for storage in _single_results(plans) if storage in slab_ids)


def run_buffers(plans: Sequence[NodePlan], hosting: Hosting) -> tuple[RunBuffer, ...]:
    """The tensors a run makes for ``hosting``: every host, then every hosted intermediate, each
    with the geometry its producer gives it."""
    producers = _single_results(plans)

    def buffer(storage: str, host: str | None = None, offset: int = 0) -> RunBuffer:
        value = producers[storage].node.meta["val"]
        return RunBuffer(
            storage,
            tuple(value.shape),
            tuple(value.stride()),
            int(value.storage_offset()),
            value.dtype,
            value.device,
            host,
            offset,
        )

    hosts = [buffer(plan.host.id) for plan in hosting.plans]
    hosted = [buffer(storage, host, offset) for storage, (host, offset) in hosting.placement.items()]
    return (*hosts, *hosted)
