"""Why a model drawing from an explicit ``torch.Generator`` cannot be captured, said precisely.

An op given ``generator=`` (``torch.randn(..., generator=g)``, ``torch.bernoulli(x,
generator=g)``, an ``nn.init``-style ``normal_(w, generator=g)`` in forward) draws from that
generator in eager, and the generator's state moves call by call. ``torch.export`` does not keep
the generator: it lifts a *copy*, taken at capture time, into the program as a constant, whatever
the generator is: the model's own, one made and seeded in forward (eager draws the same numbers at
every call), one passed in as an argument (the program does not read the argument at all), even
``torch.default_generator`` given explicitly. The program's numbers then follow that copy, which no
one else advances, so no captured program can draw eager's numbers in sequence: capture refuses,
naming the op and the model's line that draws, and for a generator passed in, the argument.
"""

from __future__ import annotations

import re

import torch
import torch.fx
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs

GENERATOR_REASON = (
    "torch.export lifts a copy of the generator, taken at capture time, into the program, so the "
    "program's numbers would follow that copy: not the model's generator, which eager advances call "
    "by call, nor a generator made in forward, which eager makes (and seeds) anew at every call, nor "
    "one passed in, which the program does not read, nor torch.default_generator given explicitly. "
    "Draw from the global generator (leave generator= out), or pass the random values in as an input"
)


def generator_argument(inputs: Inputs) -> str | None:
    """Why a call passing a ``torch.Generator`` is refused (naming the argument), or ``None``."""
    leaves, _ = pytree.tree_flatten_with_path((inputs.args, dict(inputs.kwargs)))
    for path, leaf in leaves:
        if isinstance(leaf, torch.Generator):
            return f"argument {_argument(path)} is a torch.Generator; {GENERATOR_REASON}"
    return None


def lifted_generator(exported: ExportedProgram) -> str | None:
    """Why ``exported``, which holds a lifted ``torch.Generator``, is refused (naming the first op
    drawing from it and the model's line where it is known), or ``None`` where it holds none."""
    lifted = {name for name, value in exported.constants.items() if isinstance(value, torch.Generator)}
    if not lifted:
        return None
    placeholders = {spec.arg.name for spec in exported.graph_signature.input_specs if spec.target in lifted}
    users = [user for node in exported.graph.nodes if node.name in placeholders for user in node.users]
    drawing = f"op '{users[0].name}' ({users[0].target}{_line(users[0])}) draws" if users else "the model draws"
    return explicit_generator(drawing)


def explicit_generator(drawing: str = "the model draws") -> str:
    """Why a model whose ``drawing`` (an op, or the model where no op is known: torch 2.11's export
    refuses a generator before any op exists) draws from a generator given explicitly is refused."""
    return f"{drawing} random numbers from a torch.Generator given explicitly; {GENERATOR_REASON}"


def _argument(path: tuple[pytree.KeyEntry, ...]) -> str:
    """``args[0]``, ``kwargs['g']``: where a leaf lies in ``(args, kwargs)``."""
    return ("args" if path[0] == pytree.SequenceKey(0) else "kwargs") + pytree.keystr(path[1:])


_FRAME = re.compile(r'\s*File "(?P<file>.*)", line (?P<line>\d+)')


def _line(node: torch.fx.Node) -> str:
    """``, at file:line `code``` of the innermost frame of the node's stack trace (export keeps the
    model's own frames there), or ``""``."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    frames = [(index, match) for index, line in enumerate(lines) if (match := _FRAME.match(line))]
    if not frames:
        return ""
    index, frame = frames[-1]
    code = lines[index + 1].strip() if index + 1 < len(lines) else ""
    return f", at {frame['file']}:{frame['line']}" + (f" `{code}`" if code else "")
