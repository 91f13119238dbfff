"""numba's ``njit`` where the optional ``exact`` extra is installed, else the plain function.

The compiled cores (the best-fit placement, the exact search) are written in the subset of
Python that numba compiles, so without numba the same functions run as plain Python: correct,
much slower. ``cache=True`` keeps the machine code on disk, so only the first call after an
install pays the compilation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

njit: Callable[..., Any]
try:
    from numba import njit as _numba_njit

    njit = _numba_njit
except ImportError:  # pragma: no cover - exercised only where the optional extra is missing

    def _plain(*args: Any, **kwargs: Any) -> Any:
        if args and callable(args[0]):
            return args[0]
        return lambda function: function

    njit = _plain
