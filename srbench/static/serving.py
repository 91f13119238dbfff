"""Fallback results served from the slab: the allocator hook, and what to serve of one op.

Ops without a real out kernel (``layer_norm``, ``scaled_dot_product_attention``,
``embedding_bag``, ``lstm``, the fused transformer encoder layer) allocate their results through
the CPU allocator. A small C++ extension (``csrc/slab_serving.cpp``, built at first use with
``torch.utils.cpp_extension``, cached per torch version) installs an allocator over the CPU one
that, while the calling thread is *armed*, serves the allocations that become the op's results at
the slab addresses planned for them, and delegates every other allocation. No library offers this
hook on CPU (see the C++ file), so it is written here.

What to serve is found at prepare time (:func:`find_serving`): one call of the op records the
sizes of the calling thread's allocations and which of them became each result; a second call,
armed with addresses in a probe buffer, must land every such result there, or the op is not served.
At run time an allocation whose size differs from the recording disarms the thread (the op took
another path): its results are then allocated as in eager, correct but unmanaged.

Without a C++ compiler (or ``ninja``) nothing is served and fallback results are allocated by
their ops; :func:`unavailable_reason` says why, and ``srbench profile`` prints it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from srbench.memory.records import align_up
from srbench.static.calls import Call, invoke

_SOURCE = Path(__file__).parent / "csrc" / "slab_serving.cpp"
MAX_SERVED = 8  # results one op can have served (kMaxServed in the C++ source)


@dataclass(frozen=True)
class ServedResult:
    """One result of an op served from the slab: its position among the op's results, the index
    of the allocation (on the calling thread, during the op) that becomes it, and its bytes."""

    result: int
    allocation: int
    nbytes: int


@dataclass(frozen=True)
class Serving:
    """What to serve of one op's allocations: ``sizes`` of its allocations up to the last one
    served, in order, and the ``results`` served."""

    sizes: tuple[int, ...]
    results: tuple[ServedResult, ...]

    def only(self, positions: Collection[int]) -> Serving | None:
        """This serving with only the results at ``positions`` (``None`` if none is left)."""
        results = tuple(result for result in self.results if result.result in positions)
        if not results:
            return None
        return Serving(self.sizes[: max(result.allocation for result in results) + 1], results)

    def sequence(self) -> Any:
        """The extension's handle for this serving (what the generated code arms with)."""
        library = serving_library()
        if library is None:
            raise RuntimeError(f"fallback results cannot be served: {unavailable_reason()}")
        return library.sequence(self.sizes, tuple(result.allocation for result in self.results))


@functools.cache
def _load() -> tuple[ModuleType | None, str | None]:
    """The built and installed extension, or ``None`` and why not."""
    try:
        from torch.utils.cpp_extension import load

        name = "srbench_slab_serving_" + re.sub(r"\W", "_", torch.__version__)
        library = load(name, [str(_SOURCE)], extra_cflags=["-O2"], is_python_module=True, verbose=False)
    except Exception as error:  # no compiler, no ninja, a failed build: srbench runs without serving
        first = str(error).strip().splitlines()
        return None, f"the allocator hook did not build ({type(error).__name__}: {first[0] if first else ''})"
    if not library.install():
        return None, "another CPU allocator of higher priority is installed"
    return library, None


def serving_library() -> ModuleType | None:
    """The extension, built and installed on first use (``None`` where it cannot be)."""
    return _load()[0]


def unavailable_reason() -> str | None:
    """Why fallback results are not served (``None`` where they can be)."""
    return _load()[1]


def _results(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _servable(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.device.type == "cpu"
        and value.layout is torch.strided
        and value.untyped_storage().nbytes() > 0
    )


def find_serving(call: Call, env: Mapping[str, Any]) -> Serving | None:
    """What to serve of ``call``'s allocations (on CPU), checked by an armed call; ``None``
    where no result comes from an allocation of its own or the check fails (see the module
    docstring). ``env``: the example values the call reads."""
    library = serving_library()
    if library is None:
        return None
    library.record()
    try:
        results = _results(invoke(call, env))
    finally:
        log = library.recorded()
    # address -> the last allocation there (earlier ones there were freed before it)
    last = {address: index for index, (_, address) in enumerate(log)}
    served: list[ServedResult] = []
    taken: set[int] = set()
    for position, value in enumerate(results):
        if not _servable(value):
            continue
        storage = value.untyped_storage()
        found = last.get(storage.data_ptr())
        if found is not None and found not in taken and log[found][0] == storage.nbytes():
            taken.add(found)
            served.append(ServedResult(position, found, storage.nbytes()))
    if not served or len(served) > MAX_SERVED:
        return None
    served.sort(key=lambda result: result.allocation)
    serving = Serving(tuple(size for size, _ in log[: served[-1].allocation + 1]), tuple(served))
    return serving if _lands(serving, call, env) else None


def _lands(serving: Serving, call: Call, env: Mapping[str, Any]) -> bool:
    """Whether a call armed with addresses in a probe buffer lands every served result there."""
    library = serving_library()
    assert library is not None
    offsets, total = [], 0
    for result in serving.results:
        offsets.append(total)
        total += align_up(result.nbytes)
    probe = torch.empty(total, dtype=torch.uint8)
    addresses = [probe.data_ptr() + offset for offset in offsets]
    sequence = serving.sequence()
    library.arm(sequence, *addresses)
    try:
        results = _results(invoke(call, env))
    except Exception:  # it ran unarmed: whatever makes it fail armed, it is not served
        return False
    finally:
        library.disarm()
    landed = all(
        _servable(results[result.result]) and results[result.result].untyped_storage().data_ptr() == address
        for result, address in zip(serving.results, addresses)
    )
    del results  # before the probe they point into
    return landed
