"""Tensor usage records in MiniMalloc's CSV format, so planners run on published instances.

MiniMalloc (google/minimalloc, ``src/converter.cc``) describes one buffer per row. Columns are
found by the header, in any order (names trimmed, any case): ``id`` (also ``buffer`` or
``buffer_id``; any text), ``lower`` (also ``start`` or ``begin``), ``size``, and the end of the
lifetime as ``upper``, exclusive (alive over ``[lower, upper)``), or as ``end``, inclusive
(MiniMalloc's older format: its reader adds one to an ``end`` column, and to the gaps' ends
there). srbench's records use inclusive lifetimes, so ``first = lower`` and ``last = upper - 1``
(``= end``). Three optional columns, as MiniMalloc reads them:

- ``alignment``: a buffer's offset must be a multiple of it. srbench plans every tensor of a
  slab at one alignment (typed views of one slab need it), so a buffer's alignment is honoured
  by planning at a multiple of it: :func:`read_instance` gives the least common multiple of the
  column, and :func:`read_planned` (and :func:`read_records`) refuses a file whose alignments do
  not all divide the one it will be planned at, naming the buffer, rather than return records a
  plan may misplace.
- ``gaps``: times within a buffer's lifetime when its bytes are free, as MiniMalloc's converter
  writes them: space-separated ``lo-hi`` pairs (``hi`` exclusive, inclusive in a file of the
  ``end`` format, as ``end`` is), each with an optional ``@lo:hi`` window (the part of the buffer
  kept during the gap). srbench's records are alive over one interval, so a buffer with gaps is
  read over its hull, alive from ``lower`` to ``upper`` with its gaps taken as alive: a plan of the
  hull is valid for the buffer with its gaps (it only keeps bytes that could be free), possibly
  larger, and its lower bound and proven optimality are the hull's, not the gapped instance's.
  :attr:`MiniMallocInstance.hulled` names those buffers (``srbench plan`` says so in one line),
  so no one compares a hull's numbers with MiniMalloc's on the gaps unawares. That was decided
  over the refusal srbench gave before: the refusal told the user to delete the column, which
  gives the same records without a word in the report. A malformed gap, or one outside its
  buffer's lifetime, is refused naming the buffer; an empty field (MiniMalloc writes one for a
  buffer without gaps) is no gap.
- ``offset``: a solution's offsets (MiniMalloc's solution files; its solver takes them as fixed
  positions, and a file either has one in every row or none). Read as the file's packing,
  :attr:`MiniMallocInstance.offsets` (as a plan: :meth:`MiniMallocInstance.packing`, which
  ``srbench plan`` validates and reports beside the planners'): planners place the records afresh.

Any other column is refused rather than silently dropped.
"""

from __future__ import annotations

import csv
import enum
import io
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srbench.fileio import NotUtf8Error, atomic_write_text, decode_utf8
from srbench.memory.records import (
    MemoryPlan,
    RecordError,
    TensorUsageRecord,
    check_alignment,
    check_records,
)


class Column(enum.Enum):
    """The columns MiniMalloc's reader knows, by srbench's name for each."""

    ID = "id"
    LOWER = "lower"
    UPPER = "upper"
    END = "end"  # inclusive: upper = end + 1
    SIZE = "size"
    ALIGNMENT = "alignment"
    GAPS = "gaps"
    OFFSET = "offset"


REQUIRED_COLUMNS = ("id", "lower", "upper", "size")
# Every header name MiniMalloc's reader accepts, and the column it means.
SPELLINGS = {
    **{column.value: column for column in Column},
    "buffer": Column.ID,
    "buffer_id": Column.ID,
    "start": Column.LOWER,
    "begin": Column.LOWER,
}
_EXPECTED = "id, lower, upper (or end, inclusive) and size, optionally alignment, gaps and offset"


class MiniMallocCsvError(RecordError):
    """A MiniMalloc CSV file that cannot be read as records; the message names file and line."""


FILE_PACKING = "file"  # the planner name a file's own packing is reported under


@dataclass(frozen=True)
class MiniMallocInstance:
    """What a MiniMalloc CSV file holds: the records, the alignment that honours every buffer's
    (the least common multiple of the ``alignment`` column, 1 without one), the file's own
    packing where it has an ``offset`` column (record id -> offset), else None, and the ids of
    the buffers whose gaps were read as alive (``hulled``: their records span lower to upper,
    see the module docstring), in file order."""

    records: tuple[TensorUsageRecord, ...]
    alignment: int = 1
    offsets: Mapping[str, int] | None = None
    hulled: tuple[str, ...] = ()

    def packing(self) -> MemoryPlan | None:
        """The file's own packing (its ``offset`` column) as a plan, its total the highest byte
        it uses, or None without the column; not checked: :func:`srbench.planners.judge_plan`
        validates and judges it as every planner's plan is (``srbench plan`` reports it so, as
        the planner ``file``)."""
        if self.offsets is None:
            return None
        total = max((self.offsets[r.id] + r.size for r in self.records), default=0)
        return MemoryPlan(FILE_PACKING, dict(self.offsets), total)


