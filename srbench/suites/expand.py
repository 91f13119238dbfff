"""The sweep: the product of a suite's axes, less the combinations that make no sense.

Two kinds of combination are dropped. By rule, from the runtimes themselves: an axis a runtime
does not read (``honours``) collapses to one value for it, so eager is not repeated for every
planner, and a device the runtime cannot use (``devices``) is left out. By the suite's own
``exclude`` rules: a case that matches every key of a rule is dropped. ``tolerance_rules`` use
the same matching to set ``rtol``/``atol`` for some cases (later rules win).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from srbench.runtimes import MEMORY_OPTIONS, RuntimeOptions
from srbench.suites.spec import CaseSpec
from srbench.zoo import ZooEntry

# Suite axis name -> CaseSpec field it sets.
AXIS_FIELDS = {
    "planners": "planner",
    "threads": "threads",
    "cleanup_activations": "cleanup_activations",
    "enable_out_variant": "enable_out_variant",
    "manage_output_tensors": "manage_output_tensors",
    "devices": "device",
    "batch": "batch",
}


def default_axes() -> dict[str, list[Any]]:
    """One value per axis, the runtime defaults, for axes a suite leaves out."""
    defaults = {f.name: f.default for f in fields(RuntimeOptions)}
    return {axis: [defaults.get(name)] for axis, name in AXIS_FIELDS.items()}


@dataclass(frozen=True)
class RuntimeTraits:
    """What the sweep needs to know of a runtime plugin (read from its class attributes)."""

    honours: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    slow: bool = False

    @classmethod
    def of(cls, runtime_class: type) -> RuntimeTraits:
        return cls(
            honours=tuple(getattr(runtime_class, "honours", ())),
            devices=tuple(getattr(runtime_class, "devices", ("cpu",))),
            slow=bool(getattr(runtime_class, "slow", False)),
        )


TOLERANCE_KEYS = ("rtol", "atol")


def matches(rule: Mapping[str, Any], case: CaseSpec) -> bool:
    """Whether ``case`` matches every key of a rule (a value or a list of values); the tolerance
    keys of a tolerance rule are what it sets, not what it matches."""
    for key, wanted in rule.items():
        if key in TOLERANCE_KEYS:
            continue
        values = wanted if isinstance(wanted, list) else [wanted]
        if getattr(case, key) not in values:
            return False
    return True


def expand(
    suite: str,
    models: Sequence[ZooEntry],
    runtimes: Mapping[str, RuntimeTraits],
    axes: Mapping[str, Sequence[Any]],
    *,
    exclude: Sequence[Mapping[str, Any]] = (),
    tolerance_rules: Sequence[Mapping[str, Any]] = (),
    rtol: float | None = None,
    atol: float | None = None,
    repetitions: int = 20,
    slow: bool = False,
) -> tuple[CaseSpec, ...]:
    """Every case of the sweep, in a stable order (model, runtime, then the axes), no duplicates."""
    defaults = {f.name: f.default for f in fields(RuntimeOptions)}
    cases: dict[str, CaseSpec] = {}
    for entry, (runtime, traits) in itertools.product(models, runtimes.items()):
        model = entry.case
        values = {}
        for axis, field_name in AXIS_FIELDS.items():
            if field_name in MEMORY_OPTIONS and field_name not in traits.honours:
                values[field_name] = [None if field_name == "planner" else defaults[field_name]]
            elif field_name == "device":
                values[field_name] = [device for device in axes[axis] if device in traits.devices]
            else:
                values[field_name] = list(axes[axis])
        for combination in itertools.product(*values.values()):
            case = CaseSpec(
                suite=suite,
                model=model.name,
                runtime=runtime,
                rtol=rtol,
                atol=atol,
                repetitions=repetitions,
                provider=model.provider,
                family=model.family,
                honours=tuple(name for name in MEMORY_OPTIONS if name in traits.honours),
                slow=slow or traits.slow,
                unavailable=entry.reason,
                **dict(zip(values, combination)),
            )
            if any(matches(rule, case) for rule in exclude):
                continue
            for rule in tolerance_rules:
                if matches(rule, case):
                    case = dataclasses.replace(case, **{key: rule[key] for key in TOLERANCE_KEYS if key in rule})
            cases.setdefault(case.id, case)
    return tuple(cases.values())
