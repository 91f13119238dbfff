"""Human formatting shared by every command: byte sizes, durations, the aligned table."""

from __future__ import annotations

import markdown_it
import pytest
from markdown_it.common.utils import escapeHtml

from srbench.formatting import aligned_table, escape_markdown, format_bytes, format_seconds


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


def test_aligned_table_fits_a_width_by_cutting_the_name_column():
    rows = [("a-very-long-case-name-that-goes-on", "1.00x", "12 KiB"), ("short", "10.00x", "1 MiB")]
    table = aligned_table(("CASE", "RATIO", "PEAK"), rows, right_aligned={1, 2}, max_width=30)
    assert table.splitlines() == [
        "CASE             RATIO    PEAK",
        "a-very-long-c…   1.00x  12 KiB",
        "short           10.00x   1 MiB",
    ]
    assert aligned_table(("CASE",), [("x" * 50,)], max_width=80).endswith("x" * 50)  # fits: nothing cut


NASTY_NAMES = [
    "greedy_by_size",
    "_private_",
    "$x_1$ and $y",
    "<script>alert(1)</script>",
    "a|b",
    "**bold** *it* `code` ~~gone~~",
    "[link](http://example.com)",
    "# heading",
    "&amp; &lt;",
    "back\\slash\\",
    "snake__case_",
]


@pytest.mark.parametrize("name", NASTY_NAMES)
def test_escaped_names_render_as_themselves_in_markdown_paragraphs_and_tables(name):
    renderer = markdown_it.MarkdownIt("commonmark").enable("table")
    escaped = escape_markdown(name)
    assert renderer.render(f"Model {escaped}.") == f"<p>Model {escapeHtml(name)}.</p>\n"
    table = renderer.render(f"| name |\n|---|\n| {escaped} |\n")
    assert f"<td>{escapeHtml(name)}</td>" in table


def test_underscores_inside_words_stay_readable():
    assert escape_markdown("greedy_by_size") == "greedy_by_size"
    assert escape_markdown("_x_") == "\\_x\\_"
