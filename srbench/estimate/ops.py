"""What one node does when eager runs it, learnt by running it on fake tensors.

Each op node of the graph is called once more on the FakeTensors of its arguments (its inputs'
``meta["val"]``), under two dispatch modes that see what eager's dispatcher would run for it:

- ``torch.utils.flop_counter.FlopCounterMode`` counts its FLOPs (matrix products, convolutions,
  attention; ops it has no formula for count 0);
- a recorder sees the ATen ops the node becomes below the composite level. Export-level graphs
  keep composite ops (``max_pool2d``, ``layer_norm``, ``batch_norm``, ``dropout``,
  ``scaled_dot_product_attention``); eager runs their ``CompositeImplicitAutograd`` kernels,
  which call other ops whose extra results are thrown away: ``max_pool2d`` computes
  ``max_pool2d_with_indices`` and drops the int64 indices, ``layer_norm`` drops the mean and
  reciprocal standard deviation. Those are the node's *temporaries*, known from the op's
  decomposition: every storage the inner ops create that is not one of the node's results,
  alive from the inner op that makes it to the last inner op that reads it, and the node needs
  the most of them alive at once. The recorder also sees a node that returns one of its inputs
  as is (``dropout`` in eval mode calls nothing): eager allocates nothing for it.

What this cannot see is memory a backend kernel allocates for itself (oneDNN's reordered
copies, cuDNN's workspaces): :mod:`srbench.estimate.kernels` holds what was observed of that.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._guards import detect_fake_mode
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from srbench.estimate.sizes import ZERO, ByteCount, tensor_bytes


@dataclass(frozen=True)
class OpFacts:
    """What running one node on fake tensors showed. ``runs_as`` names the ATen ops eager's
    dispatcher runs for it; ``returns_input`` the argument node it returns as is although its
    schema says it allocates (eval ``dropout``); ``copies`` is True when its schema says it returns
    an alias but it allocates (``reshape`` of a tensor it cannot view); ``problem`` why it could
    not be run (its FLOPs and temporaries are then unknown, 0)."""

    flops: int
    temporary: ByteCount
    runs_as: tuple[str, ...]
    returns_input: str | None = None
    copies: bool = False
    problem: str | None = None


NOTHING = OpFacts(0, ZERO, ())


def _storage(value: torch.Tensor) -> StorageWeakRef | None:
    try:
        return StorageWeakRef(value.untyped_storage())
    except (RuntimeError, NotImplementedError, TypeError):  # no storage (sparse, nested)
        return None


def _tensors(value: object) -> list[torch.Tensor]:
    return [leaf for leaf in tree_flatten(value)[0] if isinstance(leaf, torch.Tensor)]


class _InnerOps(TorchDispatchMode):
    """Records the ATen ops a node becomes and the storages they create and read."""

    def __init__(self, known: set[StorageWeakRef]):
        super().__init__()
        self.known = set(known)
        self.ops: list[str] = []
        self.created: dict[StorageWeakRef, tuple[int, torch.Tensor]] = {}  # storage -> (op index, a tensor on it)
        self.last_read: dict[StorageWeakRef, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        index = len(self.ops)
        self.ops.append(str(func))
        for tensor in _tensors((args, kwargs)):
            storage = _storage(tensor)
            if storage is not None and storage in self.created:
                self.last_read[storage] = index
        result = func(*args, **(kwargs or {}))
        for tensor in _tensors(result):
            storage = _storage(tensor)
            if storage is not None and storage not in self.known:
                self.known.add(storage)
                self.created[storage] = (index, tensor)
        return result

    def temporary_peak(self, results: set[StorageWeakRef]) -> ByteCount:
        """The most bytes of created storages that are not results alive at one inner op (the
        results are counted as alive throughout, so this is what the node needs beyond them)."""
        spans = [
            (first, self.last_read.get(storage, first), tensor_bytes(tensor))
            for storage, (first, tensor) in self.created.items()
            if storage not in results
        ]
        peak = ZERO
        for index in range(len(self.ops)):
            alive = sum((size for first, last, size in spans if first <= index <= last), ZERO)
            if alive.nbytes > peak.nbytes or (alive.bound != peak.bound and alive.nbytes == peak.nbytes):
                peak = alive
        return peak


def _writes(schema: torch.FunctionSchema) -> set[str]:
    return {a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write}


def _fresh_returns(schema: torch.FunctionSchema) -> bool:
    return all(r.alias_info is None for r in schema.returns)


def op_facts(node: torch.fx.Node) -> OpFacts:
    """Run ``node`` once on the fake values of its arguments; see the module docstring."""
    target = node.target
    if node.op != "call_function" or target is operator.getitem or not isinstance(target, torch._ops.OpOverload):
        return NOTHING
    schema = target._schema
    values = {arg.name: arg.meta.get("val") for arg in node.all_input_nodes}
    mode = detect_fake_mode(tuple(v for v in values.values() if isinstance(v, torch.Tensor)))
    if mode is None:
        return NOTHING  # no tensor argument: a factory op; nothing to learn beyond its result
    written = _writes(schema)

    def value_of(arg: Any) -> Any:
        return values[arg.name] if isinstance(arg, torch.fx.Node) else arg

    args = torch.fx.node.map_aggregate(node.args, value_of)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, value_of)
    try:
        with mode, torch.no_grad():
            if written:  # never mutate the graph's own metadata: write into copies
                args, kwargs = _copy_written(schema, written, args, kwargs)
            by_storage = {_storage(t): name for name, v in values.items() for t in _tensors(v)}
            inputs = {s for s in (_storage(t) for t in _tensors((args, kwargs))) if s is not None}
            recorder = _InnerOps(inputs)
            with FlopCounterMode(display=False) as counter, recorder:
                result = target(*args, **kwargs)
    except Exception as error:  # an op that cannot run on fake tensors: say so, go on
        return OpFacts(0, ZERO, (), problem=f"cannot run on fake tensors: {type(error).__name__}: {_first(error)}")
    results = {s for s in (_storage(t) for t in _tensors(result)) if s is not None}
    returned = [by_storage.get(_storage(t)) for t in _tensors(result)]
    returns_input = None
    if _fresh_returns(schema) and not written:
        returns_input = next((name for name in returned if name is not None), None)
    return OpFacts(
        flops=int(counter.get_total_flops()),
        temporary=recorder.temporary_peak(results),
        runs_as=tuple(dict.fromkeys(recorder.ops)),
        returns_input=returns_input,
        copies=not _fresh_returns(schema) and not written and bool(returned) and all(n is None for n in returned),
    )


def _copy_written(
    schema: torch.FunctionSchema, written: set[str], args: Any, kwargs: Any
) -> tuple[Any, dict[str, Any]]:
    args, kwargs = list(args), dict(kwargs)
    for index, argument in enumerate(schema.arguments):
        if argument.name not in written:
            continue
        if index < len(args) and not argument.kwarg_only:
            args[index] = _clone(args[index])
        elif argument.name in kwargs:
            kwargs[argument.name] = _clone(kwargs[argument.name])
    return tuple(args), kwargs


def _clone(value: Any) -> Any:
    return torch.fx.node.map_aggregate(value, lambda v: v.clone() if isinstance(v, torch.Tensor) else v)


def _first(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""
