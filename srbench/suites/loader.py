"""Reading a suite file: YAML, then the schema, then every name checked against what is
installed (zoo, runtimes, planners), then the sweep. Each step fails with a :class:`SuiteError`
naming the file, the key path and what was expected."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

from srbench.fileio import NotUtf8Error, decode_utf8
from srbench.options import plugin_options
from srbench.registry import PluginConflict, UnknownPluginError, unknown_name_message
from srbench.runtimes import get_runtime, runtime_names
from srbench.suites.bounded_yaml import MAX_BYTES, YamlProblem, load_yaml
from srbench.suites.expand import RuntimeTraits, default_axes, expand
from srbench.suites.schema import key_path, validate_document
from srbench.suites.spec import Suite, SuiteError
from srbench.zoo import FAMILIES, PROVIDERS, Zoo, ZooEntry, load_zoo


def read_document(path: pathlib.Path) -> dict[str, Any]:
    """The suite's YAML mapping. Refuses, naming the file and where: a file that cannot be read,
    is larger than :data:`~srbench.suites.bounded_yaml.MAX_BYTES`, is not UTF-8, is not valid or
    bounded YAML (see :mod:`srbench.suites.bounded_yaml`), or is not a mapping."""
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise SuiteError(path, "", f"cannot read the file: {error.strerror or error}") from error
    if len(data) > MAX_BYTES:
        raise SuiteError(path, "", f"larger than {MAX_BYTES:,} bytes; expected a suite written out by hand")
    try:
        text = decode_utf8(data)
    except NotUtf8Error as error:
        raise SuiteError(path, f"line {error.line}", f"{error}; expected a UTF-8 YAML file") from None
    try:
        document = load_yaml(text)
    except YamlProblem as problem:
        raise SuiteError(path, problem.where, str(problem)) from None
    if document is None:
        raise SuiteError(path, "", "the file holds no YAML document; expected a YAML mapping with an 'axes' key")
    if not isinstance(document, dict):
        raise SuiteError(path, "", f"expected a YAML mapping with an 'axes' key, got {type(document).__name__}")
    return document


class _Checker:
    """Checks names in one document, raising SuiteError with the key path of the first bad one."""

    def __init__(self, path: pathlib.Path):
        self.path = path

    def names(self, kind: str, values: Sequence[str], known: Sequence[str], where: Sequence[str | int]) -> None:
        for index, value in enumerate(values):
            if value not in known:
                raise SuiteError(self.path, key_path([*where, index]), unknown_name_message(kind, value, list(known)))

    def name(self, kind: str, value: Any, known: Sequence[str], where: Sequence[str | int]) -> None:
        if isinstance(value, list):
            self.names(kind, value, known, where)
        elif value not in known:
            raise SuiteError(self.path, key_path(where), unknown_name_message(kind, value, list(known)))


def select_models(selection: dict[str, Any], zoo: Zoo, check: _Checker) -> tuple[list[ZooEntry], dict[str, str]]:
    """The zoo entries an ``axes.models`` mapping selects (available or not, in which case the
    entry says why), and the unavailable providers it asked for that list no models at all."""
    where = ("axes", "models")
    entries = {entry.case.name: entry for entry in zoo.entries()}
    check.names("model", selection.get("names", []), list(entries), [*where, "names"])
    check.names("model provider", selection.get("providers", []), PROVIDERS.names(), [*where, "providers"])
    check.names("model family", selection.get("families", []), FAMILIES, [*where, "families"])
    check.names("model", selection.get("exclude", []), list(entries), [*where, "exclude"])

    providers, families = selection.get("providers"), selection.get("families")
    chosen = [entries[name] for name in selection.get("names", [])]
    if selection.get("all") or providers or families:
        chosen += [
            entry
            for entry in entries.values()
            if (providers is None or entry.case.provider in providers)
            and (families is None or entry.case.family in families)
        ]
    asked = set(zoo.unavailable) if selection.get("all") else set(providers or [])
    listed = {entry.case.provider for entry in entries.values()}
    silent = {name: reason for name, reason in zoo.unavailable.items() if name in asked and name not in listed}
    excluded = set(selection.get("exclude", []))
    unique = {entry.case.name: entry for entry in chosen if entry.case.name not in excluded}
    if not unique and not silent:
        raise SuiteError(
            check.path,
            key_path(where),
            "selects no model; expected 'names', 'providers', 'families' or 'all: true' that match the zoo",
        )
    return list(unique.values()), silent


def load_suite(path: str | pathlib.Path, *, zoo: Zoo | None = None) -> Suite:
    """Load, validate and expand the suite file at ``path``. Raises :class:`SuiteError`."""
    path = pathlib.Path(path)
    document = read_document(path)
    validate_document(document, path)
    check = _Checker(path)
    axes_doc = document["axes"]
    try:
        zoo = zoo if zoo is not None else load_zoo()
    except PluginConflict as error:
        raise SuiteError(path, key_path(["axes", "models"]), str(error)) from None

    models, unavailable = select_models(axes_doc["models"], zoo, check)
    named_plugins = plugin_options()
    check.names("runtime", axes_doc["runtimes"], runtime_names(), ["axes", "runtimes"])
    for option, registry in named_plugins:
        check.names(registry.kind, axes_doc.get(option.info.axis, []), registry.names(), ["axes", option.info.axis])
    for section in ("exclude", "tolerance_rules", "expected_failures"):
        for index, rule in enumerate(document.get(section, [])):
            for key, known, kind in (
                ("model", [entry.case.name for entry in zoo.entries()], "model"),
                ("provider", PROVIDERS.names(), "model provider"),
                ("family", FAMILIES, "model family"),
                ("runtime", runtime_names(), "runtime"),
                *((option.name, registry.names(), registry.kind) for option, registry in named_plugins),
            ):
                if key in rule:
                    check.name(kind, rule[key], known, [section, index, key])

    runtimes = {}
    for index, name in enumerate(axes_doc["runtimes"]):
        try:
            runtimes[name] = RuntimeTraits.of(get_runtime(name))
        except (ImportError, UnknownPluginError) as error:
            raise SuiteError(
                path, key_path(["axes", "runtimes", index]), f"runtime {name!r} cannot be loaded: {error}"
            ) from error

    axes = default_axes()
    axes.update({axis: values for axis, values in axes_doc.items() if axis in axes})
    tolerance = document.get("tolerance", {})
    cases = expand(
        path.stem,
        models,
        runtimes,
        axes,
        exclude=document.get("exclude", []),
        rtol=tolerance.get("rtol"),
        atol=tolerance.get("atol"),
        tolerance_rules=document.get("tolerance_rules", []),
        expected_failures=document.get("expected_failures", []),
        repetitions=document.get("repetitions", 20),
        slow=document.get("slow", False),
    )
    if not cases and not unavailable:
        raise SuiteError(
            path,
            "exclude" if document.get("exclude") else "axes",
            "the sweep is empty: every combination is excluded (by the rules or by the runtimes' devices); "
            "expected at least one case",
        )
    return Suite(
        name=path.stem, path=path, cases=cases, description=document.get("description", ""), unavailable=unavailable
    )
