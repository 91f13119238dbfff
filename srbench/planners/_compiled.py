"""numba's ``njit`` where the optional ``exact`` extra is installed, else the plain function.

The compiled cores (the best-fit placement, the exact search) are written in the subset of
Python that numba compiles, so without numba the same functions run as plain Python: correct,
much slower. ``cache=True`` keeps the machine code on disk, so only the first call after an
install pays the compilation.

numba keys each cached function on its own source file only: a compiled caller keeps the code of
the functions it calls from other modules as they were when it was compiled. After editing one of
those (``_section_inference`` under ``_exact_search``'s search, say) without touching the
caller's file, delete ``srbench/planners/__pycache__/*.nbi`` and ``*.nbc``, or measurements and
tests run the old code (found while measuring issue 15's changes). An install writes every file
anew, so users are not affected.
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