_INTEGER = re.compile(r"-?[0-9]+")
# one gap as MiniMalloc's converter writes it: lo-hi, optionally @lo:hi (the window kept)
_GAP = re.compile(r"([0-9]+)-([0-9]+)(?:@([0-9]+):([0-9]+))?")


def _parse_int(text: str, column: str, where: str) -> int:
    """Decimal digits (with an optional minus), spaces around them allowed, within int64 as
    MiniMalloc reads them: Python's ``int()`` would also take ``1_000``, ``+5`` and non-ASCII
    digits, which no CSV writer means, and numbers of any length."""
    if _INTEGER.fullmatch(text.strip()) is None:
        raise MiniMallocCsvError(f"{where}: column {column!r} must be a decimal integer, got {text!r}")
    value = int(text)
    if not -(2**63) <= value < 2**63:  # MiniMalloc reads int64; a record that size reached the planners
        raise MiniMallocCsvError(f"{where}: column {column!r} is {value}, beyond a 64-bit integer")
    return value


def _check_gaps(text: str, lower: int, upper: int, inclusive: bool, buffer_id: str, where: str) -> None:
    """Refuse a ``gaps`` field MiniMalloc's reader would refuse (a gap not ``lo-hi[@lo:hi]``),
    or a gap that is empty or outside the buffer's lifetime ``[lower, upper)`` (a gap's ``hi`` is
    inclusive where ``inclusive``), naming the buffer: such a file was written wrong, and reading
    it over the hull would hide that."""
    for gap in text.split():
        match = _GAP.fullmatch(gap)
        if match is None:
            raise MiniMallocCsvError(
                f"{where}: buffer {buffer_id!r} has a gap {gap!r}; expected lo-hi or lo-hi@lo:hi (decimal "
                "integers), space-separated"
            )
        start, end = int(match[1]), int(match[2]) + (1 if inclusive else 0)
        if not lower <= start < end <= upper:
            raise MiniMallocCsvError(
                f"{where}: buffer {buffer_id!r} has a gap {gap!r} that is empty or outside its lifetime "
                f"[{lower}, {upper})"
            )
        if match[3] is not None and int(match[3]) > int(match[4]):
            raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has a gap {gap!r} whose window is inverted")


def read_instance(path: str | os.PathLike[str]) -> MiniMallocInstance:
    """Read a MiniMalloc CSV file: its buffers as records (``last = upper - 1``; a buffer with
    gaps over its hull, named in :attr:`MiniMallocInstance.hulled`), the alignment they need and
    the file's packing, if any.

    The file is UTF-8, with or without a byte-order mark (spreadsheets write one), with or
    without a newline at the end. Raises :class:`MiniMallocCsvError` naming the file and line
    (and column) of the first problem: text that is not UTF-8 or not CSV, a missing, repeated or
    unknown column, a field that is not a decimal integer, an empty or inverted interval, a
    negative size, a non-positive alignment, a malformed gap or one outside its buffer's
    lifetime, or a duplicate id.
    """
    return _read(Path(path), None)


def _read(path: Path, plan_alignment: int | None) -> MiniMallocInstance:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise MiniMallocCsvError(f"{path}: cannot read MiniMalloc CSV: {error.strerror or error}") from error
    try:
        text = decode_utf8(data)
    except NotUtf8Error as error:
        raise MiniMallocCsvError(f"{path}:{error.line}: {error}; expected a UTF-8 CSV file") from None
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        return _instance(reader, path, plan_alignment)
    except csv.Error as error:
        raise MiniMallocCsvError(f"{path}:{reader.line_num}: not CSV: {error}") from None


def read_records(path: str | os.PathLike[str], *, alignment: int = 1) -> list[TensorUsageRecord]:
    """The records of a MiniMalloc CSV file (see :func:`read_planned`)."""
    return list(read_planned(path, alignment=alignment).records)


def read_planned(path: str | os.PathLike[str], *, alignment: int = 1) -> MiniMallocInstance:
    """A MiniMalloc CSV file (see :func:`read_instance`) to be planned at ``alignment``: a file
    whose ``alignment`` column asks an alignment that does not divide it is refused, naming the
    first such buffer and the alignment that would keep them all."""
    # Checked as plan_memory checks it: 0, a multiple of everything, passed a file asking
    # alignment 3 as kept, and 2.5 was named as the planned alignment in the refusal.
    return _read(Path(path), check_alignment(alignment))


def _columns(header: Sequence[str], path: Path) -> dict[Column, int]:
    """Each column's index, from the header; refuses missing, repeated and unknown ones."""
    names = [name.strip().lower() for name in header]
    unknown = [name for name in names if name not in SPELLINGS]
    meant = [SPELLINGS[name] for name in names if name in SPELLINGS]
    repeated = sorted({column.value for column in meant if meant.count(column) > 1})
    both_ends = Column.UPPER in meant and Column.END in meant
    missing = [
        name
        for name, column in zip(REQUIRED_COLUMNS, (Column.ID, Column.LOWER, Column.UPPER, Column.SIZE))
        if column not in meant and not (column is Column.UPPER and Column.END in meant)
    ]
    if missing or unknown or repeated or both_ends:
        problems = [
            *([f"missing {missing}"] if missing else []),
            *([f"unknown {unknown}"] if unknown else []),
            *([f"repeated {repeated}"] if repeated else []),
            *(["both upper and end"] if both_ends else []),
        ]
        raise MiniMallocCsvError(
            f"{path}:1: header {','.join(header)!r} is not a MiniMalloc header; expected the columns {_EXPECTED}: "
            + ", ".join(problems)
        )
    return {SPELLINGS[name]: index for index, name in enumerate(names)}


