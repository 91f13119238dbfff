"""The options of srbench's static runtime, named as in PyTorch's Static Runtime."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StaticOptions:
    """How a :class:`~srbench.static.StaticModule` prepares and runs a model.

    ``enable_out_variant``: run ops through their ``.out`` overloads into the planned slab (off:
    every op that allocates runs as is, nothing is managed). ``cleanup_activations``: give the
    slab's memory back after each run and take it again at the next (one ``resize_`` each way;
    the tensor views into it stay valid). ``manage_output_tensors``: graph outputs are written
    into an arena owned by the runtime instead of fresh tensors; they stay valid until the next
    ``run`` of the same runtime, which overwrites them. ``planner``: a name registered under
    ``srbench.planners``. ``decompose``: capture lowered to core ATen, where every op has an out
    variant but fused ops are split into pieces.
    """

    planner: str = "greedy_by_size"
    enable_out_variant: bool = True
    cleanup_activations: bool = True
    manage_output_tensors: bool = False
    decompose: bool = False
