"""srbench.memory.sources: the records of a zoo model or a CSV file, or a SourceError saying why not."""

from __future__ import annotations

import pytest

from srbench.memory.minimalloc_csv import write_records
from srbench.memory.records import TensorUsageRecord, check_records
from srbench.memory.sources import SourceError, csv_instance, model_records
from srbench.zoo import load_zoo


def test_model_records_are_the_lifetime_analysis_of_the_captured_model():
    analysis = model_records(load_zoo(), "mlp", batch=4, alignment=128)
    check_records(analysis.records)
    assert analysis.records and analysis.output_records  # intermediates planned, the result apart
    assert all(record.size % 128 == 0 for record in analysis.records)


def test_unknown_model_is_a_source_error_naming_the_nearest():
    with pytest.raises(SourceError, match="unknown model 'mpl'; did you mean 'mlp'"):
        model_records(load_zoo(), "mpl")


def test_csv_records_round_trip_and_bad_files_name_the_path(tmp_path):
    records = [TensorUsageRecord("a", 0, 1, 64), TensorUsageRecord("b", 1, 2, 128)]
    write_records(records, tmp_path / "ok.csv")
    assert list(csv_instance(tmp_path / "ok.csv").records) == records
    (tmp_path / "bad.csv").write_text("id,lower,upper,size\nx,0,1,big\n")
    with pytest.raises(SourceError) as caught:
        csv_instance(tmp_path / "bad.csv")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'bad.csv'}:2: column 'size'") and message.count("bad.csv") == 1
