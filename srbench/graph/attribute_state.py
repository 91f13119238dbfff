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
refused. Nor are the caches of a module that is a ``torch.distributions.Transform`` caching its
last call (pyro's flows: ``_cached_x_y``, the last input and output, read only where a call is
given the very tensor object it holds, which a later call's tensors are not; pyro's
``_cached_log_scale`` and the like, recomputed where that check misses), where a third call with
them filled with NaN answers as one without (written before read: nothing carried); every pyro
flow of such transforms was refused. Nor is a weak reference made anew to a new object that dies
with the call (torch 2.11's ``Transform.inv``): a weak reference is compared by the object it
refers to, none once dead. Nor is a tensor each call remakes from the shapes and the module's own
tensors before reading it (nnAudio's ``STFT.inverse`` keeps its window's sum of squares, ``w_sum``,
for the length given): equal after a call on other inputs, and the calls' answers the same with it
filled with other values, it is the tensor counterpart of Funnel's ``seq_len`` (tensors are compared
by identity, so it showed as changed at every call and every nnAudio inverse STFT was refused). A
tensor holding the data (``self.last = x``, read or not) is still state. A counter that changes no
number is refused too: it is state all the same, which the model's next version may read.

State set at the first call only and read later (a cache ``if not hasattr(self, "cache"):
self.cache = x.clone()``, a buffer registered or a ``None`` buffer filled in forward, a layer
made there) is no state carried from call to call (the second call leaves it as the first did),
but export traces forward as a first call, so the program took the first call's path at every
call where eager's later calls read the first call's value: other numbers from the second call
on, silently. Where a first call sets an attribute, a call after it is compared with a first
call, both on other inputs (floats scaled, other tensors reversed) and the registered tensors as
the first call left them (a buffer written at every call is state the program carries, and a
cache written into a buffer is read as filled where an attribute says so): other answers refuse
the model, naming what the first call set. A first call registering a parameter or layer is
refused without comparing (export makes its tensors as fake ones). A flag or a cache of
positions made from shapes gives the same answers and is accepted. A buffer a call registers,
fills where it was ``None`` or registers again with another shape (x-transformers' ALiBi bias,
made for the longest sequence seen) is compared with a first call that makes its own on the
other inputs: where they agree, and a second call leaves the buffer as the first made it (no
state carried from call to call), it is a cache, and prepare leaves the model with what its
call on the example registered, as eager's call would (export then traces the path eager's
later calls take, reading a real tensor); such a model was refused prepared fresh, and at any
longer sequence than it had seen. A buffer assigned a tensor
of another dtype, shape or device than it had (``self.ema = new.double()``) is refused too: the
program writes each new value into the buffer it captured.

A model with no attribute changed by its first call costs one eager call, one that sets state
at its first call five; a model eager cannot run on the example inputs is not checked (no calls
to compare). Everything the calls changed is put back (plain attributes, registrations,
parameters and buffers written in place, the random generators), so the model is left as it
was given, but for a cache kept as above.
"""

from __future__ import annotations

import enum
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from srbench.graph.capture import CaptureError
from srbench.graph.eager_layout import OutputLayouts, eager_layouts
from srbench.graph.module_snapshot import MODULE_TABLES, Copy, ModuleSnapshot, snapshot_value
from srbench.graph.output_types import SubclassOutput, subclass_output
from srbench.inputs import Inputs

# Values compared by equality; anything else (tensors, modules, other objects) by identity.
_PLAIN = (int, float, complex, bool, str, bytes, type(None), torch.dtype, torch.device, enum.Enum)


def _same(before: Any, after: Any) -> bool:
    """Whether two snapshotted values are the same state: plain values equal, containers of the
    same type with the same items, weak references to the same object (or both dead), anything
    else the same object."""
    if before is after:
        return True
    if isinstance(before, Copy) and isinstance(after, Copy):
        return (
            type(before.container) is type(after.container)
            and len(before.items) == len(after.items)
            and all(_same(a, b) for a, b in zip(before.items, after.items, strict=True))
        )
    if isinstance(before, weakref.ref) and isinstance(after, weakref.ref):
        # a weak reference is the object it refers to, none once that has died (torch 2.11's
        # ``Transform.inv`` keeps a new one to a new, dropped inverse at every call)
        return before() is after()
    if isinstance(before, tuple) and isinstance(after, tuple):  # dict items
        return len(before) == len(after) and all(_same(a, b) for a, b in zip(before, after, strict=True))
    if isinstance(before, _PLAIN) and isinstance(after, _PLAIN) and type(before) is type(after):
        return bool(before == after) or (before != before and after != after)  # NaN is NaN
    return False


def _described(value: Any) -> str:
    """``value`` as it was snapshotted (a container's items then, not now), for a message."""
    if isinstance(value, Copy):
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
        (path, key): snapshot_value(value)
        for path, module in model.named_modules(remove_duplicate=False)
        for key, value in vars(module).items()
        if key not in MODULE_TABLES and "hook" not in key and key not in _remade_by_hooks(module)
    }


