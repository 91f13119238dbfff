"""A module tree's Python state (plain attributes, registration tables) taken and given back.

``torch.export`` runs ``forward`` once, under fake tensors, and gives back the parameters and
buffers the model had, but not what ``forward`` added: an attribute set at a first call only
(``if not hasattr(self, "cache"): self.cache = x.clone()``, a buffer registered or a ``None``
buffer filled in ``forward``) stayed on the model as export's ``FakeTensor``, which every later
eager call of the model read ("Cannot access data pointer" or fake values). Capture and the
check for state carried in attributes (:mod:`srbench.graph.attribute_state`) give the model
back as it was with :class:`ModuleSnapshot`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

# nn.Module's registration tables: restored as tables (entries by identity), not as attributes.
MODULE_TABLES = ("_parameters", "_buffers", "_modules")


@dataclass(frozen=True)
class Copy:
    """A container's items as they were when snapshotted, and the container itself, whose items
    a call may change in place (``self.history.append(x)``)."""

    container: Any
    items: tuple[Any, ...]


def snapshot_value(value: Any) -> Any:
    """``value``, and a container's items as they are now (one :class:`Copy` per level)."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return Copy(value, tuple(snapshot_value(item) for item in value))
    if isinstance(value, dict):
        return Copy(value, tuple((key, snapshot_value(item)) for key, item in value.items()))
    return value


def _holds(mapping: Any, entries: list[tuple[Any, Any]]) -> bool:
    """Whether ``mapping`` holds exactly ``entries`` (the same keys in order, the same objects)."""
    now = list(mapping.items())
    return len(now) == len(entries) and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(now, entries))


def _given_back(value: Any) -> Any:
    """The object ``value`` snapshotted, its items (and theirs) put back as they were. A container
    holding the same objects as then is not written (a dict subclass may refuse ``clear``:
    transformers' ``ModelOutput``)."""
    if not isinstance(value, Copy):
        return value
    container = value.container
    if isinstance(container, dict):
        entries = [(key, _given_back(item)) for key, item in value.items]
        if not _holds(container, entries):
            container.clear()
            container.update(entries)
        return container
    items = [_given_back(item) for item in value.items]
    if isinstance(container, (list, set)) and (
        len(container) != len(items) or any(a is not b for a, b in zip(container, items))
    ):
        if isinstance(container, list):
            container[:] = items
        else:
            container.clear()
            container.update(items)
    return container


@dataclass(frozen=True)
class ModuleSnapshot:
    """Every module of a tree (by identity, as it is now) with its plain attributes and its
    registration tables' entries; :meth:`restore` makes them so again."""

    attributes: tuple[tuple[torch.nn.Module, dict[str, Any]], ...]
    tables: tuple[tuple[Any, list[tuple[str, Any]]], ...]

    @classmethod
    def of(cls, model: torch.nn.Module) -> ModuleSnapshot:
        modules = list(model.modules())
        return cls(
            attributes=tuple(
                (
                    module,
                    {key: snapshot_value(value) for key, value in vars(module).items() if key not in MODULE_TABLES},
                )
                for module in modules
            ),
            tables=tuple(
                (table, list(table.items()))
                for module in modules
                for table in (getattr(module, name) for name in MODULE_TABLES)
            ),
        )

    def restore(self) -> None:
        """Entries and attributes added since removed, the others the objects they were (and
        containers refilled, one level deep). A table holding what it held is not written: a
        TorchScript module's tables are views of its compiled object that refuse ``clear`` (a
        ``torch.jit.script`` or ``torch.jit.trace`` child), and nothing a trace runs can change
        them."""
        for table, entries in self.tables:
            if not _holds(table, entries):
                table.clear()
                table.update(entries)
        for module, attributes in self.attributes:
            for key in [key for key in vars(module) if key not in attributes and key not in MODULE_TABLES]:
                del module.__dict__[key]
            for key, value in attributes.items():
                module.__dict__[key] = _given_back(value)


@contextmanager
def module_kept(model: torch.nn.Module) -> Iterator[None]:
    """``model`` as it was after the body (see the module docstring)."""
    snapshot = ModuleSnapshot.of(model)
    try:
        yield
    finally:
        snapshot.restore()
