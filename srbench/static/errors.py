"""Errors of the static runtime: bad inputs at run time, unrunnable ops at prepare time; and the
warning for a user's out variant that prepare found wrong."""

from __future__ import annotations


class InputSignatureError(TypeError):
    """Inputs that do not match the prepared signature (number, type, dtype or device).

    Raised before any op runs; the message shows the expected and the given signature.
    """


class UnsupportedOpError(RuntimeError):
    """An op that has no out variant and cannot run as fallback either, found at prepare time."""

    def __init__(self, op: str, node: str, reason: str):
        super().__init__(f"op {op} (node {node!r}) can run neither with an out variant nor as fallback: {reason}")
        self.op = op
        self.node = node


class OutVariantWarning(UserWarning):
    """A registered out variant failed its prepare-time check (it raised, wrote elsewhere or gave
    other values than the op); the message names it and the reason, and the op runs another way."""
