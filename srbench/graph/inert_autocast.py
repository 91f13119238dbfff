"""Autocast regions of a captured program that cannot change any op inside them, run as plain nodes.

``torch.export`` keeps a model's ``torch.autocast`` region as a ``wrap_with_autocast``
higher-order op around a sub-module (or, around a control-flow op, as ``_enter_autocast`` and
``_exit_autocast`` calls). The static runtime calls such an op as eager does: the sub-module runs
node by node through ``torch.fx``'s interpreter-generated code, with fresh allocations and none of
the program's planning, and costs far more than its ops (rotary-embedding-torch,
vector-quantize-pytorch and CoLT5 wrap their math in ``@autocast("cuda", enabled=False)``: 74-88%
of those models' node time on the CPU went to such regions).

A region changes nothing where either

* no value within it (the sub-module's, and the graphs of the ops it calls, recursively) lives on
  its device type: autocast's dispatch key of that device only sees that device's tensors (a
  ``cuda`` region around CPU tensors); or
* it disables an autocast that is off where it runs: the static runtime refuses calls under an
  autocast the caller entered (:mod:`srbench.graph.ambient_autocast`), every other thread it runs
  on starts with autocast off, and no enclosing region of the program enables that device's.

Such a region's ops are moved into the enclosing graph (the pair of calls dropped), where they
are planned as every other node. A control-flow op's sub-block runs within whatever state its
parent program has at the op, so there only the first rule applies. Every other region is kept
as eager runs it, its body checked the same way within the state it enters.
"""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.fx
from torch.utils import _pytree as pytree

WRAP = torch.ops.higher_order.wrap_with_autocast
_ENTER = torch.amp.autocast_mode._enter_autocast
_EXIT = torch.amp.autocast_mode._exit_autocast
WRAP_BODY = 4  # wrap_with_autocast(device_type, dtype, enabled, cache_enabled, body, *args)

# Device types whose tensors report that type (``tensor.device.type``): a region of another (a
# renamed private backend's ``privateuseone``) is never taken for one that touches no tensor.
_DEVICE_TYPES = frozenset({"cpu", "cuda", "xpu", "mps", "hpu", "mtia", "xla", "ipu", "maia"})
# Leaves of a node's value that are no tensor and live on no device.
_DEVICELESS = (int, float, bool, str, type(None), torch.SymInt, torch.SymFloat, torch.SymBool, torch.dtype,
               torch.device, torch.layout, torch.memory_format)  # fmt: skip


class Effect(enum.Enum):
    """What a region's autocast does to the ops inside it."""

    NO_TENSOR_ON_ITS_DEVICE = "no value of the region lives on its device type"
    DISABLES_WHAT_IS_OFF = "disables an autocast that is off where it runs"
    MAY_CAST = "may change the dtypes of the ops inside"

    @property
    def inert(self) -> bool:
        return self is not Effect.MAY_CAST


@dataclass(frozen=True)
class Ambient:
    """The autocast state where a graph's nodes run: the device types whose autocast is on, or
    ``None`` where it cannot be told (a control-flow op's sub-block, run within its parent's)."""

    enabled: frozenset[str] | None

    def entered(self, region: Region) -> Ambient:
        if self.enabled is None:
            return self
        if region.enabled:
            return Ambient(self.enabled | {region.device_type})
        return Ambient(self.enabled - {region.device_type})


NO_AUTOCAST = Ambient(frozenset())  # a program called by the static runtime (see the module docstring)
UNKNOWN = Ambient(None)


@dataclass(frozen=True)
class Region:
    """An autocast region's device type and whether it turns that device's autocast on."""

    device_type: str
    enabled: bool

    @classmethod
    def of(cls, node: torch.fx.Node) -> Region | None:
        """The region ``node`` opens (a ``wrap_with_autocast`` or ``_enter_autocast`` call), or
        ``None`` for any other node or arguments of an unexpected form."""
        if node.op != "call_function" or node.target not in (WRAP, _ENTER) or len(node.args) < 4:
            return None
        device_type, enabled = node.args[0], node.args[2]
        if not isinstance(device_type, str) or not isinstance(enabled, bool):
            return None
        return cls(device_type, enabled)

    def effect(self, ambient: Ambient, touches: Callable[[str], bool]) -> Effect:
        """What this region does where ``ambient`` holds; ``touches(device_type)``: whether a
        value within it may live on that device type."""
        if not self.enabled and ambient.enabled is not None and self.device_type not in ambient.enabled:
            return Effect.DISABLES_WHAT_IS_OFF
        if self.device_type in _DEVICE_TYPES and not touches(self.device_type):
            return Effect.NO_TENSOR_ON_ITS_DEVICE
        return Effect.MAY_CAST


