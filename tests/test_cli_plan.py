"""``srbench plan`` run in-process: a zoo model, a MiniMalloc CSV file, JSON output, failures."""

from __future__ import annotations

import json

import pytest
import torch

from srbench.cli import main
from srbench.formatting import format_bytes
from srbench.memory.minimalloc_csv import read_records, write_records
from srbench.memory.records import TensorUsageRecord, lower_bound
from srbench.registry import UnknownPluginError, unknown_name_message
from srbench.zoo import ModelCase

HEURISTICS = "naive,greedy_by_size,greedy_by_breadth,linear_scan,storage_groups"


class DataDependent(torch.nn.Module):
    """Branches on a tensor's value: torch.export cannot capture it."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class FakeZoo:
    """Just the part of srbench.zoo.Zoo that ``srbench plan`` uses."""

    def __init__(self, cases):
        self.cases = {case.name: case for case in cases}
        self.batches = []

    def get(self, name):
        if name not in self.cases:
            raise UnknownPluginError(unknown_name_message("model", name, list(self.cases)))
        return self.cases[name]


def case(name, build, zoo):
    def inputs(shape, batch):
        zoo.batches.append(batch)
        return (torch.randn(batch or 2, 8),)

    return ModelCase(name=name, provider="test", family="mlp", build=build, make_inputs=inputs)


@pytest.fixture
def fake_zoo(monkeypatch):
    zoo = FakeZoo([])
    zoo.cases = {c.name: c for c in (case("broken", DataDependent, zoo), case("tiny", Tiny, zoo))}
    monkeypatch.setattr("srbench.zoo.load_zoo", lambda: zoo)
    return zoo


def run_json(capsys, *argv):
    status = main(["plan", *argv, "--json"])
    captured = capsys.readouterr()
    return status, json.loads(captured.out), captured.err


def test_plans_a_zoo_model_with_every_chosen_planner(capsys, tmp_path):
    status, document, _ = run_json(capsys, "--model", "mlp", "--planners", HEURISTICS, "--save-records", str(tmp_path))
    assert status == 0
    (source,) = document["sources"]
    assert source["name"] == "mlp" and source["kind"] == "model" and source["errors"] == []
    records = read_records(tmp_path / "mlp.csv")  # --save-records wrote what was planned
    assert source["planned_tensors"] == len(records) > 0
    assert source["lower_bound"] == lower_bound(records)
    assert source["output_tensors"] >= 1  # the model's result is reported apart
    plans = {row["planner"]: row for row in source["plans"]}
    assert list(plans) == HEURISTICS.split(",")
    assert plans["naive"]["total_bytes"] == sum(r.size for r in records)  # sizes come aligned
    for row in plans.values():
        assert row["total_bytes"] >= source["lower_bound"]
        assert row["ratio_to_lower_bound"] == pytest.approx(row["total_bytes"] / source["lower_bound"])
        assert row["seconds"] >= 0


def test_plans_records_from_a_minimalloc_csv(capsys, tmp_path):
    records = [
        TensorUsageRecord("a", 0, 1, 128),
        TensorUsageRecord("b", 1, 2, 128),
        TensorUsageRecord("c", 2, 3, 128),
    ]
    path = tmp_path / "chain.csv"
    write_records(records, path)
    status, document, _ = run_json(capsys, "--records", str(path), "--planners", HEURISTICS)
    assert status == 0
    (source,) = document["sources"]
    assert (source["name"], source["kind"], source["planned_tensors"]) == ("chain", "records", 3)
    assert source["lower_bound"] == 256
    totals = {row["planner"]: row["total_bytes"] for row in source["plans"]}
    assert totals == {
        "naive": 384,
        "greedy_by_size": 256,
        "greedy_by_breadth": 256,
        "linear_scan": 256,
        "storage_groups": 256,
    }


def test_a_csv_alignment_column_is_kept_or_refused_at_the_planned_alignment(capsys, tmp_path):
    path = tmp_path / "aligned.csv"
    path.write_text("id,lower,upper,size,alignment\na,0,2,5,4\nb,1,3,7,6\n")
    status, document, err = run_json(
        capsys, "--records", str(path), "--planners", "greedy_by_size", "--alignment", "64"
    )
    assert status == 2  # every source failed
    assert document["sources"][0]["plans"] == []
    assert f"{path}:3: buffer 'b' asks column 'alignment' 6" in err and "--alignment 12" in err
    status, document, err = run_json(
        capsys, "--records", str(path), "--planners", "greedy_by_size", "--alignment", "12"
    )
    assert status == 0 and err == ""
    assert document["sources"][0]["plans"][0]["total_bytes"] == 17  # b (7 bytes) at 0, a (5) at 12


def test_gaps_are_read_as_alive_and_plan_says_so_in_one_line(capsys, tmp_path):
    """A buffer with gaps is planned over its hull (alive from lower to upper); one line on
    stderr names the file and buffers and says the bound and optimality are the hull's, and the
    JSON report lists them. ``a``'s gap 1-3 would let ``b`` share its bytes: the hull does not."""
    path = tmp_path / "gapped.csv"
    path.write_text("id,lower,upper,size,gaps\na,0,4,64,1-3\nb,1,3,64,\n")
    status, document, err = run_json(capsys, "--records", str(path), "--planners", "greedy_by_size")
    assert status == 0
    (source,) = document["sources"]
    assert source["gaps_read_as_alive"] == ["a"] and source["lower_bound"] == 128
    assert source["plans"][0]["total_bytes"] == 128
    (line,) = err.splitlines()
    assert line.startswith(f"srbench plan: {path}: the gaps of 1 buffer(s) ('a') were read as alive")
    assert "those of that hull, not of the instance with its gaps" in line
    path.write_text("id,lower,upper,size,gaps\na,0,4,64,\nb,1,3,64,\n")
    status, document, err = run_json(capsys, "--records", str(path), "--planners", "greedy_by_size")
    assert status == 0 and err == "" and document["sources"][0]["gaps_read_as_alive"] == []