@dataclass(frozen=True)
class _Tensors:
    """The model's parameters and buffers and its own generators as they were, for
    :meth:`put_back` after eager calls: a forward may write its tensors in place (running
    statistics, ``self.weight.mul_(2)`` under ``no_grad``; the program repeats such writes at every
    call, as eager does, but the calls made while preparing are not the user's), or draw from a
    generator it holds (capture refuses that, see :mod:`srbench.graph.capture`, but the model is
    left as it was given).

    Every tensor is copied, which costs the model's size while the check runs: copying only what
    is written would need a dispatch mode watching every op, and under one ``torch.cond`` and
    ``while_loop`` run through ``torch.compile`` in a way that left later captures failing. Every
    tensor is compared too: version counters would say which were written, but some kernels
    write without moving them (``aten.batch_norm``'s running statistics in training mode). A
    forward may also assign a new tensor to a registered buffer (``self.ema = self.ema * 0.9 +
    ...``, which ``nn.Module`` stores in its buffer table): the tables get their tensors back,
    else the model kept the check's result and the program read state one call ahead of eager's.

    Only the tensors whose values the calls changed are written back (compared with their
    copies): writing every one moved every parameter's version counter, so preparing broke a
    backward pending over the model's parameters ("modified by an inplace operation") and the
    user's views of them made under ``inference_mode``, which the model never wrote."""

    saved: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    tables: tuple[tuple[dict[str, Any], dict[str, Any]], ...]
    generators: tuple[tuple[torch.Generator, torch.Tensor], ...]

    @classmethod
    def of(cls, model: torch.nn.Module) -> _Tensors:
        generators = {
            id(value): (value, value.get_state())
            for module in model.modules()
            for value in vars(module).values()
            if isinstance(value, torch.Generator)
        }
        return cls(
            saved=tuple((tensor, tensor.detach().clone()) for tensor in (*model.parameters(), *model.buffers())),
            tables=tuple(
                (table, dict(table)) for module in model.modules() for table in (module._buffers, module._parameters)
            ),
            generators=tuple(generators.values()),
        )

    def changed(self, tensor: torch.Tensor, new: torch.Tensor) -> bool:
        """Whether ``new`` holds other values than ``tensor`` held when this was taken."""
        copy = next(copy for saved, copy in self.saved if saved is tensor)
        return copy.shape != new.shape or copy.dtype != new.dtype or _changed(new, copy)

    def put_back(self) -> None:
        """The tensors, their table entries and the generators as they were. An entry added
        since, or filled where it was ``None``, is left (state a first call sets: see
        :func:`_first_call_state`; :class:`ModuleSnapshot` removes it). Only the entries that
        changed are written: a TorchScript child's tables refuse writes (see
        :meth:`ModuleSnapshot.restore`)."""
        for table, entries in self.tables:
            now = dict(table.items())
            replaced = [
                (key, value) for key, value in entries.items() if value is not None and now.get(key) is not value
            ]
            if replaced:
                table.update(replaced)
        with torch.inference_mode():  # no autograd; and a buffer may be an inference tensor
            for tensor, copy in self.saved:
                if _changed(tensor, copy):
                    tensor.copy_(copy)
        for generator, state in self.generators:
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


