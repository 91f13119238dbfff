"""Why a model that changes the Python containers it is called with cannot be captured, said precisely.

A model may change the list, dict or registered container the caller passes in, not by writing a
tensor in place (a captured graph keeps that) but in Python: ``trace.append(h)``, ``xs.pop()``,
``state["hidden"] = h`` (a new tensor put in the entry's place). ``torch.export`` flattens the
call to its tensors and scalars and runs ``forward`` on containers it builds again from them, so
these changes happen to its copies, and the program it gives holds none of them: a runtime
running that program leaves the caller's list as it was where eager appends to it. srbench ran
such models and answered every output right, the caller's containers silently unchanged
(round 23's ``list_argument_appended`` and ``dict_argument_replaced``). Capture watches the call
``forward`` gets (a forward pre-hook on the model) and refuses a model that changed it, naming
the argument and what changed. It also notes a tensor argument ``forward`` resizes (an ``out=``
of another size resized by the op, ``x.unsqueeze_(0)``): export fails on some of those inside its
guards, saying only "IndexError: list index out of range", and capture then names the argument
and its sizes instead (one that export captures, ``x.squeeze_()``, srbench runs as eager does).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import flatten_with_paths


@dataclass(frozen=True)
class _Call:
    """One call the model got while export traced it: the arguments as objects (whose containers
    the model may change) and each leaf by its key path as it was when the call began."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    leaves: dict[pytree.KeyPath, Any]
    sizes: dict[pytree.KeyPath, tuple[int, ...]]  # each tensor leaf's size as the call began


def _size(tensor: torch.Tensor) -> tuple[int, ...] | None:
    """``tensor``'s size where every dim is a plain int (a symbolic one is not compared: that
    would put a guard on export's shape environment)."""
    size = tuple(tensor.shape)
    return size if all(type(dim) is int for dim in size) else None


def _sizes(leaves: dict[pytree.KeyPath, Any]) -> dict[pytree.KeyPath, tuple[int, ...]]:
    sizes = {path: _size(leaf) for path, leaf in leaves.items() if isinstance(leaf, torch.Tensor)}
    return {path: size for path, size in sizes.items() if size is not None}


def _leaves(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[pytree.KeyPath, Any]:
    flat, _ = flatten_with_paths((args, kwargs))
    return dict(flat)


def _same(before: Any, after: Any) -> bool:
    """A leaf left in place: the same tensor object (a tensor written in place is the graph's
    business), or an equal value of the same type for anything else."""
    if isinstance(before, torch.Tensor) or isinstance(after, torch.Tensor):
        return before is after
    if type(before) is not type(after):
        return False
    try:
        return bool(before == after) or before is after
    except Exception:  # a value whose comparison is not a bool: compare by identity
        return before is after


@dataclass
class ArgumentChanges:
    """What ``forward`` changed in the calls watched: one description per call whose containers
    it changed, and each tensor argument it resized (``out from [0] to [2, 4]``)."""

    containers: list[str] = field(default_factory=list)
    resized: list[str] = field(default_factory=list)


@contextmanager
def argument_changes(model: torch.nn.Module) -> Iterator[ArgumentChanges]:
    """Watch the calls ``model`` gets inside the block; what it yields is filled in once the block
    ends, also where it raised (an export that failed on a resized argument)."""
    calls: list[_Call] = []

    def record(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        leaves = _leaves(args, kwargs)
        calls.append(_Call(args, kwargs, leaves, _sizes(leaves)))

    changes = ArgumentChanges()
    handle = model.register_forward_pre_hook(record, prepend=True, with_kwargs=True)
    try:
        yield changes
    finally:
        handle.remove()
        for call in calls:
            try:
                after = _leaves(call.args, call.kwargs)
            except Exception:  # a container left in a state its flattening refuses: it changed
                changes.containers.append("its arguments changed")
                continue
            change = _change(model, call, after)
            if change is not None:
                changes.containers.append(change)
            changes.resized.extend(_resized(model, call, after))


def _resized(model: torch.nn.Module, call: _Call, after: dict[pytree.KeyPath, Any]) -> list[str]:
    """The tensor arguments of ``call`` whose size ``forward`` changed (``after``: its leaves now),
    with both sizes."""
    return [f"{_named(model, path)} from {list(size)} to {list(after[path].shape)}"
            for path, size in call.sizes.items()
            if after.get(path) is call.leaves[path] and _size(after[path]) not in (size, None)]  # fmt: skip


def _change(model: torch.nn.Module, call: _Call, after: dict[pytree.KeyPath, Any]) -> str | None:
    """What ``forward`` changed in ``call``'s containers (``after``: its leaves now; items added,
    removed or put in another's place, by path), or ``None``."""
    added = [path for path in after if path not in call.leaves]
    removed = [path for path in call.leaves if path not in after]
    replaced = [path for path in after if path in call.leaves and not _same(call.leaves[path], after[path])]
    parts = [f"{what} {_list(paths, model)}" for what, paths in
             (("added", added), ("removed", removed), ("replaced by new values", replaced)) if paths]  # fmt: skip
    return "; ".join(parts) if parts else None


def _list(paths: list[pytree.KeyPath], model: torch.nn.Module) -> str:
    shown = ", ".join(_named(model, path) for path in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _named(model: torch.nn.Module, path: pytree.KeyPath) -> str:
    """``path`` (into ``(args, kwargs)``) written with ``forward``'s parameter names:
    ``trace[2]``, ``state['hidden']``."""
    if len(path) < 2:
        return "its arguments"
    where, key, rest = path[0], path[1], pytree.keystr(tuple(path[2:]))
    if isinstance(where, pytree.SequenceKey) and where.idx == 1 and isinstance(key, pytree.MappingKey):
        return f"{key.key}{rest}"
    position = key.idx if isinstance(key, pytree.SequenceKey) else -1
    try:
        names = [p.name for p in inspect.signature(model.forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
    except (TypeError, ValueError):  # no signature to read
        names = []
    if 0 <= position < len(names):
        return f"{names[position]}{rest}"
    return f"positional argument {position}{rest}"


def resized_argument_reason(resized: list[str]) -> str:
    """Why a model is refused whose ``forward`` resized tensor arguments (``resized``) where export
    failed on it."""
    return (
        f"forward resized {', '.join(resized)} (an out= argument of another size resized by the op, or "
        "a view op written in place such as unsqueeze_): torch.export fails on that argument (its "
        "guards raise IndexError). Pass a tensor of the result's size, or return the result (a view "
        "such as x.unsqueeze(0)) instead of changing the argument"
    )


def changed_arguments_reason(changes: list[str]) -> str:
    """Why a model whose ``forward`` changed its arguments' containers (``changes``) is refused."""
    return (
        f"forward changes the Python containers it is called with ({changes[0]}): torch.export runs "
        "forward on containers it builds again from the call's tensors, so the program holds none of "
        "these changes, and a captured program would leave the caller's list or dict as it was where "
        "eager changes it. Return the new values instead, or write into tensors the caller passes "
        "(in place: the program keeps that)"
    )
