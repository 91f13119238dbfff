"""torch's process-wide settings, kept from one model of the outside sweep to the next.

Libraries change torch's global state when they are imported: zuko (1.6.0) sets
``torch.distributions.Distribution._validate_args = False``, pyro sets it to ``__debug__``, and
torch's own ``TorchPatcher`` turns it off on a first ``torch.compile``. In one process of the sweep
such a change made by one model's library held for every model after it, so a model's result
depended on the models before it: ``hf_time_series_loss`` and ``hf_informer_prob`` captured only
after zuko's models had run (their Student-t heads' value checks are what stops export).

Here each model starts from the settings the sweep started with, and runs under what importing its
own libraries changes (as it would in a process of its own): what a build's first import of a
package changed is remembered for that package and set again for every later model of it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One of torch's process-wide settings: how to read it and how to set it again."""

    name: str
    read: Callable[[], Any]
    write: Callable[[Any], object]


def _settings() -> tuple[Setting, ...]:
    """The settings a library may change at import and a model's results or capture depend on."""
    import torch

    def deterministic(value: tuple[bool, bool]) -> None:
        torch.use_deterministic_algorithms(value[0], warn_only=value[1])

    def device(value: Any) -> None:  # the CPU is the default: no device context is then pushed
        torch.set_default_device(None if value == torch.device("cpu") else value)

    distribution = torch.distributions.Distribution
    return (
        Setting("distributions' validate_args", lambda: distribution._validate_args,
                distribution.set_default_validate_args),
        Setting("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        Setting("default device", torch.get_default_device, device),
        Setting("grad mode", torch.is_grad_enabled, torch.set_grad_enabled),
        Setting("deterministic algorithms", lambda: (torch.are_deterministic_algorithms_enabled(),
                                                     torch.is_deterministic_algorithms_warn_only_enabled()),
                deterministic),
        Setting("anomaly mode", lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                lambda value: torch.set_anomaly_enabled(*value)),
        Setting("float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        Setting("intra-op threads", torch.get_num_threads, torch.set_num_threads),
    )  # fmt: skip


def _packages() -> set[str]:
    """The top-level packages imported so far."""
    return {name.partition(".")[0] for name in list(sys.modules)}


class TorchGlobals:
    """The settings the sweep started with, and what importing each package changed of them."""

    def __init__(self) -> None:
        self.settings = _settings()
        self.baseline = self.read()
        self.by_package: dict[str, dict[str, Any]] = {}

    def read(self) -> dict[str, Any]:
        """Every setting's value now."""
        return {setting.name: setting.read() for setting in self.settings}

    def write(self, values: dict[str, Any]) -> None:
        """Set the settings named in ``values`` that hold another value now (only those: setting
        the default device, even to the CPU, pushes a device context)."""
        for setting in self.settings:
            if setting.name in values and setting.read() != values[setting.name]:
                setting.write(values[setting.name])

    @contextmanager
    def per_model(self) -> Iterator[None]:
        """Run one model's checks from the sweep's starting settings, and leave them so after."""
        self.write(self.baseline)
        try:
            yield
        finally:
            self.write(self.baseline)

    def build(self, build: Callable[[], Any]) -> Any:
        """``build()``, then the settings as importing the model's packages leaves them. A build
        that imports a package for the first time shows what that import changed, which is kept
        for the package; a later build of a model from the same package imports nothing, so what
        was kept is set again. A model's packages are those of its modules' classes and those its
        build imported."""
        before = _packages()
        model = build()
        imported = _packages() - before
        changed = {name: value for name, value in self.read().items() if value != self.baseline[name]}
        for package in imported if changed else ():
            self.by_package.setdefault(package, {}).update(changed)
        modules = model.modules() if hasattr(model, "modules") else ()
        for package in imported | {type(module).__module__.partition(".")[0] for module in modules}:
            self.write(self.by_package.get(package, {}))
        return model


_SWEEP: list[TorchGlobals] = []  # the sweep's one instance, made when the sweep first asks for it


def sweep_globals() -> TorchGlobals:
    """The process's :class:`TorchGlobals`, its baseline the settings at this first call."""
    if not _SWEEP:
        _SWEEP.append(TorchGlobals())
    return _SWEEP[0]