# A registered entry as far as the program is concerned: None, a module, or a tensor's geometry.
_Entry = tuple[Any, ...] | None


def _registered(model: torch.nn.Module) -> dict[tuple[str, str, str], _Entry]:
    """Every registered parameter, buffer and sub-module by (module path, table, name): ``None``
    where the entry is ``None``, a tensor's dtype, shape and device, ``()`` for a module. What a
    first call may add or fill (``register_buffer`` in forward), and what assigning a buffer anew
    may change (``self.ema = new.double()``)."""

    def entry(value: Any) -> _Entry:
        if isinstance(value, torch.Tensor):
            return (value.dtype, tuple(value.shape), value.device)
        return None if value is None else ()

    return {
        (path, table, key): entry(value)
        for path, module in model.named_modules(remove_duplicate=False)
        for table in MODULE_TABLES
        for key, value in getattr(module, table).items()
    }


def _retyped(before: dict[tuple[str, str, str], _Entry], after: dict[tuple[str, str, str], _Entry]) -> str | None:
    """Why the program cannot hold a parameter or buffer a call assigned anew with another dtype,
    shape or device (``None`` where none was)."""
    for (path, table, key), was in sorted(before.items(), key=lambda item: item[0]):
        now = after.get((path, table, key))
        if not was or not now or was == now:
            continue
        shown = [f"{dtype} {shape} on {device}" for dtype, shape, device in (was, now)]
        return (
            f"the forward of {_module_named(path)} assigns its {table[1:-1]} {key!r} a tensor "
            f"of another dtype, shape or device than it had: {shown[0]} before a call, {shown[1]} after one. The "
            "program holds each buffer as captured and writes a new value into it (cast to its dtype, or failing "
            "on another shape), where eager's later calls read the new tensor (other numbers, or an error, from "
            "the second call on). Keep the buffer's dtype, shape and device (`self.ema = new.to(self.ema)`), or "
            "register it as forward makes it"
        )
    return None


def _filled(
    before: dict[tuple[str, str, str], _Entry], after: dict[tuple[str, str, str], _Entry]
) -> list[tuple[str, str, str]]:
    """The entries a call registered, or filled where they were ``None``."""
    return [key for key, entry in after.items() if entry is not None and before.get(key) is None]


def _remade(
    before: dict[tuple[str, str, str], _Entry], after: dict[tuple[str, str, str], _Entry]
) -> list[tuple[str, str, str]]:
    """The buffers a call registered anew with another dtype, shape or device (a cache made
    again for a longer sequence: x-transformers' ALiBi bias)."""
    return [
        key for key, entry in after.items() if key[1] == "_buffers" and entry and before.get(key) not in (None, entry)
    ]


_ABSENT = object()  # an entry a call added: absent before it


def _entries(model: torch.nn.Module) -> dict[tuple[str, str, str], Any]:
    """Every registration table's entries by (module path, table, name), the objects themselves."""
    return {
        (path, table, key): value
        for path, module in model.named_modules(remove_duplicate=False)
        for table in MODULE_TABLES
        for key, value in getattr(module, table).items()
    }