def _instance(reader: Any, path: Path, plan_alignment: int | None) -> MiniMallocInstance:
    header = next(reader, None)
    if header is None:
        raise MiniMallocCsvError(f"{path}: empty file, expected a header line {','.join(REQUIRED_COLUMNS)}")
    columns = _columns(header, path)
    inclusive = Column.END in columns
    end_column = Column.END if inclusive else Column.UPPER
    records: list[TensorUsageRecord] = []
    offsets: dict[str, int] = {}
    alignment = 1
    unkept: str | None = None  # where the first buffer whose alignment plan_alignment does not keep is
    seen: dict[str, int] = {}
    hulled: list[str] = []
    for row in reader:
        line = reader.line_num
        where = f"{path}:{line}"
        if not row or all(not field.strip() for field in row):
            continue
        if len(row) != len(header):
            raise MiniMallocCsvError(f"{where}: expected {len(header)} fields ({','.join(header)}), got {len(row)}")
        buffer_id = row[columns[Column.ID]].strip()
        if not buffer_id:
            raise MiniMallocCsvError(f"{where}: empty id")
        lower = _parse_int(row[columns[Column.LOWER]], header[columns[Column.LOWER]].strip(), where)
        end_name = header[columns[end_column]].strip()
        upper = _parse_int(row[columns[end_column]], end_name, where) + (1 if inclusive else 0)
        size = _parse_int(row[columns[Column.SIZE]], "size", where)
        if lower < 0:
            raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has negative lower {lower}")
        if upper <= lower:
            shown = f"[{lower}, {upper - 1}] (end inclusive)" if inclusive else f"[{lower}, {upper})"
            raise MiniMallocCsvError(
                f"{where}: buffer {buffer_id!r} has an empty or inverted lifetime {shown}; expected lower "
                + ("<= end" if inclusive else "< upper")
            )
        if size < 0:
            raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has negative size {size}")
        if buffer_id in seen:
            raise MiniMallocCsvError(f"{where}: duplicate id {buffer_id!r} (first on line {seen[buffer_id]})")
        seen[buffer_id] = line
        if Column.ALIGNMENT in columns:
            asked = _parse_int(row[columns[Column.ALIGNMENT]], "alignment", where)
            if asked <= 0:
                raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has column 'alignment' {asked}, expected >= 1")
            alignment = math.lcm(alignment, asked)
            if plan_alignment is not None and plan_alignment % asked and unkept is None:
                unkept = f"{where}: buffer {buffer_id!r} asks column 'alignment' {asked}"
        if Column.GAPS in columns and (gaps := row[columns[Column.GAPS]].strip()):
            _check_gaps(gaps, lower, upper, inclusive, buffer_id, where)
            hulled.append(buffer_id)
        if Column.OFFSET in columns:
            offset = _parse_int(row[columns[Column.OFFSET]], "offset", where)
            if offset < 0:
                raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has negative offset {offset}")
            offsets[buffer_id] = offset
        records.append(TensorUsageRecord(id=buffer_id, first=lower, last=upper - 1, size=size))
    if unkept is not None:
        raise MiniMallocCsvError(
            f"{unkept}, which plans at alignment {plan_alignment} do not keep; plan at a multiple of {alignment} "
            f"(--alignment {alignment}), which keeps every buffer's"
        )
    return MiniMallocInstance(tuple(records), alignment, offsets if Column.OFFSET in columns else None, tuple(hulled))


def write_records(
    records: Iterable[TensorUsageRecord],
    path: str | os.PathLike[str],
    offsets: Mapping[str, int] | None = None,
) -> None:
    """Write records as MiniMalloc CSV (``upper = last + 1``), atomically; with ``offsets``
    (record id -> offset, one for every record) an ``offset`` column as well, as in MiniMalloc's
    solution files (a packing that comes with the instance: :func:`read_instance` gives it back).

    The file is written to a temporary file in the same folder and moved into place with
    :func:`os.replace`, so a reader never sees half a file and a failure leaves the old one.
    """
    records = list(records)
    check_records(records)
    if offsets is not None and (missing := [record.id for record in records if record.id not in offsets]):
        raise ValueError(f"{path}: no offset for records {missing[:5]}")
    path = Path(path)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(REQUIRED_COLUMNS + ((Column.OFFSET.value,) if offsets is not None else ()))
    for record in records:
        row = (record.id, record.first, record.last + 1, record.size)
        writer.writerow(row if offsets is None else (*row, offsets[record.id]))
    atomic_write_text(path, buffer.getvalue())