def test_a_solution_files_packing_is_validated_and_reported_beside_the_planners(capsys, tmp_path):
    """A file with an ``offset`` column (MiniMalloc's solution files) gets one more row, planner
    ``file``: its packing judged as the planners' are (total, ratio, ``*`` at the bound), with
    no time; one that is not a packing is the file's error naming the buffers, and the planners
    still run."""
    records = [TensorUsageRecord("a", 0, 1, 128), TensorUsageRecord("b", 1, 2, 64), TensorUsageRecord("c", 3, 4, 96)]
    path = tmp_path / "solved.csv"
    write_records(records, path, offsets={"a": 0, "b": 128, "c": 32})
    status, document, err = run_json(capsys, "--records", str(path), "--planners", "greedy_by_size")
    assert status == 0 and err == ""
    (source,) = document["sources"]
    rows = {row["planner"]: row for row in source["plans"]}
    assert set(rows) == {"greedy_by_size", "file"}
    assert rows["file"]["total_bytes"] == 192 and rows["file"]["seconds"] is None
    assert rows["file"]["proven_optimal"] and rows["file"]["ratio_to_lower_bound"] == 1.0
    assert main(["plan", "--records", str(path), "--planners", "greedy_by_size"]) == 0
    file_row = next(line for line in capsys.readouterr().out.splitlines() if " file " in line)
    assert "1.000*" in file_row and file_row.rstrip().endswith("-")

    write_records(records, path, offsets={"a": 0, "b": 64, "c": 0})  # a and b share bytes at step 1
    status, document, err = run_json(capsys, "--records", str(path), "--planners", "greedy_by_size")
    assert status == 1
    assert [row["planner"] for row in document["sources"][0]["plans"]] == ["greedy_by_size"]
    (line,) = err.splitlines()
    assert line.startswith(f"srbench plan: {path}: its offset column is not a valid packing of its buffers")
    assert "'a'" in line and "'b'" in line


