"""Tensor usage records in MiniMalloc's CSV format, so planners run on published instances.

MiniMalloc (google/minimalloc) and the benchmarks published with it describe one buffer per row
as ``id,lower,upper,size`` (its later releases spell the header ``buffer,start,end,size``; both
are read, the first is written): the buffer is alive over the half-open interval ``[lower, upper)``.
srbench's records use inclusive lifetimes, so ``first = lower`` and ``last = upper - 1``. Columns
are found by the header, in any order; MiniMalloc's solution files add an ``offset`` column,
which is accepted and ignored (records say what must be placed, not where). Any other column
(``alignment``, ``gaps``) changes the problem in ways srbench's records cannot express and is
rejected rather than silently dropped.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from srbench.fileio import NotUtf8Error, atomic_write_text, decode_utf8
from srbench.memory.records import RecordError, TensorUsageRecord, check_records

REQUIRED_COLUMNS = ("id", "lower", "upper", "size")
IGNORED_COLUMNS = ("offset",)
# MiniMalloc's later header names for the same columns.
SPELLINGS = {"buffer": "id", "start": "lower", "end": "upper"}


class MiniMallocCsvError(RecordError):
    """A MiniMalloc CSV file that cannot be read as records; the message names file and line."""


_INTEGER = re.compile(r"-?[0-9]+")


def _parse_int(text: str, column: str, where: str) -> int:
    """Decimal digits (with an optional minus), spaces around them allowed: Python's ``int()``
    would also take ``1_000``, ``+5`` and non-ASCII digits, which no CSV writer means."""
    if _INTEGER.fullmatch(text.strip()) is None:
        raise MiniMallocCsvError(f"{where}: column {column!r} must be a decimal integer, got {text!r}")
    return int(text)


def read_records(path: str | os.PathLike[str]) -> list[TensorUsageRecord]:
    """Read the buffers of a MiniMalloc CSV file as records (``last = upper - 1``).

    The file is UTF-8, with or without a byte-order mark (spreadsheets write one). Raises
    :class:`MiniMallocCsvError` naming the file and line of the first problem: text that is not
    UTF-8 or not CSV, a missing or unknown column, a field that is not a decimal integer, an empty
    or inverted interval, a negative size, or a duplicate id.
    """
    path = Path(path)
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
        return _records(reader, path)
    except csv.Error as error:
        raise MiniMallocCsvError(f"{path}:{reader.line_num}: not CSV: {error}") from None


def _records(reader: Any, path: Path) -> list[TensorUsageRecord]:
    header = next(reader, None)
    if header is None:
        raise MiniMallocCsvError(f"{path}: empty file, expected a header line {','.join(REQUIRED_COLUMNS)}")
    columns = [SPELLINGS.get(name, name) for name in (name.strip().lower() for name in header)]
    missing = [name for name in REQUIRED_COLUMNS if name not in columns]
    unknown = [name for name in columns if name not in REQUIRED_COLUMNS + IGNORED_COLUMNS]
    if missing or unknown or len(set(columns)) != len(columns):
        raise MiniMallocCsvError(
            f"{path}:1: header {','.join(header)!r} is not a MiniMalloc header; expected the columns "
            f"{','.join(REQUIRED_COLUMNS)} (optionally offset)"
            + (f", missing {missing}" if missing else "")
            + (f", unknown {unknown}" if unknown else "")
        )
    index = {name: columns.index(name) for name in REQUIRED_COLUMNS}
    records: list[TensorUsageRecord] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        where = f"{path}:{line}"
        if not row or all(not field.strip() for field in row):
            continue
        if len(row) != len(columns):
            raise MiniMallocCsvError(f"{where}: expected {len(columns)} fields ({','.join(columns)}), got {len(row)}")
        buffer_id = row[index["id"]].strip()
        if not buffer_id:
            raise MiniMallocCsvError(f"{where}: empty id")
        lower = _parse_int(row[index["lower"]], "lower", where)
        upper = _parse_int(row[index["upper"]], "upper", where)
        size = _parse_int(row[index["size"]], "size", where)
        if lower < 0:
            raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has negative lower {lower}")
        if upper <= lower:
            raise MiniMallocCsvError(
                f"{where}: buffer {buffer_id!r} has an empty or inverted lifetime [{lower}, {upper}); "
                "expected lower < upper"
            )
        if size < 0:
            raise MiniMallocCsvError(f"{where}: buffer {buffer_id!r} has negative size {size}")
        if buffer_id in seen:
            raise MiniMallocCsvError(f"{where}: duplicate id {buffer_id!r} (first on line {seen[buffer_id]})")
        seen[buffer_id] = line
        records.append(TensorUsageRecord(id=buffer_id, first=lower, last=upper - 1, size=size))
    return records


def write_records(
    records: Iterable[TensorUsageRecord],
    path: str | os.PathLike[str],
    offsets: Mapping[str, int] | None = None,
) -> None:
    """Write records as MiniMalloc CSV (``upper = last + 1``), atomically; with ``offsets``
    (record id -> offset, one for every record) an ``offset`` column as well, as in MiniMalloc's
    solution files (a packing that comes with the instance; :func:`read_records` ignores it).

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
    writer.writerow(REQUIRED_COLUMNS + (IGNORED_COLUMNS if offsets is not None else ()))
    for record in records:
        row = (record.id, record.first, record.last + 1, record.size)
        writer.writerow(row if offsets is None else (*row, offsets[record.id]))
    atomic_write_text(path, buffer.getvalue())