class _Refused(Exception):
    """A verdict reached within the eager calls, raised as a :class:`CaptureError` after them."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _call(model: torch.nn.Module, inputs: Inputs, devices: list[int]) -> Any:
    """One eager call on a copy of ``inputs``, drawing the random numbers the next call would;
    its outputs copied (one may be a buffer the next call writes, or one given back after it)."""
    with torch.random.fork_rng(devices=devices):
        outputs = model(*(call := inputs.clone()).args, **call.kwargs)
    return tree_map(lambda value: value.clone() if isinstance(value, torch.Tensor) else value, outputs)


def _other_inputs(inputs: Inputs) -> Inputs:
    """Inputs of the same structure, shapes and dtypes as ``inputs`` but other values: floating
    tensors scaled and shifted, other tensors reversed along their last dimension (indices stay
    in range)."""

    def other(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        if value.dtype.is_floating_point or value.is_complex():
            return value * 0.5 + 0.25
        return value.flip(-1) if value.dim() else value

    return Inputs(*tree_map(other, (tuple(inputs.args), dict(inputs.kwargs))))


def _same_outputs(first: Any, second: Any) -> bool:
    """Whether two eager answers agree: the same structure, tensors close (NaN where NaN)."""
    flat, spec = tree_flatten(first)
    other, other_spec = tree_flatten(second)
    if spec != other_spec:
        return False
    for a, b in zip(flat, other, strict=True):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype or a.layout != b.layout:
                return False
            floating = a.dtype.is_floating_point or a.is_complex()
            close = torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True) if floating else torch.equal(a, b)
            if not close:
                return False
        elif not _same(snapshot_value(a), snapshot_value(b)):
            return False
    return True


def _poisoned(value: Any) -> Any:
    """``value`` with every tensor in it replaced by a copy of other values (another object, so
    an identity check on it misses): NaN where floating, each flag negated where boolean, one
    more where an integer; ``None`` where ``value`` holds anything but tensors, ``None`` and
    tuples of them, or no tensor."""
    leaves = (value,) if not isinstance(value, tuple) else value
    if not all(leaf is None or isinstance(leaf, torch.Tensor) for leaf in leaves):
        return None
    if not any(isinstance(leaf, torch.Tensor) for leaf in leaves):
        return None
    poisoned = tuple(_other_values(leaf) if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves)
    return poisoned if isinstance(value, tuple) else poisoned[0]


def _other_values(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.is_floating_point() or tensor.is_complex():
        return torch.full_like(tensor, float("nan"))
    return tensor.logical_not() if tensor.dtype == torch.bool else tensor + 1


def _caches_a_transform(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a ``torch.distributions.Transform`` caching its last call
    (``cache_size=1``: pyro's flows), whose caches may hold what the call was given."""
    from torch.distributions import Transform

    return isinstance(module, Transform) and getattr(module, "_cache_size", 0) == 1


def _answers_alike(model: torch.nn.Module, inputs: Inputs, devices: list[int], expected: Any) -> bool:
    """Whether an eager call on ``inputs`` gives ``expected``; not where it fails (an index made
    out of range by :func:`_other_values`: the call read it)."""
    try:
        return _same_outputs(expected, _call(model, inputs, devices))
    except Exception:
        return False


def _last_call_caches(
    model: torch.nn.Module, inputs: Inputs, devices: list[int], changed: list[tuple[str, str]]
) -> set[tuple[str, str]]:
    """Of the attributes ``changed`` from call to call (each a tensor or a tuple of tensors and
    ``None``), those each call writes before it reads them: a call with one of them replaced by
    other values (NaN, negated flags; another object) gives the same answers as one after the
    last call, and leaves the attribute as that call does. Two kinds are no state then:

    - the caches of a module that is a ``torch.distributions.Transform`` caching its last call
      (``cache_size=1``: pyro's flows): ``_cached_x_y``, the last input and output, which
      ``Transform.__call__`` reads only where given the very tensor object it holds (a later
      call's tensors are other objects, on which the program computes what eager's cache misses
      compute); pyro's ``_cached_log_scale``, ``_cache_log_detJ``, recomputed where that check
      misses;
    - on any module, a tensor remade at every call from the shapes and the module's own tensors
      (nnAudio's ``STFT.inverse`` keeps its window's sum of squares and where it is nonzero,
      ``w_sum`` and ``nonzero_indices``, for the length it is given): a call on other inputs
      leaves it as the call on ``inputs`` does. It is the tensor counterpart of a length taken
      from a shape (Funnel's ``seq_len``, accepted as a plain value), told apart only because
      tensors are compared by identity; one that holds the data (``self.last = x``) is not.

    State read across calls changes the answers or the value written (a running mean, a tensor
    counter), and a counter that is no tensor is not a candidate: both are refused as before."""
    candidates = {}
    for path, attribute in changed:
        poisoned = _poisoned(getattr(model.get_submodule(path), attribute, None))
        if poisoned is not None:
            candidates[path, attribute] = poisoned
    if not candidates:
        return set()
    now = ModuleSnapshot.of(model)
    expected = _call(model, inputs, devices)
    written = {key: _call_value(model, key) for key in candidates}
    other = _other_inputs(inputs)
    caches = set()
    for (path, attribute), poisoned in candidates.items():  # one at a time: one read does not hide another
        now.restore()  # each call from the same state: other state the calls carry changes them alike
        module = model.get_submodule(path)
        setattr(module, attribute, poisoned)
        if not (_answers_alike(model, inputs, devices, expected)
                and _same_outputs(written[path, attribute], _call_value(model, (path, attribute)))):  # fmt: skip
            continue
        if not _caches_a_transform(module):
            now.restore()
            if not _answers_made(model, other, devices) or not _same_outputs(
                written[path, attribute], _call_value(model, (path, attribute))
            ):
                continue
        caches.add((path, attribute))
    now.restore()
    return caches


