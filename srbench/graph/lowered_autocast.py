"""Autocast regions that cast, lowered to the casts they make, so the static runtime plans their ops.

``torch.export`` keeps a ``with torch.autocast("cpu", dtype=torch.bfloat16):`` block as a
``wrap_with_autocast`` call of a sub-module, and a region that may cast (not inert, see
:mod:`srbench.graph.inert_autocast`) was run as eager runs it: its ops dispatched one by one
under autocast through ``torch.fx``'s generated code, with fresh allocations, none of the
program's planning, and every weight cast afresh at each call (the outside sweep's
``autocast_nested_off``, two ``Linear`` layers in bfloat16 around a float32 softmax: 3.06x
eager's time). What autocast does to an op (the dtype it casts each input to) depends only on
the op, the region's device type and dtype, and its inputs' dtypes and devices, all of which the
captured program records. So the body is traced once at prepare time under the region, with
``make_fx`` at the level autocast dispatches at, on the recorded values of its arguments (export's
fake tensors): the graph traced holds the casts autocast made as ``_to_copy`` nodes and each op
on the inputs autocast gave it. Run with autocast off, that graph calls the same kernels on the
same inputs as the region does under autocast, so it replaces the region's call in the program,
where its ops are planned as every other node's (``autocast_nested_off``: 0.62x eager's time,
from 1.65-3.06x). The weights' casts are then ops of constants only, so the runtime folds them
at prepare time (:class:`srbench.static.choose.RunAs` ``CONSTANT``): eager casts every weight at
every call (autocast caches a cast only within one region's call), srbench once.

Only regions of a program the static runtime calls itself are lowered (there no autocast is on:
:data:`srbench.graph.inert_autocast.NO_AUTOCAST`); a control-flow op's sub-block runs within its
parent's state, not known when it is prepared, and keeps its regions. A body that cannot be
traced so (an op without a fake implementation, a shape not known as an integer) keeps its region,
run as eager runs it.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any

import torch
import torch.fx
from torch._guards import detect_fake_mode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree

from srbench.graph.inert_autocast import WRAP, WRAP_BODY, Region, inline_region, region_body


def lower_casting_regions(graph_module: torch.fx.GraphModule) -> int:
    """Replace each ``wrap_with_autocast`` call of ``graph_module`` (a program run with autocast
    off) by the ops its body makes under the region, casts included; the number of regions
    lowered. The graph module is recompiled where one was."""
    lowered = 0
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function" or node.target is not WRAP or Region.of(node) is None:
            continue
        body = region_body(graph_module, node)
        traced = _traced_under_region(node, body) if body is not None and _only_ops(body) else None
        # Inlined or kept whole: the traced body is never run under the region, where autocast
        # would cast again what a nested region of it had kept in float32.
        if traced is not None and inline_region(graph_module, node, traced):
            lowered += 1
    if lowered:
        graph_module.recompile()
    return lowered


def _only_ops(body: torch.fx.GraphModule) -> bool:
    """Whether ``body`` calls only ATen ops, ``getitem`` and autocast regions of the same kind:
    a grad-mode block (``wrap_with_set_grad_enabled``, whose results carry history) or a
    control-flow op inside would be traced away or through, losing what the program keeps of it."""
    for node in body.graph.nodes:
        if node.op == "get_attr":
            if not all(user.target is WRAP for user in node.users):
                return False
        elif node.op == "call_function":
            if node.target is WRAP:
                nested = region_body(body, node)
                if nested is None or not _only_ops(nested):
                    return False
            elif not isinstance(node.target, torch._ops.OpOverload) and node.target is not operator.getitem:
                return False
        elif node.op not in ("placeholder", "output"):
            return False
    return True


def _traced_under_region(node: torch.fx.Node, body: torch.fx.GraphModule) -> torch.fx.GraphModule | None:
    """``body`` traced under ``node``'s region on its arguments' recorded values, or ``None``
    where they are not all known (a tensor of a shape not fixed, a value not recorded) or the
    trace fails."""
    arguments = node.args[WRAP_BODY + 1 :]
    if node.kwargs or any(isinstance(argument, torch.fx.Node) and "val" not in argument.meta for argument in arguments):
        return None
    values = [argument.meta["val"] if isinstance(argument, torch.fx.Node) else argument for argument in arguments]
    if not all(_known(value) for value in values):
        return None
    fake_mode = detect_fake_mode(values)
    region: tuple[Any, ...] = tuple(node.args[:WRAP_BODY])  # device_type, dtype, enabled, cache_enabled

    def under_region(*args: object) -> object:
        with torch.autocast(*region):
            return body(*args)

    try:
        with fake_mode if fake_mode is not None else contextlib.nullcontext(), torch.no_grad():
            return make_fx(under_region)(*values)
    except Exception:  # any failure keeps the region, run as eager runs it (see the module docstring)
        return None


def _known(value: object) -> bool:
    """Whether a recorded argument value can be traced on: tensors of fixed shapes, plain scalars."""
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            if not all(isinstance(size, int) for size in (*leaf.shape, *leaf.stride())):
                return False
        elif not isinstance(leaf, (int, float, bool, type(None), torch.dtype, torch.device)):
            return False
    return True
