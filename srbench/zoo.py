"""The model zoo's interface: named model cases, provided by plugins.

A provider (entry-point group ``srbench.model_providers``) is an object with a ``name`` and a
``cases()`` method returning :class:`ModelCase` objects; it raises
:class:`ProviderUnavailable` with the reason when it cannot work here (for example torchvision
without a build matching torch), which disables that provider's cases and nothing else. The
providers themselves live in the top-level ``models/`` folder (package ``srbench_models``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Protocol

import torch

from srbench.registry import Registry, UnknownPluginError, unknown_name_message

PROVIDERS = Registry("srbench.model_providers", "model provider")
FAMILIES = ("vision", "language", "recommendation", "sequence", "mlp")


class ProviderUnavailable(RuntimeError):
    """A provider that cannot supply cases on this machine; the message says why."""


@dataclass(frozen=True)
class ModelCase:
    """One model of the zoo: how to build it, feed it, and how close to eager it must stay.

    ``make_inputs(shape, batch)`` returns seeded example inputs: ``shape`` 0 is the default
    shape, 1 a second one (another batch size or sequence length) for dynamic-shape runs;
    ``batch`` overrides the batch size when given.
    """

    name: str
    provider: str
    family: str
    build: Callable[[], torch.nn.Module]
    make_inputs: Callable[[int, int | None], tuple[torch.Tensor, ...]]
    batch_size: int = 1
    dtype: torch.dtype = torch.float32
    rtol: float = 1e-4
    atol: float = 1e-5
    description: str = ""

    def model(self) -> torch.nn.Module:
        """A fresh, seeded, eval-mode instance."""
        torch.manual_seed(0)
        return self.build().eval()

    def example_inputs(self, shape: int = 0, batch: int | None = None) -> tuple[torch.Tensor, ...]:
        return self.make_inputs(shape, batch)


class Provider(Protocol):
    name: str

    def cases(self) -> list[ModelCase]: ...


@dataclass(frozen=True)
class Zoo:
    """Every case that is available here, and why each unavailable provider is not."""

    cases: dict[str, ModelCase]
    unavailable: dict[str, str]  # provider name -> reason

    def get(self, name: str) -> ModelCase:
        if name not in self.cases:
            raise UnknownPluginError(unknown_name_message("model", name, list(self.cases)))
        return self.cases[name]

    def select(self, providers: list[str] | None = None, families: list[str] | None = None) -> list[ModelCase]:
        return [
            case
            for case in self.cases.values()
            if (providers is None or case.provider in providers) and (families is None or case.family in families)
        ]


@cache
def load_zoo() -> Zoo:
    """Load every provider once; a provider that fails is reported, not fatal."""
    cases: dict[str, ModelCase] = {}
    unavailable: dict[str, str] = {}
    for name in PROVIDERS.names():
        try:
            provider = PROVIDERS.load(name)
            provided = provider.cases()
        except ProviderUnavailable as error:
            unavailable[name] = str(error)
            continue
        except ImportError as error:
            unavailable[name] = f"{type(error).__name__}: {error}"
            continue
        for case in provided:
            if case.name in cases:
                raise ValueError(f"model name {case.name!r} is provided by both {cases[case.name].provider!r} and {name!r}")
            cases[case.name] = case
    return Zoo(cases=cases, unavailable=unavailable)