def _call_value(model: torch.nn.Module, key: tuple[str, str]) -> Any:
    """The attribute ``key`` (module path, name) as the last call left it, copied."""
    value = getattr(model.get_submodule(key[0]), key[1], None)
    return tree_map(lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf, value)


def _answers_made(model: torch.nn.Module, inputs: Inputs, devices: list[int]) -> bool:
    """Whether eager runs on ``inputs`` (the other inputs of :func:`_other_inputs`)."""
    try:
        _call(model, inputs, devices)
    except Exception:
        return False
    return True


def _first_call_state(
    model: torch.nn.Module, inputs: Inputs, devices: list[int], made: dict[tuple[str, str, str], Any]
) -> bool:
    """Whether the state ``model``'s first call sets (an attribute, a buffer registered or filled
    in forward) changes what its later calls give: a call after a first one, on other inputs,
    against a first call on those inputs, the registered tensors as the first call left them for
    both (the program carries its buffers from call to call as eager does: a buffer written at
    every call is not this, and a cache the first call writes into a buffer, with its length in
    an attribute, is read by the later call as the first call left it, not zeroed again while the
    attribute says it is filled). The buffers the first call registered (``made``: by entry,
    what it was before) are the exception: the first call on the other inputs makes its own,
    so a buffer the first call makes from its inputs (an initialisation from the data) shows,
    and one made from the shapes (x-transformers' ALiBi bias) does not. ``False`` where
    eager cannot make the calls (no verdict)."""
    other = _other_inputs(inputs)
    kept, tensors = ModuleSnapshot.of(model), _Tensors.of(model)
    try:
        _call(model, inputs, devices)
        written = _Tensors.of(model)  # the first call's attributes, new entries and writes
        later = _call(model, other, devices)
        kept.restore()
        written.put_back()  # the attributes as before the first call, the tensors as after it
        _unmake(model, made)  # the buffers the first call registered: as before it
        first = _call(model, other, devices)
        return not _same_outputs(later, first)
    except Exception:  # eager cannot run the other inputs (a length given as a tensor, say)
        return False  # or the answers cannot be compared (a sparse output): no verdict
    finally:
        tensors.put_back()
        kept.restore()


def _unmake(model: torch.nn.Module, made: dict[tuple[str, str, str], Any]) -> None:
    """The entries in ``made`` (by module path, table and name: what each was before the call
    that registered it, ``None``, a tensor or :data:`_ABSENT`) as before that call."""
    for (path, table, key), was in made.items():
        entries = getattr(model.get_submodule(path), table)
        if was is _ABSENT:
            entries.pop(key, None)
        else:
            entries[key] = was


def _unchanged(before: dict[tuple[str, str], Any], after: dict[tuple[str, str], Any]) -> bool:
    return before.keys() == after.keys() and all(_same(value, after[key]) for key, value in before.items())