def test_a_solution_packing_that_may_use_gaps_is_not_compared_over_the_hull(capsys, tmp_path):
    """``b`` lies in ``a``'s bytes during ``a``'s gap: valid for the file, not over the hull the
    planners see, so it is said and left out, not called the file's error."""
    path = tmp_path / "gapped_solution.csv"
    path.write_text("id,lower,upper,size,gaps,offset\na,0,4,64,1-3,0\nb,1,3,64,,0\n")
    status, document, err = run_json(capsys, "--records", str(path), "--planners", "greedy_by_size")
    assert status == 0
    assert [row["planner"] for row in document["sources"][0]["plans"]] == ["greedy_by_size"]
    assert "its offset column is not a packing over the hull (it may use the gaps read as alive)" in err


def test_capacity_reaches_the_searching_planner_only(capsys, tmp_path):
    """``--capacity`` asks exact the decision question; planners that do not search are not
    given it. Best plans these 576 bytes (the optimum is 448): 600 is met at once."""
    records = [
        TensorUsageRecord("t0", 2, 4, 128),
        TensorUsageRecord("t1", 3, 3, 256),
        TensorUsageRecord("t2", 4, 6, 128),
        TensorUsageRecord("t3", 1, 2, 192),
        TensorUsageRecord("t4", 3, 5, 64),
        TensorUsageRecord("t5", 5, 7, 256),
    ]
    path = tmp_path / "trap.csv"
    write_records(records, path)
    argv = ["--records", str(path), "--planners", "exact,greedy_by_size", "--alignment", "64", "--capacity", "600"]
    status, document, _ = run_json(capsys, *argv)
    assert status == 0
    notes = {row["planner"]: row["notes"] for row in document["sources"][0]["plans"]}
    assert notes["exact"]["capacity"] == 600 and notes["exact"]["capacity_met"]
    assert notes["exact"]["stopped"] == "capacity met"
    assert "capacity" not in notes["greedy_by_size"]


@pytest.mark.parametrize("spelling", ["one flag", "repeated flag", "both"])
def test_several_record_files(capsys, tmp_path, spelling):
    paths = []
    for name in ("one", "two", "three"):
        paths.append(str(tmp_path / f"{name}.csv"))
        write_records([TensorUsageRecord("a", 0, 1, 64)], paths[-1])
    argv = {
        "one flag": ["--records", *paths],
        "repeated flag": [part for path in paths for part in ("--records", path)],
        "both": ["--records", *paths[:2], "--records", paths[2]],
    }[spelling]
    status, document, _ = run_json(capsys, *argv, "--planners", "naive")
    assert status == 0
    assert [source["name"] for source in document["sources"]] == ["one", "two", "three"]


