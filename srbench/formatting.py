"""Numbers and tables for a person: byte sizes, durations, aligned text tables, and the one
line of an error that a refusal quotes.

Every command that prints for a terminal (``srbench plan``, ``compare``, ``models``) formats
through these, so sizes read the same everywhere and every table aligns the same way.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
COLUMN_GAP = "  "


def format_bytes(nbytes: int) -> str:
    """Bytes in binary units: ``'1000 B'``, ``'1.5 KiB'``, ``'1023 KiB'``, ``'1 MiB'``.

    Three significant digits, but never an exponent: a value that rounds to 1000-1023 of a unit
    prints whole (``'1001 KiB'``), and one that rounds to 1024 moves to the next unit.
    """
    if abs(nbytes) < 1024:
        return f"{nbytes} B"
    value = float(nbytes)
    for unit in BYTE_UNITS[1:]:
        value /= 1024
        if abs(value) < 1023.5 or unit == BYTE_UNITS[-1]:
            return f"{value:.3g} {unit}" if abs(value) < 999.5 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    """Milliseconds below a second (``'12.34 ms'``), seconds above (``'1.50 s'``)."""
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


ELLIPSIS = "…"


def aligned_table(
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    right_aligned: Container[int] = (),
    max_width: int | None = None,
    shrink: int = 0,
) -> str:
    """Text with every column padded to its widest cell, two spaces apart: the columns whose index
    is in ``right_aligned`` (numbers) to the right, the others (names) to the left. Trailing
    spaces are stripped, so a free-text last column costs nothing on short rows.

    With ``max_width``, a table wider than that narrows column ``shrink`` (a name column), cutting
    its long cells with an ellipsis, so that every line fits a terminal; the other columns keep
    their width (numbers are never cut)."""
    lines = [tuple(header), *(tuple(row) for row in rows)]
    if any(len(line) != len(header) for line in lines):
        raise ValueError(f"every row needs {len(header)} cells, one per header column")
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    if max_width is not None:
        excess = sum(widths) + len(COLUMN_GAP) * (len(widths) - 1) - max_width
        if excess > 0:
            widths[shrink] = max(len(header[shrink]), widths[shrink] - excess, 1)
            lines = [(*line[:shrink], _cut(line[shrink], widths[shrink]), *line[shrink + 1 :]) for line in lines]
    return "\n".join(
        COLUMN_GAP.join(
            cell.rjust(width) if column in right_aligned else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(line, widths))
        ).rstrip()
        for line in lines
    )


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + ELLIPSIS


# Characters that start emphasis, code, links, raw HTML, maths (GitHub), strike-through, headings
# or entities, or end a table cell, wherever they stand.
_MARKDOWN_SPECIAL = frozenset("\\`*[]<>|$~#&")


def escape_markdown(text: str) -> str:
    """``text`` shown as itself in Markdown (GitHub's, tables included): the characters above are
    backslash-escaped and line breaks become spaces. An underscore between two letters or digits
    is left as is -- it cannot start emphasis there -- so ``greedy_by_size`` stays readable in the
    raw file."""
    escaped = []
    for index, char in enumerate(text):
        inside_word = 0 < index < len(text) - 1 and text[index - 1].isalnum() and text[index + 1].isalnum()
        if char in _MARKDOWN_SPECIAL or (char == "_" and not inside_word):
            escaped.append("\\" + char)
        elif char in "\r\n":
            escaped.append(" ")
        else:
            escaped.append(char)
    return "".join(escaped)


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (``""`` for an empty one)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def error_summary(error: BaseException) -> str:
    """``'TypeError: first line of the message'`` (the type alone for an empty message): what a
    refusal quotes of an error from torch, the exporter or a peer runtime, whose later lines are
    stack traces and advice."""
    first = first_line(error)
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
