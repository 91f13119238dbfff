"""Refuse a model whose forward carries state between calls in plain Python attributes.

``torch.export`` runs forward once and puts the module attributes back: a counter
``self.calls += 1`` used in the computation, or ``self.scale = self.scale * 2``, is baked into the
program with its capture-time value, and the program gave other numbers than eager from the second
call on, silently. Refusing every model whose forward assigns an attribute refused harmless ones
(an LSTM's ``_flat_weights`` list made anew from the same tensors, transformers' flags set to the
value they had, Funnel's ``seq_len`` taken from the input's shape, RWKV's ``layers_are_rescaled``
set once), so the model is called in eager instead and what its calls leave is compared.

The first call may settle an attribute for good (RWKV's flag: ``False`` before the first call,
``True`` after every call): such a model is called a second time, and only an attribute that the
second call leaves otherwise than the first is state carried from call to call, which no captured
program holds; each call gets a fresh copy of the inputs, so a kept input (``self.last = x``) is a
new tensor at each call and shows. Not state: the attribute that torch's hook-based
reparametrizations (``torch.nn.utils.weight_norm``, ``spectral_norm``, ``prune``) assign in their
forward pre-hook before every forward, a new tensor made from the module's registered tensors
(export runs the hook, so the program makes it at every call as eager does); such models were
refused. A counter that changes no number is refused too: it is state
all the same, which the model's next version may read. Not caught: an attribute set at the first
call only and read later (a cache ``if self.cache is None: self.cache = f(x)``), as the second
call leaves it as the first did. A model with no attribute changed by its first call costs one
eager call; a model eager cannot run on the example inputs is not checked (no calls to
compare). Everything the calls changed is put back (plain attributes, parameters and buffers
written in place, the random generators), so the model is left as it was given.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from srbench.graph.capture import CaptureError
from srbench.graph.eager_layout import OutputLayouts, eager_layouts
from srbench.inputs import Inputs

# Module attributes that are no state of the model's forward: its registered tensors and
# sub-modules (compared elsewhere or walked) and the hook tables.
_MODULE_TABLES = frozenset({"_parameters", "_buffers", "_modules"})

# Values compared by equality; anything else (tensors, modules, other objects) by identity.
_PLAIN = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, enum.Enum)


@dataclass(frozen=True)
class _Copy:
    """A container's items as they were when snapshotted, and the container itself, whose items
    a call may change in place (``self.history.append(x)``)."""

    container: Any
    items: tuple[Any, ...]


def _snapshot_value(value: Any) -> Any:
    if isinstance(value, (list, tuple, set, frozenset)):
        return _Copy(value, tuple(_snapshot_value(item) for item in value))
    if isinstance(value, dict):
        return _Copy(value, tuple((key, _snapshot_value(item)) for key, item in value.items()))
    return value


def _same(before: Any, after: Any) -> bool:
    """Whether two snapshotted values are the same state: plain values equal, containers of the
    same type with the same items, anything else the same object."""
    if before is after:
        return True
    if isinstance(before, _Copy) and isinstance(after, _Copy):
        return (
            type(before.container) is type(after.container)
            and len(before.items) == len(after.items)
            and all(_same(a, b) for a, b in zip(before.items, after.items, strict=True))
        )
    if isinstance(before, tuple) and isinstance(after, tuple):  # dict items
        return len(before) == len(after) and all(_same(a, b) for a, b in zip(before, after, strict=True))
    if isinstance(before, _PLAIN) and isinstance(after, _PLAIN) and type(before) is type(after):
        return bool(before == after) or (before != before and after != after)  # NaN is NaN
    return False


def _described(value: Any) -> str:
    """``value`` as it was snapshotted (a container's items then, not now), for a message."""
    if isinstance(value, _Copy):
        items = [_described(item) for item in value.items]
        if isinstance(value.container, dict):
            return "{" + ", ".join(f"{key!r}: {_described(item)}" for key, item in value.items) + "}"
        opening, closing = ("[", "]") if isinstance(value.container, list) else ("(", ")")
        return opening + ", ".join(items) + closing
    if isinstance(value, torch.Tensor):
        return f"a tensor {tuple(value.shape)} {value.dtype} (id {id(value):#x})"
    return repr(value)


def _shown(value: Any) -> str:
    text = _described(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _remade_by_hooks(module: torch.nn.Module) -> frozenset[str]:
    """The attributes of ``module`` that a forward pre-hook of torch's hook-based
    reparametrizations makes anew before every forward (``WeightNorm.name``,
    ``SpectralNorm.name``, a pruning method's ``_tensor_name``)."""
    from torch.nn.utils.prune import BasePruningMethod
    from torch.nn.utils.spectral_norm import SpectralNorm
    from torch.nn.utils.weight_norm import WeightNorm

    names = set()
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, (WeightNorm, SpectralNorm)):
            names.add(hook.name)
        elif isinstance(hook, BasePruningMethod):
            names.add(hook._tensor_name)
    return frozenset(names)


def _state(model: torch.nn.Module) -> dict[tuple[str, str], Any]:
    """Every plain attribute of every sub-module, by (module path, attribute name), less those
    a reparametrization's hook makes anew at every call (:func:`_remade_by_hooks`)."""
    return {
        (path, key): _snapshot_value(value)
        for path, module in model.named_modules(remove_duplicate=False)
        for key, value in vars(module).items()
        if key not in _MODULE_TABLES and "hook" not in key and key not in _remade_by_hooks(module)
    }


def _put_back(model: torch.nn.Module, state: dict[tuple[str, str], Any]) -> None:
    """The attributes as ``state`` holds them: removed where a call added them, the objects they
    were, and the items of containers a call changed in place (one level deep)."""
    modules = dict(model.named_modules(remove_duplicate=False))
    for path, module in modules.items():
        for key in [key for key in vars(module) if (path, key) not in state]:
            if key not in _MODULE_TABLES and "hook" not in key:
                delattr(module, key)
    for (path, key), value in state.items():
        if isinstance(value, _Copy):
            _refill(value)
            value = value.container
        modules[path].__dict__[key] = value


def _refill(copy: _Copy) -> None:
    container, items = copy.container, [item.container if isinstance(item, _Copy) else item for item in copy.items]
    if isinstance(container, list):
        container[:] = items
    elif isinstance(container, set):
        container.clear()
        container.update(items)
    elif isinstance(container, dict):
        container.clear()
        container.update((key, value.container if isinstance(value, _Copy) else value) for key, value in copy.items)


@contextmanager
def _tensors_kept(model: torch.nn.Module) -> Iterator[None]:
    """The model's parameters and buffers and its own generators as they were, after the body: a
    forward may write its tensors in place (running statistics, ``self.weight.mul_(2)`` under
    ``no_grad``; the program repeats such writes at every call, as eager does, but the calls made
    while preparing are not the user's), or draw from a generator it holds (capture refuses
    that, see :mod:`srbench.graph.capture`, but the model is left as it was given).

    Every tensor is copied before the body, which costs the model's size for its duration:
    copying only what is written would need a dispatch mode watching every op, and under one
    ``torch.cond`` and ``while_loop`` run through ``torch.compile`` in a way that left later
    captures failing. Every tensor is written back too: version counters would say which were
    written, but some kernels write without moving them (``aten.batch_norm``'s running
    statistics in training mode). A forward may also assign a new tensor to a registered buffer
    (``self.ema = self.ema * 0.9 + ...``, which ``nn.Module`` stores in its buffer table): the
    tables get their tensors back, else the model kept the check's result and the program read
    state one call ahead of eager's.

    Only the tensors whose values the calls changed are written back (compared with their
    copies): writing every one moved every parameter's version counter, so preparing broke a
    backward pending over the model's parameters ("modified by an inplace operation") and the
    user's views of them made under ``inference_mode``, which the model never wrote."""
    saved = [(tensor, tensor.detach().clone()) for tensor in (*model.parameters(), *model.buffers())]
    tables: list[tuple[dict[str, Any], dict[str, Any]]] = [
        (table, dict(table)) for module in model.modules() for table in (module._buffers, module._parameters)
    ]
    generators = {
        id(value): (value, value.get_state())
        for module in model.modules()
        for value in vars(module).values()
        if isinstance(value, torch.Generator)
    }
    try:
        yield
    finally:
        for table, entries in tables:
            table.clear()
            table.update(entries)
        with torch.inference_mode():  # no autograd; and a buffer may be an inference tensor
            for tensor, copy in saved:
                if _changed(tensor, copy):
                    tensor.copy_(copy)
        for generator, state in generators.values():
            generator.set_state(state)


def _changed(tensor: torch.Tensor, copy: torch.Tensor) -> bool:
    """Whether ``tensor`` no longer holds the values of ``copy`` (NaN where NaN was); a tensor
    that cannot be compared (a size changed by ``resize_``) counts as changed."""
    try:
        if torch.equal(tensor, copy):
            return False
        floating = tensor.dtype.is_floating_point or tensor.is_complex()
        return not (floating and torch.allclose(tensor, copy, rtol=0, atol=0, equal_nan=True))
    except RuntimeError:
        return True


def refuse_carried_state(model: torch.nn.Module, inputs: Inputs, *, name: str) -> OutputLayouts | None:
    """Raise :class:`CaptureError` if ``model``'s eager calls on ``inputs`` carry state from call
    to call in a plain attribute (see the module docstring), naming the module, the attribute and
    its values; leave ``model`` as it was either way. Else the layouts of the first call's
    outputs (:func:`srbench.graph.eager_layout.eager_layouts`), which the program is to give its
    own (no eager call more for them); ``None`` where eager cannot run the model."""
    devices = sorted({t.device.index or 0 for t in inputs.tensors() if t.device.type == "cuda"})
    before = _state(model)
    try:
        with torch.random.fork_rng(devices=devices), _tensors_kept(model), torch.no_grad():
            outputs = model(*(call := inputs.clone()).args, **call.kwargs)
            layouts = eager_layouts(outputs, (*call.tensors(), *model.parameters(), *model.buffers()))
            first = _state(model)
            if all(_same(value, first.get(key)) for key, value in before.items()) and first.keys() == before.keys():
                return layouts
            model(*(call := inputs.clone()).args, **call.kwargs)
            second = _state(model)
    except Exception:  # eager cannot run it: no calls to compare, nothing to refuse
        # An op with no eager kernel for the device (which srbench may still run with an out
        # variant registered for it, or report by name at prepare time) fails here first; the
        # check has no verdict then, and capture and the runtime say what they can do.
        return None
    finally:
        _put_back(model, before)
    for key in first.keys() | second.keys():
        if key not in first or key not in second or not _same(first[key], second[key]):
            path, attribute = key
            where = f"module {path!r}" if path else "the model"
            raise CaptureError(
                name,
                f"the forward of {where} carries state from call to call in its attribute {attribute!r}: "
                f"{_shown(first.get(key))} after one call, {_shown(second.get(key))} after a second on "
                "the same inputs; torch.export runs forward once and puts the attribute back, so the "
                "program would hold its capture-time value where eager's later calls see another (other "
                "numbers, silently, wherever it is read). Keep such state in a registered buffer written "
                "in place, or pass it in",
            )
    return layouts
