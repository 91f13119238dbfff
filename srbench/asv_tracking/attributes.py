"""How a benchmark module gives asv a benchmark's settings (``unit``, ``timeout``).

asv reads them from attributes of the benchmark's function; setting them with a decorator (rather
than ``function.unit = ...`` after the definition) keeps the benchmark modules type-checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Function = TypeVar("Function", bound=Callable[..., Any])


def asv_attributes(**attributes: object) -> Callable[[Function], Function]:
    """A decorator setting asv's ``attributes`` on a benchmark function."""

    def decorate(function: Function) -> Function:
        function.__dict__.update(attributes)
        return function

    return decorate