def _first_call_reason(
    before: dict[tuple[str, str], Any],
    first: dict[tuple[str, str], Any],
    registered: dict[tuple[str, str, str], _Entry],
    first_registered: dict[tuple[str, str, str], _Entry],
) -> str:
    """Why a model whose first call sets state its later calls read is refused, naming what the
    first call set: attributes with their values before and after it, and registrations."""
    modules = {path for path, _ in before}  # a module the call made is named as a registration
    changed = sorted(
        key for key in first if key[0] in modules and (key not in before or not _same(before[key], first[key]))
    )
    named = [
        f"{_where(path)} attribute {key!r} ({_shown(before[(path, key)]) if (path, key) in before else 'absent'} "
        f"before, {_shown(first[(path, key)])} after)"
        for path, key in changed
    ]
    was = {key: "another" if entry else "None" for key, entry in registered.items()}
    named += [
        f"{_where(path)} {table[1:-1]} {key!r} ({was.get(key_, 'absent')} before)"
        for key_ in sorted({*_filled(registered, first_registered), *_remade(registered, first_registered)})
        for path, table, key in [key_]
    ]
    return (
        f"the model's first call sets state that its later calls read: {'; '.join(named)}. torch.export "
        "traces forward as a first call (a tensor forward registers made as a fake one), so the program would "
        "take the first call's path at every call where eager's later calls read what the first set (other "
        "numbers from the second call on, silently). Set the state in __init__ (a buffer registered there, "
        "written in place), or pass it in"
    )


def _module_named(path: str) -> str:
    return f"module {path!r}" if path else "the model"


def _where(path: str) -> str:
    return f"{_module_named(path)}'s"


@dataclass(frozen=True)
class EagerCall:
    """What the check's first eager call tells the program: its outputs' layouts
    (:func:`srbench.graph.eager_layout.eager_layouts`), which the program is to give its own, and
    the buffers (by qualified name) it assigned anew (``self.ema = self.ema * 0.9 + ...``: another
    tensor of the same dtype, shape and device in the module's table), which the program rebinds
    at every call as eager does rather than writing into them; ``changed``: those of them whose
    new values differ from the old (a cache recomputed alike at every call does not), which a
    program must not lose. ``subclassed``: an output of a tensor subclass the program could not
    give (:mod:`srbench.graph.output_types`), else ``None``."""

    layouts: OutputLayouts
    assigned: frozenset[str]
    changed: frozenset[str]
    subclassed: SubclassOutput | None = None


def _told(
    model: torch.nn.Module,
    layouts: OutputLayouts,
    subclassed: SubclassOutput | None,
    buffers: dict[str, torch.Tensor],
    tensors: _Tensors,
    made: dict[tuple[str, str, str], Any],
) -> EagerCall:
    """What the first call tells: its outputs' layouts and the first of a tensor subclass, and
    the buffers it assigned anew (by their tensors before it, ``buffers``), less those it made as
    a cache (``made``, kept)."""
    kept = {f"{path}.{key}" if path else key for path, _, key in made}
    assigned = {
        qualified: tensor
        for qualified, tensor in model.named_buffers(remove_duplicate=False)
        if buffers.get(qualified) is not None and tensor is not buffers[qualified] and qualified not in kept
    }
    changed = frozenset(name for name, new in assigned.items() if tensors.changed(buffers[name], new))
    return EagerCall(layouts, frozenset(assigned), changed, subclassed)