def run_inert_regions_plain(graph_module: torch.fx.GraphModule, ambient: Ambient) -> int:
    """Move the ops of every region of ``graph_module`` (and of the regions it keeps) that
    cannot change them into the enclosing graph, with ``ambient`` the state where its nodes run;
    the number of regions removed. The graph modules changed are recompiled."""
    removed = _settle(graph_module, ambient)
    if removed:
        graph_module.recompile()
    return removed


def _settle(graph_module: torch.fx.GraphModule, ambient: Ambient) -> int:
    """``run_inert_regions_plain`` on one graph, walked in order with the state each node runs in."""
    removed = 0
    opened: list[tuple[torch.fx.Node, Ambient]] = []  # flat regions kept, innermost last, each with the state before it
    node = next(iter(graph_module.graph.nodes))
    while node.op != "root":
        region = Region.of(node)
        before = node.prev  # where the walk goes on from after a region is removed (its first op, if any)
        if node.op == "call_function" and node.target is _EXIT:
            ambient = opened.pop()[1] if opened and node.args[0] is opened[-1][0] else UNKNOWN
        elif region is None:
            ambient = UNKNOWN if _may_switch_autocast(node) else ambient
        elif node.target is _ENTER:
            if _drop_pair(graph_module, node, region, ambient):
                removed += 1
                node = before.next
                continue
            opened.append((node, ambient))
            ambient = ambient.entered(region)
        elif (body := region_body(graph_module, node)) is not None:
            touches = functools.partial(_touches, nodes=body.graph.nodes, owner=body)
            if region.effect(ambient, touches).inert and inline_region(graph_module, node, body):
                removed += 1
                node = before.next
                continue
            removed += run_inert_regions_plain(body, ambient.entered(region))
        node = node.next
    return removed


def _drop_pair(graph_module: torch.fx.GraphModule, enter: torch.fx.Node, region: Region, ambient: Ambient) -> bool:
    """Erase an ``_enter_autocast`` call and its ``_exit_autocast`` where the region between them
    is inert; whether it was."""
    exit_node = _exit_of(enter)
    inside = _between(enter, exit_node) if exit_node is not None else None
    if exit_node is None or inside is None:
        return False
    if not region.effect(ambient, functools.partial(_touches, nodes=inside, owner=graph_module)).inert:
        return False
    graph_module.graph.erase_node(exit_node)
    graph_module.graph.erase_node(enter)
    return True


def _may_switch_autocast(node: torch.fx.Node) -> bool:
    """Whether a node that opens no region may still change the autocast state (an enter or
    exit of an unexpected form, a setter of torch's): what follows it runs in a state not known."""
    return node.op == "call_function" and "autocast" in getattr(node.target, "__name__", "")


def _exit_of(enter: torch.fx.Node) -> torch.fx.Node | None:
    """The ``_exit_autocast`` of an ``_enter_autocast`` node, where it is its only user."""
    users = list(enter.users)
    if len(users) == 1 and users[0].op == "call_function" and users[0].target is _EXIT:
        return users[0]
    return None


