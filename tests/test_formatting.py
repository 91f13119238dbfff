"""Human formatting shared by every command: byte sizes, durations, the aligned table."""

from __future__ import annotations

import pytest

from srbench.formatting import aligned_table, format_bytes, format_seconds


@pytest.mark.parametrize(
    "nbytes, text",
    [
        (0, "0 B"),
        (1000, "1000 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (1536, "1.5 KiB"),
        (999 * 1024, "999 KiB"),
        (1000 * 1024, "1000 KiB"),  # no "1e+03 KiB"
        (1023 * 1024, "1023 KiB"),
        (1024 * 1024 - 1, "1 MiB"),  # rounds to 1024 KiB: the next unit
        (3 * 2**20, "3 MiB"),
        (5 * 2**30 // 4, "1.25 GiB"),
        (1010 * 2**30, "1010 GiB"),
        (2**60, "1024 PiB"),  # the largest unit grows without an exponent
    ],
)
def test_format_bytes(nbytes, text):
    assert format_bytes(nbytes) == text


def test_format_bytes_never_prints_an_exponent():
    for nbytes in range(999 * 1024, 1025 * 1024, 7):
        assert "e" not in format_bytes(nbytes)


@pytest.mark.parametrize("seconds, text", [(0.0123456, "12.35 ms"), (0.5, "500.00 ms"), (1.5, "1.50 s")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


def test_aligned_table_pads_names_left_and_numbers_right():
    text = aligned_table(("NAME", "COUNT", "NOTE"), [("a", "1", "x"), ("long name", "1,000", "")], right_aligned={1})
    assert text.splitlines() == [
        "NAME       COUNT  NOTE",
        "a              1  x",
        "long name  1,000",  # trailing padding of the last column is stripped
    ]


def test_aligned_table_rejects_ragged_rows():
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        aligned_table(("A", "B"), [("only one",)])
