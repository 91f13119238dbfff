"""What a loaded suite is: one :class:`CaseSpec` per combination of its sweep."""

from __future__ import annotations

import pathlib
from dataclasses import asdict, dataclass, field
from typing import Any


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

    ``planner`` is ``None`` for runtimes that do no memory planning of their own; ``rtol`` and
    ``atol`` are ``None`` where the model's own tolerance applies; ``batch`` is ``None`` for the
    model's default batch size. ``honours`` lists the memory options (planner, flags) the runtime
    reads, which are the only ones that appear in :attr:`id`.
    """

    suite: str
    model: str
    runtime: str
    planner: str | None
    threads: int
    cleanup_activations: bool
    enable_out_variant: bool
    manage_output_tensors: bool
    device: str
    batch: int | None
    rtol: float | None
    atol: float | None
    repetitions: int
    provider: str = ""
    family: str = ""
    honours: tuple[str, ...] = ()
    slow: bool = False
    unavailable: str | None = None  # why the model cannot be built here (its provider's library is missing)

    @property
    def id(self) -> str:
        """A readable test id, e.g. ``resnet18-srbench-greedy_by_size-t1-cleanup-out``."""
        parts = [self.model, self.runtime]
        if self.planner is not None:
            parts.append(self.planner)
        parts.append(f"t{self.threads}")
        if "cleanup_activations" in self.honours:
            parts.append("cleanup" if self.cleanup_activations else "nocleanup")
        if "enable_out_variant" in self.honours:
            parts.append("out" if self.enable_out_variant else "noout")
        if "manage_output_tensors" in self.honours and self.manage_output_tensors:
            parts.append("managed")
        if self.device != "cpu":
            parts.append(self.device)
        if self.batch is not None:
            parts.append(f"b{self.batch}")
        return "-".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self), "honours": list(self.honours)}


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