def _between(first: torch.fx.Node, last: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The nodes strictly between two nodes of one graph, or ``None`` where ``last`` does not follow."""
    nodes = []
    node = first.next
    while node is not last:
        if node.op == "root":
            return None
        nodes.append(node)
        node = node.next
    return nodes


def region_body(graph_module: torch.fx.GraphModule, node: torch.fx.Node) -> torch.fx.GraphModule | None:
    """A ``wrap_with_autocast`` node's sub-module, where no other node reads it (changing it then
    changes this region only)."""
    attribute = node.args[WRAP_BODY] if len(node.args) > WRAP_BODY else None
    if not isinstance(attribute, torch.fx.Node) or attribute.op != "get_attr" or len(attribute.users) != 1:
        return None
    body = _attribute(graph_module, attribute)
    if not isinstance(body, torch.fx.GraphModule):
        return None
    readers = [n for n in graph_module.graph.nodes if n.op == "get_attr" and n.target == attribute.target]
    return body if len(readers) == 1 else None


def _touches(device_type: str, *, nodes: Iterable[torch.fx.Node], owner: torch.nn.Module) -> bool:
    """Whether a value of ``nodes`` (graph nodes of ``owner``), or of a graph they call, may live
    on ``device_type``: true where a value is not known (no recorded value, an opaque object)."""
    for node in nodes:
        if node.op == "output" or node.target in (_ENTER, _EXIT):  # a region's mode: no tensor
            continue
        for source in (node, *node.all_input_nodes):
            if source.op == "get_attr":
                value = _attribute(owner, source)
                if isinstance(value, torch.fx.GraphModule):
                    if _touches(device_type, nodes=value.graph.nodes, owner=value):
                        return True
                elif _leaves_touch(device_type, value):
                    return True
        if node.op != "get_attr" and _leaves_touch(device_type, node.meta.get("val", _Unknown())):
            return True
    return False


class _Unknown:
    """A node's value that was not recorded."""


def _leaves_touch(device_type: str, value: object) -> bool:
    for leaf in pytree.tree_leaves(value):
        if isinstance(leaf, torch.Tensor):
            if leaf.device.type == device_type:
                return True
        elif not isinstance(leaf, _DEVICELESS):
            return True
    return False


def inline_region(graph_module: torch.fx.GraphModule, node: torch.fx.Node, body: torch.fx.GraphModule) -> bool:
    """Copy ``body``'s nodes into ``graph_module``'s graph before the ``wrap_with_autocast``
    ``node`` and read its results from them, where every reader takes one result by position;
    whether it did (nothing changes where it did not)."""
    graph = graph_module.graph
    arguments = [argument for argument in node.args[WRAP_BODY + 1 :] if isinstance(argument, torch.fx.Node)]
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
    picked = _picked_results(node, body)
    if picked is None or node.kwargs or not len(placeholders) == len(arguments) == len(node.args) - WRAP_BODY - 1:
        return False
    values: dict[torch.fx.Node, torch.fx.Node] = dict(zip(placeholders, arguments))
    with graph.inserting_before(node):
        for inner in body.graph.nodes:
            if inner.op in ("placeholder", "output"):
                continue
            if inner.op == "get_attr":  # a region's or a control-flow op's sub-module: given a name here
                name = _fresh_attribute(graph_module, str(inner.target))
                setattr(graph_module, name, _attribute(body, inner))
                copied = graph.get_attr(name)
                copied.meta = dict(inner.meta)
                values[inner] = copied
            else:
                values[inner] = graph.node_copy(inner, values.__getitem__)
    for reader, result in picked.items():
        reader.replace_all_uses_with(values[result])
        graph.erase_node(reader)
    attribute = node.args[WRAP_BODY]
    graph.erase_node(node)
    if isinstance(attribute, torch.fx.Node) and not attribute.users:
        graph.erase_node(attribute)
        graph_module.delete_submodule(str(attribute.target))
    return True


def _picked_results(node: torch.fx.Node, body: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.fx.Node] | None:
    """Each reader of a ``wrap_with_autocast`` node and the node of ``body`` whose result it
    takes, where every reader is a ``getitem`` by position of one computed by a node."""
    (output,) = [n for n in body.graph.nodes if n.op == "output"]
    results = output.args[0]
    if not isinstance(results, (tuple, list)):
        return None
    picked = {}
    for reader in node.users:
        index = reader.args[1] if reader.target is operator.getitem and len(reader.args) == 2 else None
        result = results[index] if isinstance(index, int) and -len(results) <= index < len(results) else None
        if not isinstance(result, torch.fx.Node):
            return None
        picked[reader] = result
    return picked


def _attribute(owner: torch.nn.Module, node: torch.fx.Node) -> object:
    """What a ``get_attr`` node of ``owner``'s graph reads."""
    return operator.attrgetter(str(node.target))(owner)


def _fresh_attribute(graph_module: torch.nn.Module, target: str) -> str:
    stem = target.replace(".", "_")
    name, suffix = stem, 0
    while hasattr(graph_module, name):
        suffix += 1
        name = f"{stem}_{suffix}"
    return name
