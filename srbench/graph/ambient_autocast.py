"""An autocast the caller has entered around a model's call, which no captured program follows.

``torch.export`` does not record an autocast that is active around the export call (it records
one entered inside ``forward``), so a program captured under ``torch.autocast`` runs in the
dtypes of the model's own code, and called under one it does the same: eager casts the ops
autocast lists (``linear`` to bfloat16, say) and returns other dtypes and values. Preparing and
calling under an ambient autocast are therefore refused, with this description of it, rather than
answered in other dtypes than eager's.

An autocast the model enters in ``forward`` is captured as a pair of ops, ``_enter_autocast`` and
``_exit_autocast``, which the program runs as eager runs them; but where an op between them raises,
nothing runs the exit (eager's ``with`` statement would), and the caller's thread stayed in
autocast: every later eager call cast its ops. :func:`leave_autocast` ends such a region.
"""

from __future__ import annotations

import torch

# Device types whose autocast state torch keeps per thread; any other enabled one is still found
# by torch._C._is_any_autocast_enabled, and named generically.
_DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps")

# The file name srbench's generated code is compiled under (srbench.static.codegen), as a prefix.
GENERATED_CODE = "<srbench static "


def ambient_autocast() -> str | None:
    """The autocast active on this thread (``torch.autocast('cpu', dtype=torch.bfloat16)``), or
    ``None``."""
    if not torch._C._is_any_autocast_enabled():
        return None
    active = []
    for device_type in _DEVICE_TYPES:
        try:
            if torch.is_autocast_enabled(device_type):
                active.append(f"torch.autocast({device_type!r}, dtype={torch.get_autocast_dtype(device_type)})")
        except RuntimeError:  # a device type this build does not know
            continue
    return " and ".join(active) or "torch.autocast"


def leave_autocast(error: BaseException | None = None, *, cache_enabled: bool = True) -> None:
    """End every autocast region on this thread: after an error in a program entered with none
    active (its regions left open by the error). Each region whose mode the program's frames in
    ``error``'s traceback still hold (``_enter_autocast``'s result, not yet given to
    ``_exit_autocast``) is exited as eager's ``with`` statement exits it, innermost first, which
    gives the caller's autocast dtype and cache flag back (the flag was left switched on, where
    eager restores the caller's ``torch.set_autocast_cache_enabled(False)``). Reading the flag at
    every call instead would charge every call for the error path. What is still enabled then
    (a region entered elsewhere) is switched off, and the cache emptied and set to
    ``cache_enabled``."""
    for mode in reversed(_open_modes(error)):
        mode.__exit__(None, None, None)
    if not torch._C._is_any_autocast_enabled():
        return
    for device_type in _DEVICE_TYPES:
        try:
            torch.set_autocast_enabled(device_type, False)
        except RuntimeError:  # a device type this build does not know
            continue
    for _ in range(torch.autocast_increment_nesting()):
        torch.autocast_decrement_nesting()
    torch.clear_autocast_cache()
    torch.set_autocast_cache_enabled(cache_enabled)


def _open_modes(error: BaseException | None) -> list[torch.amp.autocast]:
    """The autocast modes still held by the frames of srbench's generated code in ``error``'s
    traceback, outermost first (frames from the caller's inward, and in order of entry within
    one: the generated code names each ``_enter_autocast`` result once, and deletes it after its
    exit)."""
    modes: dict[int, torch.amp.autocast] = {}
    traceback = error.__traceback__ if error is not None else None
    while traceback is not None:
        frame = traceback.tb_frame
        if frame.f_code.co_filename.startswith(GENERATED_CODE):
            for value in frame.f_locals.values():
                if isinstance(value, torch.amp.autocast):
                    modes.setdefault(id(value), value)
        traceback = traceback.tb_next
    return list(modes.values())


def ambient_autocast_reason(autocast: str) -> str:
    """Why a call or capture under ``autocast`` is refused, and what to do instead."""
    return (
        f"called under {autocast}, which torch.export does not capture: srbench's program would run in the "
        "dtypes of the model's own code where eager casts ops to the autocast dtype (other dtypes and values). "
        "Enter torch.autocast inside the model's forward (captured there), or call outside it"
    )
