"""Fallback results served from the slab: the allocator hook, and what to serve of one op.

Ops without a real out kernel (``layer_norm``, ``scaled_dot_product_attention``,
``embedding_bag``, ``lstm``, the fused transformer encoder layer) allocate their results through
the CPU allocator. A small C++ extension (``csrc/slab_serving.cpp``, built at first use with
``torch.utils.cpp_extension``, cached per torch version and source) installs an allocator over the CPU one
that, while the calling thread is *armed*, serves the allocations that become the op's results at
the slab addresses planned for them, and delegates every other allocation. No library offers this
hook on CPU (see the C++ file), so it is written here.

What to serve is found at prepare time (:func:`find_serving`): one call of the op records the
calling thread's allocations and frees, which of the allocations became each result, and which
the op freed before returning (its scratch, with the events that allocate and free it, so the
plan can give the results bytes of scratch freed before them: :mod:`srbench.static.intra_op`);
a second call, armed with addresses in a probe buffer, must land every result there, or the op is
not served.
At run time an allocation whose size differs from the recording disarms the thread (the op took
another path): its results are then allocated as in eager, correct but unmanaged.

Without a C++ compiler (or ``ninja``) nothing is served and fallback results are allocated by
their ops; :func:`unavailable_reason` says why, and ``srbench profile`` prints it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from srbench.memory.records import DEFAULT_ALIGNMENT, align_up
from srbench.static.calls import Call, invoke

_SOURCE = Path(__file__).parent / "csrc" / "slab_serving.cpp"
MAX_SERVED = 1024  # allocations one op can have served (kMaxServed in the C++ source)


@dataclass(frozen=True)
class ServedResult:
    """One result of an op served from the slab: its position among the op's results, the index
    of the allocation (on the calling thread, during the op) that becomes it, its bytes, and the
    event of the op's recording (allocations and frees, in order) at which it is allocated."""

    result: int
    allocation: int
    nbytes: int
    allocated: int


@dataclass(frozen=True)
class ServedScratch:
    """An allocation of the calling thread that the op frees before it returns (its scratch),
    served from the slab so the plan can lay the op's results over scratch freed before them, as
    eager's allocator reuses it: the allocation's index and bytes, and the events of the op's
    recording at which it is allocated and freed (its lifetime within the op)."""

    allocation: int
    nbytes: int
    allocated: int
    freed: int

    def id(self, node: str) -> str:
        """The slab record of this scratch of ``node``."""
        return f"{node}__scratch{self.allocation}"


@dataclass(frozen=True)
class Serving:
    """What to serve of one op's allocations: ``sizes`` of all its allocations, in order, the
    ``results`` and the ``scratch`` served, the number of ``events`` (allocations and frees) of
    the op's recording, the sub-steps of the op's time in the plan, and the results found but
    left to the op (``unserved``: outputs, or results serving would hold longer than eager)."""

    sizes: tuple[int, ...]
    results: tuple[ServedResult, ...]
    scratch: tuple[ServedScratch, ...] = ()
    events: int = 1
    unserved: tuple[ServedResult, ...] = ()

    def only(self, positions: Collection[int], *, scratch: bool = True) -> Serving | None:
        """This serving with only the results at ``positions``, and its scratch only with
        ``scratch``; ``None`` where nothing is left to serve. Scratch alone is served too: an op
        whose result is the model's output can still take its scratch from the slab, and a run
        can give the slab's segment of that scratch back before the op allocates the output
        (:mod:`srbench.static.mid_op_release`)."""
        results = tuple(result for result in (*self.results, *self.unserved) if result.result in positions)
        kept = self.scratch if scratch else ()
        if not results and not kept:
            return None
        unserved = tuple(result for result in (*self.results, *self.unserved) if result not in results)
        return Serving(self.sizes, results, kept, self.events, tuple(sorted(unserved, key=lambda r: r.allocation)))

    def peak_scratch(self) -> int:
        """The most bytes of its scratch the op holds at once (what eager's allocator holds for it)."""
        changes = sorted(
            [(served.allocated, served.nbytes) for served in self.scratch]
            + [(served.freed, -served.nbytes) for served in self.scratch]
        )
        live = peak = 0
        for _, change in changes:
            live += change
            peak = max(peak, live)
        return peak

    def sequence(self, release_at: int | None = None, released: Collection[int] = ()) -> Any:
        """The extension's handle for this serving (what the generated code arms with: the
        address of each result, then of each scratch allocation). With ``release_at``, the
        allocation right before which the run gives back a slab segment holding the served
        allocations at positions ``released`` (of :meth:`allocations`; the code then arms with
        that segment's storage too)."""
        library = serving_library()
        if library is None:
            raise RuntimeError(f"fallback results cannot be served: {unavailable_reason()}")
        served = tuple(allocation.allocation for allocation in self.allocations())
        last = max((*served, -1 if release_at is None else release_at))
        sizes = self.sizes[: last + 1]  # allocations after the last one that matters are not checked
        if release_at is None:
            return library.sequence(sizes, served)
        return library.sequence(sizes, served, release_at, tuple(released))

    def allocations(self) -> tuple[ServedResult | ServedScratch, ...]:
        """The allocations served, in the order they are armed: the results, then the scratch."""
        return (*self.results, *self.scratch)


