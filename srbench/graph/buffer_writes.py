"""A sub-module's buffer that forward assigns anew, written in the graph as the root's are.

``torch.export`` records a buffer assigned anew in forward (``self.buffer = x[..., -2:]``) as a
last ``copy_`` into the buffer, but on the root module only (its buffer-assignment hook compares
the module's table with the root's): a sub-module's is rebound while tracing and leaves no write
in the graph, so the program would read the buffer's first value at every call. pytorch-tcn's
streaming inference keeps its convolutions' left context so (``TemporalPad1d.buffer``), as any
block-wise streaming layer written the natural way does.

:func:`sub_module_buffers_written` closes that gap for the one trace it wraps: while the model's
forward runs, it notes the buffer each sub-module's assignment replaces (the traced buffer, the
program's placeholder), and when forward returns it copies each such buffer's last value into
the one it replaced, where shape and dtype agree. The graph then writes a sub-module's buffer
assigned anew as export writes the root's, and the static runtime rebinds it after each call as
it does the root's (``CapturedGraph.assigned_state``). An assignment of another shape or dtype is
left as export leaves it, for the state checks to refuse by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.nn.modules.module import register_module_buffer_registration_hook


@dataclass
class _Assignments:
    """The buffers sub-modules assigned anew during one forward: the tensor each replaced first
    (the traced buffer), by module and name, and whether forward is running."""

    root: torch.nn.Module
    running: bool = False
    replaced: dict[tuple[int, str], tuple[torch.nn.Module, str, torch.Tensor]] = field(default_factory=dict)
    sub_modules: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        self.sub_modules = frozenset(id(module) for module in self.root.modules() if module is not self.root)

    def note(self, module: torch.nn.Module, name: str, value: Any) -> Any:
        """The buffer-registration hook (process-wide): an assignment by a sub-module's forward
        while export traces it keeps the traced tensor it replaces (the first, for a buffer
        assigned more than once); the value is stored as given. Another module's (another
        thread's), and a real tensor's (an eager call), are left alone."""
        key = (id(module), name)
        old = module._buffers.get(name)
        if (self.running and id(module) in self.sub_modules and key not in self.replaced
                and isinstance(old, torch.Tensor) and is_fake(old)):  # fmt: skip
            self.replaced[key] = (module, name, old)
        return value

    def start(self, *_: Any) -> None:
        self.running = True
        self.replaced.clear()

    def write(self, *_: Any) -> None:
        """At the end of forward: each replaced buffer takes its module's last value for it."""
        self.running = False
        for module, name, old in self.replaced.values():
            new = module._buffers.get(name)
            if isinstance(new, torch.Tensor) and new is not old and (new.shape, new.dtype) == (old.shape, old.dtype):
                old.copy_(new)


@contextmanager
def sub_module_buffers_written(model: torch.nn.Module) -> Iterator[None]:
    """Inside: a forward of ``model`` that assigns a sub-module's buffer anew also copies the
    new value into the buffer it replaced, at its end (see the module docstring)."""
    assignments = _Assignments(model)
    handles = [
        register_module_buffer_registration_hook(assignments.note),
        model.register_forward_pre_hook(assignments.start),
        model.register_forward_hook(assignments.write, always_call=True),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
