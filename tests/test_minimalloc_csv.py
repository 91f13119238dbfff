"""MiniMalloc's CSV format: half-open lifetimes in the file, inclusive ones in srbench's records."""

from __future__ import annotations

from pathlib import Path

import pytest

from srbench.memory.minimalloc_csv import MiniMallocCsvError, read_instance, read_records, write_records
from srbench.memory.records import RecordError, TensorUsageRecord, lower_bound
from srbench.planners import plan_memory

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "minimalloc"


def write(tmp_path: Path, text: str, name: str = "instance.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_upper_is_exclusive_in_the_file_and_last_is_inclusive_in_records(tmp_path):
    path = write(tmp_path, "id,lower,upper,size\nx,0,3,128\ny,3,4,64\n")
    assert read_records(path) == [
        TensorUsageRecord("x", 0, 2, 128),
        TensorUsageRecord("y", 3, 3, 64),
    ]


def test_write_then_read_gives_the_same_records_and_the_file_says_upper(tmp_path):
    records = [TensorUsageRecord("a", 0, 0, 64), TensorUsageRecord("b", 2, 7, 1000)]
    path = tmp_path / "out" / "records.csv"
    write_records(records, path)
    assert path.read_text() == "id,lower,upper,size\na,0,1,64\nb,2,8,1000\n"
    assert read_records(path) == records


def test_columns_are_found_by_header_and_a_solution_offset_column_is_not_a_record_field(tmp_path):
    path = write(tmp_path, "size,upper,offset,lower,id\n256,5,0,1,t\n")
    assert read_records(path) == [TensorUsageRecord("t", 1, 4, 256)]


def test_write_replaces_atomically_and_leaves_the_old_file_when_records_are_bad(tmp_path):
    path = tmp_path / "records.csv"
    write_records([TensorUsageRecord("a", 0, 1, 64)], path)
    with pytest.raises(RecordError, match="inverted lifetime"):
        write_records([TensorUsageRecord("bad", 5, 1, 64)], path)
    assert read_records(path) == [TensorUsageRecord("a", 0, 1, 64)]
    write_records([TensorUsageRecord("b", 0, 0, 32)], path)
    assert read_records(path) == [TensorUsageRecord("b", 0, 0, 32)]
    assert [p.name for p in tmp_path.iterdir()] == ["records.csv"]  # no temporary file left


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"empty file, expected a header line id,lower,upper,size"),
        ("id,lower,size\n", r":1: .*missing \['upper'\]"),
        ("id,lower,upper,size,weight\n", r":1: .*unknown \['weight'\]"),
        ("id,buffer,lower,upper,size\n", r":1: .*repeated \['id'\]"),
        ("id,lower,upper,end,size\n", r":1: .*both upper and end"),
        ("id,lower,upper,size,alignment\na,0,2,64,0\n", r":2: buffer 'a' has column 'alignment' 0, expected >= 1"),
        ("id,lower,upper,size,alignment\na,0,2,64,x\n", r":2: column 'alignment' must be a decimal integer"),
        ("id,lower,upper,size,gaps\na,0,2,64,\nb,0,9,8,3~5\n", r":3: buffer 'b' has a gap '3~5'; expected lo-hi"),
        ("id,lower,upper,size,gaps\nb,0,9,8,3-5@1\n", r":2: buffer 'b' has a gap '3-5@1'; expected lo-hi"),
        ("id,lower,upper,size,gaps\nb,2,9,8,1-5\n", r":2: buffer 'b' has a gap '1-5' that is empty or outside"),
        ("id,lower,upper,size,gaps\nb,2,9,8,3-10\n", r":2: buffer 'b' has a gap '3-10' that is empty or outside"),
        ("id,lower,upper,size,gaps\nb,2,9,8,5-5\n", r":2: buffer 'b' has a gap '5-5' that is empty or outside"),
        ("id,lower,upper,size,gaps\nb,2,9,8,3-5@6:2\n", r":2: buffer 'b' has a gap '3-5@6:2' whose window is"),
        ("id,start,end,size,gaps\nb,2,8,8,3-9\n", r":2: buffer 'b' has a gap '3-9' that is empty or outside"),
        ("id,lower,upper,size,offset\na,0,2,64,\n", r":2: column 'offset' must be a decimal integer, got ''"),
        ("id,lower,upper,size,offset\na,0,2,64,-8\n", r":2: buffer 'a' has negative offset -8"),
        (
            "buffer,start,end,size\na,3,2,64\n",
            r":2: buffer 'a' has an empty or inverted lifetime \[3, 2\] \(end inclusive\)",
        ),
        ("id,lower,upper,size\na,0,2,64\nb,1,x,64\n", r":3: column 'upper' must be a decimal integer, got 'x'"),
        ("id,lower,upper,size\na,0,2, 1_000\n", r":2: column 'size' must be a decimal integer, got ' 1_000'"),
        ("id,lower,upper,size\na,+0,2,8\n", r":2: column 'lower' must be a decimal integer, got '\+0'"),
        ("id,lower,upper,size\na,0,2,\u0661\n", r":2: column 'size' must be a decimal integer"),
        ('id,lower,upper,size\na,0,2,"8\n', r":2: not CSV: unexpected end of data"),
        ("id,lower,upper,size\na,0,2\n", r":2: expected 4 fields"),
        ("id,lower,upper,size\na,2,2,64\n", r":2: buffer 'a' has an empty or inverted lifetime \[2, 2\)"),
        ("id,lower,upper,size\na,0,2,-1\n", r":2: buffer 'a' has negative size -1"),
        ("id,lower,upper,size\na,-1,2,8\n", r":2: buffer 'a' has negative lower -1"),
        ("id,lower,upper,size\na,0,2,64\na,1,3,64\n", r":3: duplicate id 'a' \(first on line 2\)"),
        ("id,lower,upper,size\na,0,2,9223372036854775808\n", r":2: column 'size' is 9223372036854775808, beyond a 64"),
        ("id,lower,upper,size\na,0,99999999999999999999,8\n", r":2: column 'upper' is 99999999999999999999, beyond"),
        ("id,lower,upper,size\n,0,2,64\n", r":2: empty id"),
    ],
)
def test_malformed_files_are_rejected_naming_file_and_line(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(MiniMallocCsvError, match=message) as caught:
        read_records(path)
    assert str(path) in str(caught.value)
    assert isinstance(caught.value, RecordError)  # callers catching record errors see it too


def test_a_byte_order_mark_and_spaces_around_numbers_are_accepted(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffid,lower,upper,size\r\na, 0 , 2,64\r\n".encode())
    assert read_records(path) == [TensorUsageRecord("a", 0, 1, 64)]


def test_text_that_is_not_utf8_names_the_file_and_line_once(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("id,lower,upper,size\nü,0,2,64\n".encode("latin-1"))
    with pytest.raises(MiniMallocCsvError) as caught:
        read_records(path)
    assert str(caught.value) == f"{path}:2: not UTF-8 text (byte 0xfc); expected a UTF-8 CSV file"


def test_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(MiniMallocCsvError, match=r"missing\.csv: cannot read MiniMalloc CSV"):
        read_records(tmp_path / "missing.csv")


def test_the_shipped_minimalloc_instances_load_with_their_published_lower_bounds():
    loaded = {path.name: read_records(path) for path in sorted(DATA.glob("*.csv"))}
    assert sorted(loaded) == [f"{letter}.1048576.csv" for letter in "ABCDEFGHIJK"]
    assert len(loaded["A.1048576.csv"]) == 154
    assert loaded["A.1048576.csv"][0] == TensorUsageRecord("0", 995328, 1000447, 656384)
    # The file name's capacity is at least the lower bound, and reached by most (README).
    bounds = {name: lower_bound(records) for name, records in loaded.items()}
    assert all(bound <= 1048576 for bound in bounds.values())
    assert sum(bound == 1048576 for bound in bounds.values()) == 8


def test_an_end_column_is_inclusive_as_minimalloc_reads_it(tmp_path):
    """MiniMalloc's reader adds one to an ``end`` column (its older format, ``start,end``, which
    its writer gives as ``upper - 1``): ``end`` 2 is alive at step 2, ``upper`` 2 is not."""
    old, new = tmp_path / "old.csv", tmp_path / "new.csv"
    old.write_text("buffer,start,end,size\na,0,1,8\nb,1,2,16\n")
    new.write_text("id,lower,upper,size\na,0,2,8\nb,1,3,16\n")
    assert read_records(old) == read_records(new) == [TensorUsageRecord("a", 0, 1, 8), TensorUsageRecord("b", 1, 2, 16)]


@pytest.mark.parametrize(
    "text",
    [
        "lower,size,id,upper\n6,18,1,12\n5,15,0,10\n",  # MiniMalloc's own reader tests' headers
        "begin,size,buffer,upper\n6,18,1,12\n5,15,0,10\n",
        "start,size,buffer_id,upper\n6,18,1,12\n5,15,0,10",  # no newline at the end
        "start,size,buffer,end\n6,18,1,11\n5,15,0,9\n\n",
        " Start , SIZE ,Buffer,upper \n 6 ,18, 1 ,12\n5,15,0,10\n",
    ],
)
def test_every_header_spelling_and_order_minimalloc_reads(tmp_path, text):
    assert read_records(write(tmp_path, text)) == [TensorUsageRecord("1", 6, 11, 18), TensorUsageRecord("0", 5, 9, 15)]


def test_string_ids_are_kept_as_text(tmp_path):
    path = write(tmp_path, "id,lower,upper,size\nLittle,5,10,15\nBig,6,12,18\n007,0,1,1\n")
    assert [record.id for record in read_records(path)] == ["Little", "Big", "007"]


def test_alignment_and_empty_gaps_columns_as_minimalloc_writes_them(tmp_path):
    path = write(tmp_path, "id,lower,upper,size,alignment,gaps\n0,5,10,15,1,\n1,6,12,18,2,\n2,0,3,4,3,\n")
    instance = read_instance(path)
    assert instance.records == (
        TensorUsageRecord("0", 5, 9, 15),
        TensorUsageRecord("1", 6, 11, 18),
        TensorUsageRecord("2", 0, 2, 4),
    )
    assert instance.alignment == 6  # every buffer's alignment divides it
    assert instance.offsets is None
    assert read_records(path, alignment=6) == read_records(path, alignment=12) == list(instance.records)


def test_an_alignment_the_plan_would_not_keep_is_refused_naming_the_buffer(tmp_path):
    path = write(tmp_path, "id,lower,upper,size,alignment\n0,5,10,15,1\n1,6,12,18,2\n2,0,3,4,3\n")
    with pytest.raises(MiniMallocCsvError) as caught:
        read_records(path, alignment=64)
    assert str(caught.value) == (
        f"{path}:4: buffer '2' asks column 'alignment' 3, which plans at alignment 64 do not keep; "
        "plan at a multiple of 6 (--alignment 6), which keeps every buffer's"
    )
    with pytest.raises(MiniMallocCsvError, match=r":3: buffer '1' asks column 'alignment' 2"):
        read_records(path)  # at alignment 1


def test_a_plan_at_the_files_alignment_keeps_every_buffers(tmp_path):
    path = write(tmp_path, "id,lower,upper,size,alignment\na,0,4,5,4\nb,0,4,7,6\nc,2,6,3,1\n")
    instance = read_instance(path)
    result = plan_memory(list(instance.records), "greedy_by_size", alignment=instance.alignment)
    for record in instance.records:
        asked = {"a": 4, "b": 6, "c": 1}[record.id]
        assert result.plan.offsets[record.id] % asked == 0


def test_a_solution_files_offsets_are_its_packing(tmp_path):
    path = write(tmp_path, "start,size,offset,buffer,upper\n6,18,21,1,12\n5,15,1,0,10\n")
    instance = read_instance(path)
    assert instance.offsets == {"1": 21, "0": 1}
    assert instance.records == (TensorUsageRecord("1", 6, 11, 18), TensorUsageRecord("0", 5, 9, 15))


def test_offsets_are_written_as_minimalloc_s_solution_column_and_every_record_needs_one(tmp_path):
    records = [TensorUsageRecord("a", 0, 0, 64), TensorUsageRecord("b", 0, 1, 32)]
    path = tmp_path / "solved.csv"
    write_records(records, path, offsets={"a": 0, "b": 64})
    assert path.read_text() == "id,lower,upper,size,offset\na,0,1,64,0\nb,0,2,32,64\n"
    assert read_records(path) == records
    assert read_instance(path).offsets == {"a": 0, "b": 64}
    with pytest.raises(ValueError, match=r"no offset for records \['b'\]"):
        write_records(records, tmp_path / "other.csv", offsets={"a": 0})


@pytest.mark.parametrize("alignment", [0, -64, 2.5, True])
def test_a_planned_alignment_that_is_not_a_positive_whole_number_is_refused(tmp_path, alignment):
    """0 passed a file asking alignment 3 as kept (0 is a multiple of everything)."""
    path = tmp_path / "aligned.csv"
    path.write_text("id,lower,upper,size,alignment\na,0,1,8,3\n")
    with pytest.raises(ValueError, match=rf"^alignment must be a positive whole number of bytes, got {alignment!r}$"):
        read_records(path, alignment=alignment)


def test_buffers_with_gaps_are_read_over_their_hull_and_named(tmp_path):
    """Gaps as MiniMalloc's converter writes them (space-separated ``lo-hi``, each with an
    optional ``@lo:hi`` window; ``hi`` inclusive in the ``end`` format, as ``end`` is): each such
    buffer is alive from lower to upper, its gaps taken as alive, so every plan is valid for the
    gapped instance too, and the instance names it. They were refused."""
    new = write(tmp_path, "id,lower,upper,size,gaps\na,0,10,64,2-4 6-8@0:32\nb,3,5,32,\nc,1,4,8,1-2\n", "new.csv")
    old = write(tmp_path, "id,start,end,size,gaps\na,0,9,64,2-3 6-7@0:32\nb,3,4,32,\nc,1,3,8,1-1\n", "old.csv")
    for path in (new, old):
        instance = read_instance(path)
        assert instance.records == (
            TensorUsageRecord("a", 0, 9, 64),
            TensorUsageRecord("b", 3, 4, 32),
            TensorUsageRecord("c", 1, 3, 8),
        )
        assert instance.hulled == ("a", "c")
    assert read_instance(write(tmp_path, "id,lower,upper,size,gaps\na,0,2,64,\n", "none.csv")).hulled == ()
