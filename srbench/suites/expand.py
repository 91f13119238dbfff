"""The sweep: the product of a suite's axes, less the combinations that make no sense.

Two kinds of combination are dropped. By rule, from the runtimes themselves: a static option a
runtime does not read (``honours``) collapses to its default for it, so eager is not repeated for
every planner, and a device the runtime cannot use (``devices``) is left out. By the suite's own
``exclude`` rules: a case that matches every key of a rule is dropped. ``tolerance_rules`` use
the same matching to set ``rtol``/``atol`` for some cases, and ``expected_failures`` to mark
cases whose difference from eager is known, with the reason (later rules win).

The option axes come from :mod:`srbench.options` (one axis per option); ``batch`` is the one
axis that is not a runtime option (it shapes the model's inputs).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srbench.options import RuntimeOptions, options_of
from srbench.suites.spec import CaseSpec
from srbench.zoo import ZooEntry

BATCH_AXIS = "batch"


def default_axes() -> dict[str, list[Any]]:
    """One value per axis, the defaults, for axes a suite leaves out."""
    axes: dict[str, list[Any]] = {option.info.axis: [option.default] for option in options_of()}
    axes[BATCH_AXIS] = [None]
    return axes


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
REASON_KEY = "reason"  # what an expected-failure rule says
SET_KEYS = (*TOLERANCE_KEYS, REASON_KEY)
OPTION_NAMES = frozenset(option.name for option in options_of())


def rule_value(case: CaseSpec, key: str) -> Any:
    """What rule key ``key`` compares: an option (``None`` where the runtime does not read it)
    or a field of the case (model, provider, family, runtime, batch)."""
    return case.option(key) if key in OPTION_NAMES else getattr(case, key)


def matches(rule: Mapping[str, Any], case: CaseSpec) -> bool:
    """Whether ``case`` matches every key of a rule (a value or a list of values); the tolerance
    keys of a tolerance rule and the reason of an expected failure are what the rule sets, not
    what it matches."""
    for key, wanted in rule.items():
        if key in SET_KEYS:
            continue
        values = wanted if isinstance(wanted, list) else [wanted]
        if rule_value(case, key) not in values:
            return False
    return True


def _option_values(axes: Mapping[str, Sequence[Any]], traits: RuntimeTraits) -> dict[str, list[Any]]:
    """Per option, the values the sweep gives a runtime with ``traits``."""
    values = {}
    for option in options_of():
        if option.is_static and option.name not in traits.honours:
            values[option.name] = [option.default]
        elif option.name == "device":
            values[option.name] = [device for device in axes[option.info.axis] if device in traits.devices]
        else:
            values[option.name] = list(axes[option.info.axis])
    return values


def expand(
    suite: str,
    models: Sequence[ZooEntry],
    runtimes: Mapping[str, RuntimeTraits],
    axes: Mapping[str, Sequence[Any]],
    *,
    exclude: Sequence[Mapping[str, Any]] = (),
    tolerance_rules: Sequence[Mapping[str, Any]] = (),
    expected_failures: Sequence[Mapping[str, Any]] = (),
    rtol: float | None = None,
    atol: float | None = None,
    repetitions: int = 20,
    slow: bool = False,
) -> tuple[CaseSpec, ...]:
    """Every case of the sweep, in a stable order (model, runtime, then the axes), no duplicates."""
    cases: dict[str, CaseSpec] = {}
    for entry, (runtime, traits) in itertools.product(models, runtimes.items()):
        model = entry.case
        options = _option_values(axes, traits)
        for combination, batch in itertools.product(itertools.product(*options.values()), axes[BATCH_AXIS]):
            case = CaseSpec(
                suite=suite,
                model=model.name,
                runtime=runtime,
                options=RuntimeOptions(**dict(zip(options, combination))),
                batch=batch,
                rtol=rtol,
                atol=atol,
                repetitions=repetitions,
                provider=model.provider,
                family=model.family,
                honours=tuple(option.name for option in options_of() if option.name in traits.honours),
                slow=slow or traits.slow,
                unavailable=entry.reason,
            )
            if any(matches(rule, case) for rule in exclude):
                continue
            for rule in tolerance_rules:
                if matches(rule, case):
                    case = dataclasses.replace(case, **{key: rule[key] for key in TOLERANCE_KEYS if key in rule})
            for rule in expected_failures:
                if matches(rule, case):
                    case = dataclasses.replace(case, expected_failure=rule[REASON_KEY])
            cases.setdefault(case.id, case)
    return tuple(cases.values())
