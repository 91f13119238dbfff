"""Generated hard instances: reproducible from their seed, of MiniMalloc's sizes, and each with a
packing within its capacity that srbench's validator accepts."""

from __future__ import annotations

import pytest

from benchmarks import hard_instances
from srbench.cli import main
from srbench.memory.instances import MAX_BUFFERS, MIN_BUFFERS, hard_instance, write_instance
from srbench.memory.minimalloc_csv import read_instance, read_records
from srbench.memory.records import MemoryPlan, lower_bound, validate_plan
from srbench.planners import greedy_by_size

SEEDS = range(12)


def witness_plan(instance) -> MemoryPlan:
    total = max(instance.witness[r.id] + r.size for r in instance.records)
    return MemoryPlan(planner="witness", offsets=instance.witness, total_bytes=total)


def test_the_same_seed_gives_the_same_instance_and_others_differ():
    assert hard_instance(7) == hard_instance(7)
    assert hard_instance(7).records != hard_instance(8).records
    assert hard_instance(3, buffers=200) == hard_instance(3, buffers=200)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_witness_is_a_valid_packing_within_the_capacity(seed):
    instance = hard_instance(seed)
    plan = witness_plan(instance)
    validate_plan(instance.records, plan, alignment=1)
    assert plan.total_bytes <= instance.capacity
    assert lower_bound(instance.records) <= instance.capacity


def test_the_records_do_not_list_the_witness_in_order():
    """Records sorted by lifetime and then by witness offset would hand the packing to any solver
    that breaks ties by input order (CP-SAT's lowest-min branching fit seed 46 that way, and
    none with the records shuffled): among records of the same lifetime, the witness offsets
    must go up and down in record order."""
    rising = falling = 0
    for seed in SEEDS:
        instance = hard_instance(seed)
        last_offset: dict[tuple[int, int], int] = {}
        for record in instance.records:
            lifetime, offset = (record.first, record.last), instance.witness[record.id]
            if lifetime in last_offset:
                rising += offset > last_offset[lifetime]
                falling += offset < last_offset[lifetime]
            last_offset[lifetime] = offset
    assert rising > 10 and falling > 10, (rising, falling)


def test_sizes_are_drawn_from_150_to_500_buffers_or_as_asked():
    counts = [len(hard_instance(seed).records) for seed in range(40)]
    assert all(MIN_BUFFERS <= count <= MAX_BUFFERS for count in counts)
    assert max(counts) - min(counts) > 150  # drawn, not one size
    assert len(hard_instance(0, buffers=321).records) == 321


def test_the_instances_are_hard_for_greedy_planners_as_minimalloc_s_are():
    """Greedy by size needs more than the capacity on most of them (1.2-1.4x on MiniMalloc's)."""
    ratios = [
        greedy_by_size.plan(list(instance.records), alignment=1).total_bytes / instance.capacity
        for instance in map(hard_instance, SEEDS)
    ]
    assert sum(ratio > 1.1 for ratio in ratios) >= len(ratios) // 2, ratios


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"buffers": 0}, "buffers must be 1 to"),
        ({"buffers": 10**6}, "buffers must be 1 to"),
        ({"capacity": 1000}, "multiples of the granularity"),
        ({"max_removed": 1.0}, "max_removed must be in"),
    ],
)
def test_impossible_shapes_are_refused_with_the_reason(options, message):
    with pytest.raises(ValueError, match=message):
        hard_instance(0, **options)


def test_written_as_minimalloc_csv_with_the_witness_as_offset_column(tmp_path):
    instance = hard_instance(5)
    path = write_instance(instance, tmp_path)
    assert path.name == f"cut-5.{instance.capacity}.csv"
    assert read_records(path) == list(instance.records)
    assert read_instance(path).offsets == instance.witness  # the file's packing, read back


def test_the_instances_command_writes_one_file_per_seed(tmp_path, capsys):
    assert main(["instances", "--count", "3", "--first-seed", "10", "--buffers", "150", "--out", str(tmp_path)]) == 0
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written == [f"cut-{seed}.1048576.csv" for seed in (10, 11, 12)]
    assert capsys.readouterr().out.split() == [str(tmp_path / name) for name in written]
    assert read_records(tmp_path / written[0]) == list(hard_instance(10, buffers=150).records)


def test_the_instances_command_refuses_a_negative_seed_naming_it(tmp_path, capsys):
    """``--first-seed -5`` was taken and failed in numpy, reported as "--buffers None: expected
    non-negative integer"."""
    with pytest.raises(SystemExit) as exited:
        main(["instances", "--count", "1", "--first-seed", "-5", "--out", str(tmp_path)])
    assert exited.value.code == 2
    assert "argument --first-seed: expected a non-negative integer, got '-5'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_instances_command_names_a_bad_buffer_count(tmp_path, capsys):
    assert main(["instances", "--count", "1", "--buffers", "9999999", "--out", str(tmp_path)]) == 2
    assert "srbench instances: --buffers 9999999: buffers must be 1 to" in capsys.readouterr().err


def test_the_benchmark_generates_the_seeds_and_size_asked():
    instances = hard_instances.generated(3, first_seed=500, buffers=160)
    assert [instance.name for instance in instances] == ["cut-500", "cut-501", "cut-502"]
    assert [len(instance.records) for instance in instances] == [160] * 3
    assert instances[1] == hard_instance(501, buffers=160)
    assert len({len(instance.records) for instance in hard_instances.generated(4)}) > 1  # drawn by default


@pytest.mark.parametrize("limit", ["inf", "0", "abc"])
def test_the_benchmark_refuses_a_time_limit_exact_would_refuse(limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    # As `srbench plan --time-limit`: an infinite limit would let a search at a capacity it cannot
    # meet run forever; refused before any instance is made, naming the option.
    with pytest.raises(SystemExit) as refused:
        hard_instances.main(["--count", "1", "--time-limit", limit])
    assert refused.value.code == 2
    assert "--time-limit: expected a positive finite number" in capsys.readouterr().err
