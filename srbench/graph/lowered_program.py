"""Whether torch's own lowered program fails where srbench's does, told on srbench's error path.

Under ``decompose``, the program srbench runs is the one torch's lowering to core ATen makes
(``ExportedProgram.run_decompositions``). That lowering can break a model by itself: diffusers'
VAE decoder at batch 1, where the decomposition of ``group_norm`` drops a ``contiguous`` that the
fake strides made look needless and ``native_group_norm`` then refuses its input. srbench's
refusal named the op and torch's message only, so it read as srbench's fault. When preparing
fails on an op of a lowered capture, the model is captured and lowered again and the program
run by torch itself (``ExportedProgram.module()``): if that fails too, the refusal says so. This
costs a second capture and an eager-speed run, on the error path only.
"""

from __future__ import annotations

import torch

from srbench.formatting import error_summary
from srbench.graph.capture import capture
from srbench.graph.state_names import colliding_names, rename_state
from srbench.inputs import Inputs


def lowered_program_failure(model: torch.nn.Module, inputs: Inputs, *, name: str) -> str | None:
    """torch's error (:func:`~srbench.formatting.error_summary`) where the program its lowering
    makes of ``model`` fails on ``inputs`` run as torch runs it, else ``None`` (the lowered
    program runs, or the capture is not lowered: see ``srbench.graph.capture``). The model's
    state and ``inputs`` are left as they were: the program runs on copies of the inputs and of
    the buffers it writes, under ``no_grad``, with the random generators' states put back."""
    captured = capture(model, inputs, name=name, decompose=True)
    if not captured.lowered:
        return None
    exported = captured.exported
    rename_state(exported, colliding_names(exported))  # .module() cannot take them either
    program = exported.module()
    written = set(exported.graph_signature.buffers_to_mutate.values())
    buffers = {qualified: buffer.clone() for qualified, buffer in program.named_buffers() if qualified in written}
    call = inputs.clone()
    devices = call.cuda_device_indices()
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.func.functional_call(program, buffers, call.args, dict(call.kwargs))
    except Exception as error:  # whatever torch raises is the answer
        return error_summary(error)
    return None
