"""Giving a storage's pages back to the OS lazily, without freeing the storage (``madvise``).

glibc serves every allocation above its largest mmap threshold (32 MiB on 64-bit Linux; below
it the threshold adapts) with a fresh mapping and unmaps it when freed, so a slab segment that
large, resized to 0 after each run and back before the next, faults in every page at every run
(a 64 MiB slab: 16,385 faults and half the run's time). ``MADV_FREE`` instead tells the kernel
the pages' contents are no longer needed: it takes them when it needs memory, and until then
the next run writes into them as they are, without a fault. The storage keeps its size, so
torch's allocator still counts it as held: the runtime reports it so (``slab_bytes``).

No library call does this for a torch storage; ``ctypes`` reaches libc's ``madvise``.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Callable

import torch

MADV_FREE = 8  # Linux >= 4.5; older kernels refuse it with EINVAL
MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", 4)
_PAGE = mmap.PAGESIZE


def _libc_madvise() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


_MADVISE = _libc_madvise()


def supported(device: torch.device) -> bool:
    """Whether storages on ``device`` can give their pages back lazily here (CPU memory on Linux)."""
    return device.type == "cpu" and _MADVISE is not None


def release_pages(storage: torch.UntypedStorage) -> None:
    """Mark the whole pages of ``storage`` free for the OS to take (``MADV_FREE``; where the kernel
    refuses it, ``MADV_DONTNEED``: given back at once, faulted in at the next write)."""
    if _MADVISE is None or storage.nbytes() < _PAGE:
        return
    pointer = storage.data_ptr()
    start = -(-pointer // _PAGE) * _PAGE
    end = (pointer + storage.nbytes()) // _PAGE * _PAGE
    if end > start and _MADVISE(start, end - start, MADV_FREE) != 0:
        _MADVISE(start, end - start, MADV_DONTNEED)
