"""What a loaded suite is: one :class:`CaseSpec` per combination of its sweep."""

from __future__ import annotations

import pathlib
from dataclasses import asdict, dataclass, field
from typing import Any

from srbench.options import RuntimeOptions, id_parts, options_of


class SuiteError(ValueError):
    """A suite file that cannot be used. The message names the file, the key path
    (``axes.planners[2]``) and what was expected there."""

    def __init__(self, path: str | pathlib.Path, key_path: str, message: str):
        self.path = str(path)
        self.key_path = key_path
        self.problem = message
        where = f"{self.path}: {key_path}" if key_path else self.path
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class CaseSpec:
    """One combination of a sweep: a model run by a runtime under one set of options.

    ``options`` are what the runtime is given; ``honours`` lists the static options (planner,
    memory flags) the runtime reads: only those, and the options every runtime runs under
    (threads, device), appear in :attr:`id`, and :meth:`option` reads the others as ``None``.
    ``rtol`` and ``atol`` are ``None`` where the model's own tolerance applies; ``batch`` is
    ``None`` for the model's default batch size.
    """

    suite: str
    model: str
    runtime: str
    options: RuntimeOptions
    batch: int | None
    rtol: float | None
    atol: float | None
    repetitions: int
    provider: str = ""
    family: str = ""
    honours: tuple[str, ...] = ()
    slow: bool = False
    unavailable: str | None = None  # why the model cannot be built here (its provider's library is missing)
    expected_failure: str | None = None  # why this case is known to differ from eager (the suite's rule)

    def option(self, name: str) -> Any:
        """The value of option ``name`` for this case; ``None`` for a static option the runtime
        does not read (eager has no planner)."""
        if name not in self.honours and any(o.name == name and o.is_static for o in options_of()):
            return None
        return getattr(self.options, name)

    @property
    def id(self) -> str:
        """A readable test id, e.g. ``resnet18-srbench-greedy_by_size-cleanup-out-t1``: the model,
        the runtime, then the id part of each option the runtime reads, in declaration order."""
        read = [option.name for option in options_of() if self.option(option.name) is not None]
        parts = [self.model, self.runtime, *id_parts(self.options, read)]
        if self.batch is not None:
            parts.append(f"b{self.batch}")
        return "-".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values: the fields, with each option flat beside them (``None`` where the
        runtime does not read it)."""
        fields = {key: value for key, value in asdict(self).items() if key != "options"}
        options = {option.name: self.option(option.name) for option in options_of()}
        return {"id": self.id, **fields, **options, "honours": list(self.honours)}


@dataclass(frozen=True)
class Suite:
    """A validated suite file and its expanded sweep. ``unavailable`` maps each model provider the
    suite asked for that cannot work here and lists no cases to the reason (cases of unavailable
    providers that do list them are in ``cases``, with :attr:`CaseSpec.unavailable` set)."""

    name: str
    path: pathlib.Path
    cases: tuple[CaseSpec, ...]
    description: str = ""
    unavailable: dict[str, str] = field(default_factory=dict)
