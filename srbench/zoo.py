"""The model zoo's interface: named model cases, provided by plugins.

A provider (entry-point group ``srbench.model_providers``) is an object with a ``name`` and a
``cases()`` method returning :class:`ModelCase` objects; it raises
:class:`ProviderUnavailable` with the reason when it cannot work here (for example torchvision
without a build matching torch), which disables that provider's cases and nothing else. A
provider may also have a ``catalog()`` method listing its cases *without* importing its library
(a case's ``build`` imports lazily), so that the cases of an unavailable provider are still
listed, with the reason; :class:`CatalogProvider` is that kind of provider. The providers
themselves live in the top-level ``models/`` folder (package ``srbench_models``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Protocol

import torch

from srbench.inputs import Inputs
from srbench.registry import PluginConflict, Registry, UnknownPluginError, unknown_name_message

PROVIDERS = Registry("srbench.model_providers", "model provider")
FAMILIES = ("vision", "language", "recommendation", "sequence", "mlp")


class ProviderUnavailable(RuntimeError):
    """A provider that cannot supply cases on this machine; the message says why."""


class ExampleInputsError(ValueError):
    """A case's example inputs that cannot be made as asked: a batch too large to allocate, or
    beyond what torch can index. The message names the model, the batch and torch's reason."""


class ModelUnavailable(ProviderUnavailable):
    """A known model whose provider cannot work here (a suite skips it with this reason)."""


@dataclass(frozen=True)
class ModelCase:
    """One model of the zoo: how to build it, feed it, and how close to eager it must stay.

    ``make_inputs(shape, batch)`` returns seeded example inputs, one call of the model: an
    :class:`~srbench.inputs.Inputs` (positional and keyword arguments, as transformers models take
    ``input_ids=..., attention_mask=...``) or a tuple of positional arguments; ``shape`` 0 is the
    default shape, 1 a second one (another batch size or sequence length) for dynamic-shape runs;
    ``batch`` overrides the batch size when given. ``published_parameters`` is the count the
    architecture's paper or library states, when there is one; tests check the built model has
    it, and ``srbench models`` shows it for cases that cannot be built here.
    """

    name: str
    provider: str
    family: str
    build: Callable[[], torch.nn.Module]
    make_inputs: Callable[[int, int | None], Inputs | tuple[torch.Tensor, ...]]
    batch_size: int = 1
    dtype: torch.dtype = torch.float32
    rtol: float = 1e-4
    atol: float = 1e-5
    description: str = ""
    published_parameters: int | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"model {self.name!r}: family {self.family!r} is not one of {', '.join(FAMILIES)}")

    def model(self) -> torch.nn.Module:
        """A fresh, seeded, eval-mode instance."""
        torch.manual_seed(0)
        return self.build().eval()

    def example_inputs(self, shape: int = 0, batch: int | None = None) -> Inputs:
        """One call of the model at example shape ``shape`` (0 or 1)."""
        if shape not in (0, 1):
            raise ValueError(f"model {self.name!r}: example input shape must be 0 or 1, got {shape!r}")
        try:
            made = self.make_inputs(shape, batch)
        except Exception as error:  # the provider's own code: `--batch 10000000000000` ended in a traceback
            at = f" at batch {batch:,}" if batch is not None else ""
            reason = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
            raise ExampleInputsError(
                f"model {self.name!r}: cannot make its example inputs{at}: {type(error).__name__}: {reason}"
            ) from error
        return Inputs.coerce(made)

    def parameter_count(self) -> int:
        """Number of distinct parameters (tied weights counted once), as torchvision counts them."""
        return _parameter_count(self)


@cache
def _parameter_count(case: ModelCase) -> int:
    # Built on the meta device: no memory is allocated and no initialiser does any work, so
    # counting a large model costs little more than constructing its Python objects.
    with torch.device("meta"):
        module = case.build()
    return sum(parameter.numel() for parameter in module.parameters())


class Provider(Protocol):
    name: str

    def cases(self) -> list[ModelCase]: ...


