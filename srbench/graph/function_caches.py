"""The model's libraries' ``functools`` caches forgotten where a capture filled them.

Libraries memoise tensors they build from sizes with ``functools.lru_cache`` (a decay mask per
sequence length, a table of positions per head count). ``torch.export`` runs ``forward`` once under
fake tensors, so a cache that missed during the capture keeps export's ``FakeTensor`` for that key,
and every later eager call of the model with that key computes with it: fake outputs, or "Cannot
access data pointer". The seventeenth round of the outside-models sweep met it: yet-another-retnet
caches its decay masks and gammas, and after srbench prepared RetNet at a second length, eager's
next call answered a ``FakeTensor`` (the sweep itself stopped on it). :func:`function_caches_kept`
clears, after a capture, each cache that missed during it, in the modules of the packages the
model's classes come from (where such caches live): what it held is recomputed at the next call,
as after any ``cache_clear``; and entries holding a ``FakeTensor`` in those modules' and their classes'
dicts (a ``_TABLES = {}`` filled by size, the same cache written by hand) are taken out, as a miss would have
left them. :mod:`srbench.graph.module_snapshot` does the same for state the capture left on the
model's own modules.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

Cache = Any  # functools._lru_cache_wrapper: its C type has no public name to annotate with


def _packages(model: torch.nn.Module) -> set[str]:
    """The top-level packages of the model's modules' classes (their bases included: a library
    class subclassed in the user's script), torch's own left out: its caches are export's to
    manage, and walking its 1,500 modules would cost about 0.1 s a capture."""
    packages = {cls.__module__.partition(".")[0] for module in model.modules() for cls in type(module).__mro__}
    return packages - {"builtins", "torch"}


def _caches_in(namespace: dict[str, Any]) -> Iterator[Cache]:
    for value in list(namespace.values()):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, functools._lru_cache_wrapper):
            yield value


def _namespaces(packages: set[str]) -> Iterator[dict[str, Any]]:
    """The globals of every module of ``packages`` already imported, and the attributes of each
    class defined there (where a cached static method or a class-level table lives)."""
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] not in packages or module is None:
            continue
        namespace = getattr(module, "__dict__", {})
        yield namespace
        for value in list(namespace.values()):
            if isinstance(value, type) and value.__module__ == name:
                yield dict(vars(value))


def package_caches(packages: set[str]) -> list[Cache]:
    """Every ``functools.lru_cache`` / ``functools.cache`` wrapper held by a module of
    ``packages`` already imported, or by a class defined there."""
    return list({id(cache): cache for namespace in _namespaces(packages) for cache in _caches_in(namespace)}.values())


def _holds_fake(value: Any) -> bool:
    """A ``FakeTensor``, or a tuple or list holding one (a cached ``(cos, sin)`` pair)."""
    if isinstance(value, (tuple, list)):
        return any(isinstance(item, FakeTensor) for item in value)
    return isinstance(value, FakeTensor)


def drop_fake_entries(packages: set[str]) -> None:
    """Take out of the dicts that modules of ``packages`` and their classes hold every entry
    whose value holds a ``FakeTensor``."""
    for namespace in _namespaces(packages):
        for value in list(namespace.values()):
            if type(value) is dict:
                for key in [key for key, item in value.items() if _holds_fake(item)]:
                    del value[key]


@contextmanager
def function_caches_kept(model: torch.nn.Module) -> Iterator[None]:
    """Run the block (a capture of ``model``); afterwards, however it ends, clear each cache of
    the model's packages that missed during it (it may hold a ``FakeTensor`` now), and take the
    ``FakeTensor`` entries out of their module-level dicts."""
    packages = _packages(model)
    caches = package_caches(packages)
    misses = [cache.cache_info().misses for cache in caches]
    try:
        yield
    finally:
        for cache, before in zip(caches, misses):
            if cache.cache_info().misses != before:
                cache.cache_clear()
        drop_fake_entries(packages)
