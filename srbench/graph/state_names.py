"""State names that torch's lowering cannot take, renamed around it.

``ExportedProgram.run_decompositions`` (and ``.module()``) put the program's parameters, buffers
and constants back on a ``torch.fx.GraphModule`` under their qualified names, then look each up
by attribute. A model's sub-module named ``graph``, ``code`` or ``meta`` (a PyG layer
``self.graph = GraphConv(...)``) is legal on the model, but on a GraphModule that name is the
module's own graph, code or metadata: torch failed with "references nonexistent attribute lin of
graph" and ``decompose`` could not prepare such a model (nor could any option prepare one
that ``torch.vmap``s such a sub-module: its capture is retraced at the ATen level alike). The
names whose first part is one of the GraphModule's own attributes are renamed in the program
before the lowering and back in the lowered program after (the signature's targets, the state
dict's and constants' keys), so the rest of srbench sees the model's own names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from torch.export import ExportedProgram


def colliding_names(exported: ExportedProgram) -> dict[str, str]:
    """The first parts of ``exported``'s state names that a GraphModule's own attributes shadow,
    each with a name of its own that nothing shadows and no other state has."""
    graph_module = exported.graph_module
    targets = [spec.target for spec in exported.graph_signature.input_specs if spec.target is not None]
    firsts = {target.split(".")[0] for target in targets}
    taken = set(firsts)
    renamed = {}
    for first in sorted(firsts):
        if hasattr(type(graph_module), first) or first in vars(graph_module):
            new = f"_srbench_{first}"
            while new in taken or hasattr(type(graph_module), new):
                new = f"_{new}"
            taken.add(new)
            renamed[first] = new
    return renamed


def rename_state(exported: ExportedProgram, names: Mapping[str, str]) -> None:
    """Rename, in place, the state of ``exported`` whose names start with a key of ``names``: the
    targets of the signature's inputs and outputs, and the keys of the state dict and constants."""
    if not names:
        return

    def renamed(target: str) -> str:
        first, dot, rest = target.partition(".")
        return names.get(first, first) + dot + rest

    signature = exported.graph_signature
    signature.input_specs = [
        spec if spec.target is None else replace(spec, target=renamed(spec.target)) for spec in signature.input_specs
    ]
    signature.output_specs = [
        spec if spec.target is None else replace(spec, target=renamed(spec.target)) for spec in signature.output_specs
    ]
    exported._state_dict = {renamed(key): value for key, value in exported.state_dict.items()}
    exported._constants = {renamed(key): value for key, value in exported.constants.items()}


def lowered_with_own_names(
    exported: ExportedProgram, lower: Callable[[ExportedProgram], ExportedProgram]
) -> ExportedProgram:
    """``lower(exported)`` with the colliding state names renamed around it (see the module docstring)."""
    names = colliding_names(exported)
    rename_state(exported, names)
    try:
        lowered = lower(exported)
    finally:
        rename_state(exported, {new: old for old, new in names.items()})
    rename_state(lowered, {new: old for old, new in names.items()})
    return lowered
