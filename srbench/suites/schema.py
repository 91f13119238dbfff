"""The JSON Schema of a suite file, and validation that turns schema violations into
:class:`SuiteError` messages a person can act on (key path, what was expected, nearest key)."""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence
from typing import Any

import jsonschema

from srbench.options import FINITE, options_of
from srbench.registry import nearest
from srbench.suites.spec import SuiteError

_NAME_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "uniqueItems": True}


def _axis(item: dict[str, Any]) -> dict[str, Any]:
    """A sweep axis: a non-empty list of distinct values."""
    return {"type": "array", "items": item, "minItems": 1, "uniqueItems": True}


def _one_or_many(item: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [item, {"type": "array", "items": item, "minItems": 1}]}


_BATCH = {"type": ["integer", "null"], "minimum": 1}
# What exclude, tolerance and expected-failure rules may match: a case's model, runtime and options, by name.
_RULE_VALUES: dict[str, dict[str, Any]] = {
    "model": {"type": "string"},
    "provider": {"type": "string"},
    "family": {"type": "string"},
    "runtime": {"type": "string"},
    **{option.name: dict(option.info.schema) for option in options_of()},
    "batch": _BATCH,
}

_RULE_PROPERTIES = {key: _one_or_many(value) for key, value in _RULE_VALUES.items()}
# A tolerance of infinity (or NaN, which no comparison fails) would switch the equivalence check off.
_TOLERANCE_VALUE = {"type": "number", "minimum": 0, "format": FINITE}
_TOLERANCE = {"rtol": _TOLERANCE_VALUE, "atol": _TOLERANCE_VALUE}

SUITE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "srbench suite",
    "type": "object",
    "additionalProperties": False,
    "required": ["axes"],
    "properties": {
        "description": {"type": "string"},
        "axes": {
            "type": "object",
            "additionalProperties": False,
            "required": ["models", "runtimes"],
            "properties": {
                "models": {
                    "type": "object",
                    "additionalProperties": False,
                    "minProperties": 1,
                    "properties": {
                        "all": {"type": "boolean"},
                        "names": _NAME_LIST,
                        "providers": _NAME_LIST,
                        "families": _NAME_LIST,
                        "exclude": _NAME_LIST,
                    },
                },
                "runtimes": _NAME_LIST,
                **{option.info.axis: _axis(dict(option.info.schema)) for option in options_of()},
                "batch": _axis(_BATCH),
            },
        },
        "tolerance": {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": _TOLERANCE},
        "repetitions": {"type": "integer", "minimum": 1},
        "slow": {"type": "boolean"},
        "exclude": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "minProperties": 1,
                "properties": _RULE_PROPERTIES,
            },
        },
        "tolerance_rules": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "anyOf": [{"required": ["rtol"]}, {"required": ["atol"]}],
                "properties": {**_RULE_PROPERTIES, **_TOLERANCE},
            },
        },
        "expected_failures": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["reason"],
                "minProperties": 2,
                "properties": {**_RULE_PROPERTIES, "reason": {"type": "string", "minLength": 1}},
            },
        },
    },
}

_FORMATS = jsonschema.FormatChecker(formats=())


@_FORMATS.checks(FINITE)
def _is_finite(value: object) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


def _is_whole_number(checker: object, instance: object) -> bool:
    """JSON Schema's ``integer`` takes any number without a fraction, 2.0 included; YAML reads
    ``threads: [2.0]`` as a float, which passed as 2 threads and reached the runtimes as a float
    (``torch.set_num_threads(2.0)`` fails at every case, and the case id read ``t2.0``)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


_TYPES = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_whole_number)
_SuiteValidator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=_TYPES)
_VALIDATOR = _SuiteValidator(SUITE_SCHEMA, format_checker=_FORMATS)


def key_path(parts: Sequence[str | int]) -> str:
    """``("axes", "planners", 2)`` -> ``"axes.planners[2]"``."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _expected(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(map(repr, schema["enum"]))
    kind = schema["type"]
    return " or ".join(kind) if isinstance(kind, list) else kind


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        hints = []
        for key in unknown:
            close = nearest(str(key), allowed)
            hints.append(f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        return f"{'; '.join(hints)}; expected only these keys: {', '.join(allowed)}"
    if error.validator == "required":
        return f"{error.message}; expected keys: {', '.join(error.validator_value)}"
    if error.validator in ("type", "enum"):
        return f"expected {_expected(error.schema)}, got {type(error.instance).__name__} {error.instance!r}"
    if error.validator == "anyOf" and all("required" in option for option in error.validator_value):
        wanted = [option["required"][0] for option in error.validator_value]
        return f"expected at least one of the keys {', '.join(wanted)}"
    if error.validator == "anyOf":
        return f"expected {_expected(error.validator_value[0])} or a list of them, got {error.instance!r}"
    if error.validator == "format" and error.validator_value == FINITE:
        return f"expected a finite number, got {error.instance!r} (it would switch a tolerance's check off)"
    if error.validator == "minProperties":
        required = error.schema.get("required", [])
        keys = sorted(set(error.schema.get("properties", {})) - set(required))
        besides = f" besides {', '.join(required)}" if required else ""
        return f"expected at least one of the keys {', '.join(keys)}{besides}"
    return error.message


def validate_document(document: Any, path: str | pathlib.Path) -> None:
    """Raise :class:`SuiteError` for the most relevant schema violation of ``document``
    (jsonschema's ``best_match``: the shallowest, most specific one)."""
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(document))
    if error is not None:
        raise SuiteError(path, key_path(list(error.absolute_path)), _describe(error))
