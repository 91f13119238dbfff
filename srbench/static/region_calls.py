"""Leaner calls of the higher-order ops ``torch.export`` keeps for a model's context managers.

``wrap_with_autocast`` and ``wrap_with_set_grad_enabled`` run their sub-module inside the
context they stand for, and build a ``torch._dynamo.disable`` wrapper around it at every call,
which matters only under ``torch.compile`` and cost about 16 us a call of ``contexts_dataclass``'
three-op regions (of 50 for the autocast one). The static runtime calls these functions instead:
the same context around the same call, without the wrapper.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def run_autocast_region(
    device_type: str,
    dtype: torch.dtype | None,
    enabled: bool,
    cache_enabled: bool | None,
    body: Callable[..., Any],
    *args: Any,
    **kwargs: Any,
) -> Any:
    """``wrap_with_autocast``: the ``with torch.autocast(...)`` statement around the body."""
    with torch.autocast(device_type, dtype, enabled, cache_enabled):
        return body(*args, **kwargs)


def run_grad_region(enable_grad: bool, body: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``wrap_with_set_grad_enabled``: grad mode switched around the body, and switched back
    (after an error too, where the op left it switched: the program's own exit restores the
    caller's mode either way)."""
    previous = torch.is_grad_enabled()
    torch._C._set_grad_enabled(enable_grad)
    try:
        return body(*args, **kwargs)
    finally:
        torch._C._set_grad_enabled(previous)


# op -> the function the static runtime calls for it
LEANER_CALLS: dict[Any, Callable[..., Any]] = {
    torch.ops.higher_order.wrap_with_autocast: run_autocast_region,
    torch.ops.higher_order.wrap_with_set_grad_enabled: run_grad_region,
}