# how long a first use waits for another process's build of the extension: a cold build takes
# 20-60 s on a loaded 2-core machine
BUILD_LOCK_PATIENCE_S = 180.0


@functools.cache
def _load() -> tuple[ModuleType | None, str | None]:
    """The built and installed extension, or ``None`` and why not (once per process)."""
    return _built(BUILD_LOCK_PATIENCE_S)


def _built(patience: float) -> tuple[ModuleType | None, str | None]:
    """The extension built (or found built) and installed, waiting at most ``patience`` seconds
    for another process's build; ``None`` and why not."""
    try:
        from torch.utils.cpp_extension import load

        name = extension_name()
        directory = build_directory(name)
        locked = build_lock_left(directory, patience)
        if locked is not None:
            return None, locked
        library = load(
            name,
            [str(_SOURCE)],
            extra_cflags=["-O2"],
            build_directory=str(directory),
            is_python_module=True,
            verbose=False,
        )
    except Exception as error:  # no compiler, no ninja, a failed build: srbench runs without serving
        first = str(error).strip().splitlines()
        return None, f"the allocator hook did not build ({type(error).__name__}: {first[0] if first else ''})"
    if not library.install():
        return None, "another CPU allocator of higher priority is installed"
    return library, None


def extension_name() -> str:
    """The extension's name: by torch's version and by its source too, since checkouts of other
    versions share torch's extensions folder, and one building its source under the same name
    would replace the library another loads."""
    digest = hashlib.sha1(_SOURCE.read_bytes()).hexdigest()[:10]
    return "srbench_slab_serving_" + re.sub(r"\W", "_", torch.__version__) + "_" + digest


def build_directory(name: str) -> Path:
    """The extension's build folder, named here (under torch's extensions root, or
    ``TORCH_EXTENSIONS_DIR`` where set, per Python version) so that its lock file is known."""
    from torch.utils.cpp_extension import get_default_build_root

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    python = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    directory = Path(root) / "srbench" / python / name
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def build_lock_left(directory: Path, patience: float) -> str | None:
    """Why the extension cannot be loaded now: torch's build lock in ``directory`` still held
    after ``patience`` seconds (``None`` once it is free). Every process's first load takes that
    lock to run ``ninja``, and torch waits for it without a limit: a process killed or stopped
    while holding it (``kill -9``, a job stopped with SIGSTOP) left every later process hanging
    in its first prepare, here ten minutes for four at once. Past the wait srbench runs without
    serving (fallback results allocated by their ops: the same answers) and says why. The lock is
    not removed: it may be a live build that is slow, which only its owner can tell."""
    lock = directory / "lock"
    deadline = time.monotonic() + patience
    while lock.exists():
        if time.monotonic() >= deadline:
            return (
                f"the allocator hook's build folder is locked ({lock}): another process is building it, or "
                "one was stopped or killed while it did (then remove the file)"
            )
        time.sleep(0.1)
    return None


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
    opened: dict[int, tuple[int, int]] = {}  # address -> (allocation index, event) not yet freed
    scratch: list[ServedScratch] = []
    sizes: list[int] = []
    for event, (nbytes, address) in enumerate(log):
        if nbytes is not None:
            opened[address] = (len(sizes), event)
            sizes.append(nbytes)
        elif (found := opened.pop(address, None)) is not None and sizes[found[0]] >= DEFAULT_ALIGNMENT:
            # smaller scratch is left to the op: in the slab it would take a whole aligned slot
            scratch.append(ServedScratch(found[0], sizes[found[0]], found[1], event))
    served: list[ServedResult] = []
    taken: set[int] = set()
    for position, value in enumerate(results):
        if not _servable(value):
            continue
        storage = value.untyped_storage()
        found = opened.get(storage.data_ptr())
        if found is not None and found[0] not in taken and sizes[found[0]] == storage.nbytes():
            taken.add(found[0])
            served.append(ServedResult(position, found[0], storage.nbytes(), found[1]))
    if not served or len(served) > MAX_SERVED:  # an op with no result of its own has nothing to serve
        return None
    # the largest scratch where an op has more than the arm table takes (none seen so far)
    scratch = sorted(sorted(scratch, key=lambda s: -s.nbytes)[: MAX_SERVED - len(served)], key=lambda s: s.allocation)
    served.sort(key=lambda result: result.allocation)
    # sizes up to the last allocation served
    serving = Serving(tuple(sizes), tuple(served), tuple(scratch), len(log)).only(range(len(results)))
    assert serving is not None  # served is not empty
    return serving if _lands(serving, call, env) else None


def _lands(serving: Serving, call: Call, env: Mapping[str, Any]) -> bool:
    """Whether a call armed with addresses in a probe buffer lands every served result there."""
    library = serving_library()
    assert library is not None
    offsets, total = [], 0
    for allocation in serving.allocations():
        offsets.append(total)
        total += align_up(allocation.nbytes)
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
