"""Thread mode 2: one shared :class:`StaticModule`, one :class:`StaticRuntime` per thread."""

from __future__ import annotations

import threading
from typing import Any

from srbench.static.module import StaticModule
from srbench.static.runtime import StaticRuntime


class RuntimePool:
    """Hands each thread its own runtime over one prepared module; nothing mutable is shared
    between threads (each runtime owns its slab, managed tensors and bound code)."""

    def __init__(self, module: StaticModule):
        self.module = module
        self._local = threading.local()
        self._lock = threading.Lock()
        self._created = 0

    def runtime(self) -> StaticRuntime:
        """This thread's runtime, created on its first call."""
        runtime = getattr(self._local, "runtime", None)
        if runtime is None:
            runtime = self._local.runtime = self.module.runtime()
            with self._lock:
                self._created += 1
        return runtime

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return self.runtime().run(*args, **kwargs)

    __call__ = run

    @property
    def runtimes_created(self) -> int:
        return self._created
