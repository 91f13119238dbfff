"""A decorator setting asv's attributes (``unit``, ``timeout``) on a benchmark function: asv reads
them from the function, and setting them after the definition would not type-check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

Function = TypeVar("Function", bound=Callable[..., Any])


def asv_attributes(**attributes: object) -> Callable[[Function], Function]:
    def decorate(function: Function) -> Function:
        function.__dict__.update(attributes)
        return function

    return decorate