def test_table_for_a_person(capsys, fake_zoo):
    assert main(["plan", "--model", "tiny", "--planners", "naive,greedy_by_size"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, *rows = lines[:3]
    assert header.split() == [
        "MODEL",
        "PLANNER",
        "TENSORS",
        "TOTAL",
        "TOTAL",
        "BYTES",
        "LOWER",
        "BOUND",
        "RATIO",
        "TIME",
    ]
    assert [row.split()[:2] for row in rows] == [["tiny", "naive"], ["tiny", "greedy_by_size"]]
    assert len({len(line) for line in lines[:3]}) == 1  # aligned: every row as wide as the header
    for row in rows:
        total_bytes = int(row[header.index("TOTAL BYTES") : header.index("LOWER BOUND")].strip().replace(",", ""))
        assert format_bytes(total_bytes) in row  # human-readable size beside the byte count
    assert any(line.startswith("tiny: 1 graph output(s)") for line in lines)


def test_a_model_that_cannot_be_captured_is_one_line_and_the_rest_still_run(capsys, fake_zoo):
    status = main(["plan", "--all", "--planners", "greedy_by_size", "--json"])
    captured = capsys.readouterr()
    assert status == 1  # a failure makes the exit status non-zero, at the end
    (line,) = captured.err.strip().splitlines()  # one line, no torch.export graph dump
    assert "'broken'" in line and "GuardOnDataDependentSymNode" in line
    sources = {s["name"]: s for s in json.loads(captured.out)["sources"]}
    assert sources["broken"]["plans"] == [] and "cannot capture model 'broken'" in sources["broken"]["errors"][0]
    assert sources["tiny"]["errors"] == [] and sources["tiny"]["plans"][0]["planner"] == "greedy_by_size"


def test_batch_reaches_the_example_inputs(capsys, fake_zoo):
    status, document, _ = run_json(capsys, "--model", "tiny", "--planners", "naive", "--batch", "64")
    assert status == 0 and fake_zoo.batches == [64]
    # batch 64 of width 16 float32 is 4 KiB: the hidden activation is planned at that size
    assert document["sources"][0]["lower_bound"] >= 64 * 16 * 4


def test_a_batch_its_inputs_cannot_be_made_at_is_one_line_and_the_rest_still_run(capsys, tmp_path, fake_zoo):
    """torch's error making the inputs (an int64 overflow here; past memory, an allocation
    failure) ended the whole command in a traceback."""
    good = tmp_path / "good.csv"
    good.write_text("id,lower,upper,size\nx,0,1,64\n")
    status, document, err = run_json(
        capsys, "--model", "tiny", "--records", str(good), "--planners", "naive", "--batch", str(10**20)
    )
    assert status == 1
    (line,) = err.splitlines()
    assert line.startswith(
        "srbench plan: model 'tiny': cannot make its example inputs at batch 100,000,000,000,000,000,000: TypeError: "
    )
    sources = {s["name"]: s for s in document["sources"]}
    assert sources["good"]["plans"] and not sources["tiny"]["plans"]


def test_a_csv_whose_sizes_sum_past_int64_is_refused_once_naming_the_file(capsys, tmp_path):
    """Each planner refused it in turn: one line per planner, none naming the file."""
    huge, good = tmp_path / "huge.csv", tmp_path / "good.csv"
    huge.write_text(f"id,lower,upper,size\na,0,1,{2**62}\nb,5,6,{2**62}\n")  # never alive together
    good.write_text("id,lower,upper,size\nx,0,1,64\n")
    status, document, err = run_json(
        capsys, "--records", str(huge), str(good), "--planners", "naive,greedy_by_size", "--alignment", "1"
    )
    assert status == 1
    assert err.splitlines() == [
        f"srbench plan: {huge}: 2 records need {2**63} bytes in all (sizes rounded up to 1), beyond the largest "
        f"slab ({2**63 - 1}); the largest: 'a' ({2**62} bytes), 'b' ({2**62} bytes)"
    ]
    sources = {s["name"]: s for s in document["sources"]}
    assert len(sources["good"]["plans"]) == 2 and not sources["huge"]["plans"]


def test_two_sources_of_one_name_are_a_usage_error_before_planning(capsys, tmp_path, fake_zoo):
    """The second ``x.csv`` overwrote the first's saved records (``--save-records``), and the
    table showed two rows named ``x``."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second, model = tmp_path / "a" / "x.csv", tmp_path / "b" / "x.csv", tmp_path / "tiny.csv"
    for path in (first, second, model):
        path.write_text("id,lower,upper,size\nx,0,1,64\n")
    saved = tmp_path / "saved"
    for argv, message in [
        (
            ["--records", str(first), str(second)],
            f"two sources are named 'x': {first} and {second}; expected distinct names "
            "(results and saved records are filed by name)",
        ),
        (["--records", str(first), "--records", str(first)], f"{first} given twice; expected each source once"),
        (["--model", "tiny", "--model", "tiny"], "model 'tiny' given twice; expected each source once"),
        (["--model", "tiny", "--records", str(model)], f"two sources are named 'tiny': model 'tiny' and {model};"),
    ]:
        assert main(["plan", *argv, "--planners", "naive", "--save-records", str(saved)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        (line,) = captured.err.splitlines()
        assert line.startswith(f"srbench plan: {message}")
    assert not saved.exists()


def test_a_planner_plugin_that_fails_is_one_line_and_the_other_planners_still_run(capsys, tmp_path, monkeypatch):
    """A plugin's own error (or a None for a plan) ended the whole command in a traceback."""
    from srbench.planners import PLANNERS

    def broken(records, *, alignment=64):
        return len(records) // 0

    known = PLANNERS.entry_points()
    planted = type("EntryPoint", (), {"load": staticmethod(lambda: broken)})()
    monkeypatch.setattr(PLANNERS, "entry_points", lambda: {**known, "broken": planted})
    good = tmp_path / "good.csv"
    good.write_text("id,lower,upper,size\nx,0,1,64\n")
    status, document, err = run_json(capsys, "--records", str(good), "--planners", "broken,naive")
    assert status == 1
    assert err.splitlines() == [
        "srbench plan: good: planner 'broken' failed: ZeroDivisionError in the planner: integer division or modulo "
        "by zero"
    ]
    assert [row["planner"] for row in document["sources"][0]["plans"]] == ["naive"]


def test_bad_csv_is_reported_and_other_sources_still_run(capsys, tmp_path, fake_zoo):
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\nx,0,1,-5\n")
    status, document, err = run_json(capsys, "--model", "tiny", "--records", str(bad), "--planners", "naive")
    assert status == 1
    assert "bad.csv" in err and "size" in err
    sources = {s["name"]: s for s in document["sources"]}
    assert sources["tiny"]["plans"] and not sources["bad"]["plans"]


def test_unknown_planner_and_model_are_usage_errors_in_one_line_each(capsys, fake_zoo):
    assert main(["plan", "--model", "tiny", "--planners", "greedy_by_sise"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("srbench plan: unknown planner 'greedy_by_sise'; did you mean 'greedy_by_size'")
    assert main(["plan", "--model", "tiny", "--model", "tiyn", "--planners", "naive"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # no empty table, nothing planned
    assert captured.err.splitlines() == [
        "srbench plan: unknown model 'tiyn'; did you mean 'tiny'? (known: broken, tiny)"
    ]


def test_exit_status_is_2_when_nothing_could_run_and_1_when_some_sources_failed(capsys, tmp_path, fake_zoo):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"id,lower,upper,size\nx,0,1,\xff\n")
    assert main(["plan", "--records", str(bad), "--planners", "naive"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"srbench plan: {bad}:2: not UTF-8 text (byte 0xff); expected a UTF-8 CSV file"  # the file named once
    ]
    assert main(["plan", "--model", "tiny", "--records", str(bad), "--planners", "naive"]) == 1
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1
    assert "bad.csv" not in captured.out and "tiny" in captured.out  # the error is said once, on stderr


def test_save_records_defaults_to_a_folder_under_results(capsys, tmp_path, monkeypatch, fake_zoo):
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--model", "tiny", "--planners", "naive", "--save-records"]) == 0
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.csv")] == ["results/records/tiny.csv"]


def test_a_plan_at_the_lower_bound_is_marked_proven_optimal(capsys, fake_zoo):
    status, document, _ = run_json(capsys, "--model", "tiny", "--planners", "naive,greedy_by_size,best")
    assert status == 0
    (source,) = document["sources"]
    proven = {row["planner"]: row["proven_optimal"] for row in source["plans"]}
    at_bound = {row["planner"]: row["total_bytes"] == source["lower_bound"] for row in source["plans"]}
    assert proven == at_bound and proven["best"] and proven["greedy_by_size"]


def test_nothing_to_plan_is_an_error(capsys):
    assert main(["plan"]) == 2
    assert "nothing to plan" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--batch", "0"],
        ["--time-limit", "-1"],
        ["--time-limit", "inf"],
        ["--time-limit", "nan"],
        ["--planners", ","],
        ["--capacity", "0"],
        ["--capacity", "1.5"],
    ],
)
def test_bad_option_values_are_rejected(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--model", "mlp", *argv])
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.splitlines()  # one line, as every srbench problem: no usage dump
    assert (
        line.startswith("srbench plan: argument ") and "expected" in line and line.endswith("(see srbench plan --help)")
    )


def test_an_unknown_command_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["plna"])
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("srbench: argument COMMAND: invalid choice: 'plna'")