def refuse_carried_state(model: torch.nn.Module, inputs: Inputs, *, name: str) -> EagerCall | None:
    """Raise :class:`CaptureError` if ``model``'s eager calls on ``inputs`` carry state from call
    to call in a plain attribute, or if state its first call sets changes its later calls (see
    the module docstring), naming the module, the attribute and its values; leave ``model`` as it
    was either way, but for the buffers a call makes as a cache (kept, as eager's call keeps
    them). Else what the first call tells (:class:`EagerCall`; no eager call more for it);
    ``None`` where eager cannot run the model."""
    devices = inputs.cuda_device_indices()
    before, registered = _state(model), _registered(model)
    kept, tensors = ModuleSnapshot.of(model), None
    try:
        tensors = _Tensors.of(model)  # callers refuse uninitialized lazy parameters first
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            buffers, entries = dict(model.named_buffers(remove_duplicate=False)), _entries(model)
            outputs = model(*(call := inputs.clone()).args, **call.kwargs)
            passed = (*call.tensors(), *model.parameters(), *model.buffers())
            layouts, subclassed = eager_layouts(outputs, passed), subclass_output(outputs, passed)
            first, first_registered, after_first = _state(model), _registered(model), _entries(model)
            made = {
                key: entries.get(key, _ABSENT)
                for key in (*_filled(registered, first_registered), *_remade(registered, first_registered))
            }
            if not (all(table == "_buffers" for _, table, _ in made) and _unchanged(before, first)):
                made = {}  # a layer or parameter made, or an attribute set too: compared, not kept
            if _unchanged(before, first) and first_registered == registered:
                return _told(model, layouts, subclassed, buffers, tensors, made)
            retyped = _retyped({key: entry for key, entry in registered.items() if key not in made}, first_registered)
            if retyped is not None:
                raise _Refused(retyped)
            retyped = _retyped(registered, first_registered)  # a buffer made again: a cache if a second call keeps it
            try:
                model(*(call := inputs.clone()).args, **call.kwargs)
            except Exception:
                if retyped is not None:
                    raise _Refused(retyped) from None
                raise
            second = _state(model)
            changed = [
                key
                for key in first.keys() | second.keys()
                if key not in first or key not in second or not _same(first[key], second[key])
            ]
            caches = _last_call_caches(model, inputs, devices, changed)
            if any(_entries(model).get(key) is not after_first[key] for key in made):
                made = {}  # made again by a second call: state carried from call to call, not a cache
                if retyped is not None:
                    raise _Refused(retyped)
            checked = _told(model, layouts, subclassed, buffers, tensors, made)
    except _Refused as refused:
        raise CaptureError(name, refused.reason) from None
    except Exception:  # eager cannot run it: no calls to compare, nothing to refuse
        # An op with no eager kernel for the device (which srbench may still run with an out
        # variant registered for it, or report by name at prepare time) fails here first; the
        # check has no verdict then, and capture and the runtime say what they can do.
        return None
    finally:
        if tensors is not None:
            tensors.put_back()
        kept.restore()
    for key in changed:
        if key not in caches:
            path, attribute = key
            raise CaptureError(
                name,
                f"the forward of {_module_named(path)} carries state from call to call in its attribute {attribute!r}: "
                f"{_shown(first.get(key))} after one call, {_shown(second.get(key))} after a second on "
                "the same inputs; torch.export runs forward once and puts the attribute back, so the "
                "program would hold its capture-time value where eager's later calls see another (other "
                "numbers, silently, wherever it is read). Keep such state in a registered buffer written "
                "in place, or pass it in",
            )
    with torch.no_grad():
        unkept = _filled(registered, first_registered) and not made
        if unkept or _first_call_state(model, inputs, devices, made):
            raise CaptureError(name, _first_call_reason(before, first, registered, first_registered))
        if made:
            _keep_as_made(model, inputs, devices, made)
    return checked


def _keep_as_made(
    model: torch.nn.Module, inputs: Inputs, devices: list[int], made: dict[tuple[str, str, str], Any]
) -> None:
    """Leave ``model`` with the buffers its call on ``inputs`` registers (``made``), and nothing
    else of that call: a cache made at a first call (or made again at another shape), which
    :func:`_first_call_state` found later calls read as a first call would make it. Eager's call
    leaves them so too; torch.export, tracing forward as that call, would make them as fake
    tensors (the program gave wrong numbers), and with them registered it traces the path
    eager's later calls take."""
    tensors = _Tensors.of(model)
    try:
        _call(model, inputs, devices)
        now = {key: getattr(model.get_submodule(key[0]), key[1])[key[2]] for key in made}
    finally:
        tensors.put_back()  # the tensors and entries as they were (a buffer made again: the old one)
    for (path, table, key), value in now.items():
        getattr(model.get_submodule(path), table)[key] = value