@dataclass(frozen=True)
class CatalogProvider:
    """A provider whose cases are known up front and whose library is only needed to build them.

    ``requires`` names the modules that must import for the cases to work; ``cases()`` imports
    them and raises :class:`ProviderUnavailable` with the import error when one fails (any
    exception counts: a torchvision built for another torch fails with RuntimeError or OSError,
    not only ImportError).
    """

    name: str
    entries: tuple[ModelCase, ...]
    requires: tuple[str, ...] = ()

    def catalog(self) -> list[ModelCase]:
        return list(self.entries)

    def check(self) -> None:
        for module in self.requires:
            try:
                importlib.import_module(module)
            except Exception as error:
                raise ProviderUnavailable(f"cannot import {module}: {_reason(error)}") from error

    def cases(self) -> list[ModelCase]:
        self.check()
        return self.catalog()


@dataclass(frozen=True)
class ZooEntry:
    """One line of the zoo's listing: a case and, when it cannot be used here, why."""

    case: ModelCase
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class Zoo:
    """Every case that is available here, and why each unavailable provider is not."""

    cases: dict[str, ModelCase]
    unavailable: dict[str, str]  # provider name -> reason
    unavailable_cases: dict[str, ModelCase] = field(default_factory=dict)  # listed by an unavailable provider

    def get(self, name: str) -> ModelCase:
        if name in self.cases:
            return self.cases[name]
        if name in self.unavailable_cases:
            provider = self.unavailable_cases[name].provider
            raise ModelUnavailable(
                f"model {name!r} is provided by {provider!r}, which is unavailable here: {self.unavailable[provider]}"
            )
        raise UnknownPluginError(unknown_name_message("model", name, [*self.cases, *self.unavailable_cases]))

    def select(self, providers: list[str] | None = None, families: list[str] | None = None) -> list[ModelCase]:
        return [
            case
            for case in self.cases.values()
            if (providers is None or case.provider in providers) and (families is None or case.family in families)
        ]

    def entries(self) -> list[ZooEntry]:
        """Every known case, available or not, ordered by provider then name."""
        listed = [ZooEntry(case) for case in self.cases.values()]
        listed += [ZooEntry(case, self.unavailable[case.provider]) for case in self.unavailable_cases.values()]
        return sorted(listed, key=lambda entry: (entry.case.provider, entry.case.name))


def _reason(error: Exception) -> str:
    """ProviderUnavailable already says why; anything else is named by its type."""
    return str(error) if isinstance(error, ProviderUnavailable) else f"{type(error).__name__}: {error}"


def _catalog(provider: object) -> list[ModelCase]:
    catalog = getattr(provider, "catalog", None)
    return list(catalog()) if callable(catalog) else []


def build_zoo(providers: Sequence[tuple[str, Callable[[], Provider]]]) -> Zoo:
    """A zoo from ``(name, load)`` pairs; a provider that fails to load or to work is reported, not fatal.

    Any exception counts as failing (a library built for another torch raises RuntimeError or
    OSError on import, not only ImportError): the provider's cases are listed as unavailable
    with the reason, and ``srbench models`` shows it, so a genuine bug is visible, not hidden.
    Two cases of one name are :class:`~srbench.registry.PluginConflict`: no provider can be
    chosen over the other by its load order.
    """
    cases: dict[str, ModelCase] = {}
    unavailable: dict[str, str] = {}
    unavailable_cases: dict[str, ModelCase] = {}

    def add(into: dict[str, ModelCase], case: ModelCase, name: str) -> None:
        for known in (cases, unavailable_cases):
            if case.name in known:
                raise PluginConflict(
                    f"model name {case.name!r} is provided by both {known[case.name].provider!r} and {name!r}; "
                    "expected each model name once in the zoo (rename the model in one provider)"
                )
        into[case.name] = case

    for name, load in providers:
        try:
            provider = load()
        except Exception as error:
            unavailable[name] = _reason(error)
            continue
        try:
            provided = provider.cases()
        except Exception as error:
            unavailable[name] = _reason(error)
            for case in _catalog(provider):
                add(unavailable_cases, case, name)
            continue
        for case in provided:
            add(cases, case, name)
    return Zoo(cases=cases, unavailable=unavailable, unavailable_cases=unavailable_cases)


@cache
def load_zoo() -> Zoo:
    """Load every installed provider once; a provider that fails is reported, not fatal."""
    return build_zoo([(name, partial(PROVIDERS.load, name)) for name in PROVIDERS.names()])
