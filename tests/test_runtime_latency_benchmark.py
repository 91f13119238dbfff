"""The runtime latency benchmark (a script, not a timed test): one table per model with every
runtime asked for, ratios to eager from the same rounds, srbench's managed share, JSON on request."""

from __future__ import annotations

import json

from benchmarks import runtime_latency


def test_one_table_per_model_with_each_runtime_and_json(tmp_path, capsys):
    path = tmp_path / "latency.json"
    argv = ["--models", "mlp", "--runtimes", "eager", "srbench", "--repeats", "3", "--warmup", "1"]
    assert runtime_latency.main([*argv, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "#### mlp (batch 1)" in out
    assert "| eager |" in out and "| srbench |" in out
    (table,) = json.loads(path.read_text())
    rows = {row["runtime"]: row for row in table["rows"]}
    assert set(rows) == {"eager", "srbench"}
    assert rows["eager"]["ratio_to_eager"] == 1.0
    assert rows["srbench"]["matches_eager"] and 0 < rows["srbench"]["managed_share"] <= 1
    assert rows["srbench"]["peak_bytes"] > 0 and rows["srbench"]["slab_bytes"] > 0


def test_a_runtime_that_cannot_take_the_model_is_a_note(monkeypatch):
    from srbench.runtimes import UnsupportedRuntime

    class Refuses:
        def __init__(self, *args):
            raise UnsupportedRuntime("no thanks")

    monkeypatch.setattr("srbench.runtimes.get_runtime", lambda name: Refuses if name == "torchscript" else real(name))
    from srbench.runtimes import RUNTIMES

    real = RUNTIMES.load
    result = runtime_latency.measure_model("mlp", runtimes=["eager", "torchscript"], repeats=2, warmup=0)
    assert [row.runtime for row in result.rows] == ["eager"]
    assert result.notes == ("TorchScript unavailable: UnsupportedRuntime: no thanks",)


def test_cpu_clock_and_the_load_are_noted(capsys):
    argv = ["--models", "mlp", "--runtimes", "eager", "srbench", "--repeats", "3", "--warmup", "1", "--clock", "cpu"]
    assert runtime_latency.main(argv) == 0
    out = capsys.readouterr().out
    assert "- cpu clock, 3 rounds, load average " in out
