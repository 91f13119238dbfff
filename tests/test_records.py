"""The one validator every plan goes through, and the checks that keep bad records out."""

from __future__ import annotations

import pytest

from srbench.memory.records import (
    MAX_SLAB_BYTES,
    MAX_STEP,
    MemoryPlan,
    PlanError,
    RecordError,
    TensorUsageRecord,
    align_up,
    check_records,
    lower_bound,
    validate_plan,
)
from srbench.planners import plan_memory, planner_names

A = TensorUsageRecord("a", 0, 2, 128)
B = TensorUsageRecord("b", 1, 3, 64)
C = TensorUsageRecord("c", 3, 4, 128)  # alive after a: may share a's bytes


def plan_of(offsets: dict[str, int], total: int) -> MemoryPlan:
    return MemoryPlan(planner="hand", offsets=offsets, total_bytes=total)


def test_a_correct_plan_passes():
    validate_plan([A, B, C], plan_of({"a": 0, "b": 128, "c": 0}, 192))


def test_overlapping_tensors_sharing_bytes_are_named():
    with pytest.raises(PlanError, match=r"'a' \[0, 128\) and 'b' \[64, 128\)") as error:
        validate_plan([A, B], plan_of({"a": 0, "b": 64}, 192))
    assert set(error.value.tensors) == {"a", "b"}


def test_overlap_is_found_beyond_the_nearest_neighbour():
    # d covers a and b's bytes; b is found even though a sits between them in offset order.
    d = TensorUsageRecord("d", 2, 2, 512)
    with pytest.raises(PlanError) as error:
        validate_plan([A, B, d], plan_of({"a": 0, "b": 128, "d": 0}, 512))
    assert "d" in error.value.tensors


def test_tensors_alive_at_different_steps_may_share_bytes():
    validate_plan([A, C], plan_of({"a": 0, "c": 0}, 128))


def test_touching_lifetimes_share_a_step():
    # b's last step is 3 and c's first is 3: both are alive at step 3.
    with pytest.raises(PlanError, match=r"'b'.*'c'|'c'.*'b'"):
        validate_plan([B, C], plan_of({"b": 0, "c": 0}, 128))


def test_misaligned_offset_is_rejected():
    with pytest.raises(PlanError, match=r"tensor 'b' offset 160 is not aligned to 64") as error:
        validate_plan([A, B], plan_of({"a": 0, "b": 160}, 224))
    assert error.value.tensors == ("b",)
    # the same offset is fine under a coarser-grained check
    validate_plan([A, B], plan_of({"a": 0, "b": 160}, 224), alignment=32)


def test_total_too_small_is_rejected():
    with pytest.raises(PlanError, match=r"tensor 'b' ends at byte 192, past the total 180"):
        validate_plan([A, B], plan_of({"a": 0, "b": 128}, 180))


def test_missing_offset_is_rejected():
    with pytest.raises(PlanError, match=r"no offset for tensor 'b'"):
        validate_plan([A, B], plan_of({"a": 0}, 192))


def test_unknown_tensor_in_the_plan_is_rejected():
    with pytest.raises(PlanError, match=r"unknown tensors \['ghost'\]"):
        validate_plan([A], plan_of({"a": 0, "ghost": 128}, 256))


@pytest.mark.parametrize("offset", [-64, 64.0, "64", True])
def test_offset_must_be_a_non_negative_int(offset):
    with pytest.raises(PlanError, match=r"tensor 'a' has bad offset"):
        validate_plan([A], plan_of({"a": offset}, 1024))


def test_overflowing_total_is_rejected():
    huge = TensorUsageRecord("huge", 0, 0, MAX_SLAB_BYTES - 63)
    more = TensorUsageRecord("more", 0, 0, 128)
    offsets = {"huge": 0, "more": align_up(huge.size)}
    with pytest.raises(PlanError, match=r"total .* is not a byte count"):
        validate_plan([huge, more], plan_of(offsets, offsets["more"] + 128))


def test_records_whose_total_overflows_int64_are_refused_before_planning_with_their_sizes():
    # Two tensors of just over 2**62 bytes: together beyond the largest slab, whatever the plan.
    big = [TensorUsageRecord(f"t{i}", 2 * i, 2 * i, 2**62 + 64) for i in range(2)]
    expected = rf"2 records need {2**63 + 128} bytes in all .* the largest: 't0' \({2**62 + 64} bytes\), 't1'"
    with pytest.raises(RecordError, match=expected):
        check_records(big)
    with pytest.raises(RecordError, match=expected):
        plan_memory(big, "greedy_by_size")


def test_the_total_counts_sizes_rounded_up_to_the_alignment():
    # 2**63 - 1 bytes in all fit unaligned; rounded up to 64 they do not.
    records = [TensorUsageRecord("a", 0, 0, 2**62), TensorUsageRecord("b", 0, 0, 2**62 - 1)]
    check_records(records)
    with pytest.raises(RecordError, match=r"rounded up to 64"):
        check_records(records, alignment=64)
    with pytest.raises(RecordError, match=r"'a' \(4611686018427387904 bytes\)"):
        plan_memory(records, "naive", alignment=64)


@pytest.mark.parametrize(
    "records, message",
    [
        ([TensorUsageRecord("n", 0, 1, -8)], r"record 'n': negative size -8"),
        ([TensorUsageRecord("i", 5, 2, 64)], r"record 'i': inverted lifetime, last step 2 is before first step 5"),
        ([A, TensorUsageRecord("a", 3, 4, 64)], r"duplicate record id 'a'"),
        ([TensorUsageRecord("s", -1, 1, 64)], r"record 's': negative first step -1"),
        ([TensorUsageRecord("f", 0, 1, 64.0)], r"record 'f': size must be an int, got 64.0"),
        ([TensorUsageRecord("x", 0, 1, MAX_SLAB_BYTES + 1)], r"record 'x': size .* exceeds the largest slab"),
        ([A, ("b", 1, 3, 64)], r"records\[1\] is a tuple, expected a TensorUsageRecord\(id, first, last, size\)"),
        ([{"id": "a", "first": 0, "last": 1, "size": 8}], r"records\[0\] is a dict, expected a TensorUsageRecord"),
        ("ab", r"records\[0\] is a str, expected a TensorUsageRecord"),
        ([A, TensorUsageRecord(1, 0, 1, 8)], r"records\[1\]: id must be a str, got int 1"),
        ([TensorUsageRecord(None, 0, 1, 8)], r"records\[0\]: id must be a str, got NoneType None"),
    ],
)
def test_check_records_rejects_bad_records(records, message):
    with pytest.raises(RecordError, match=message):
        check_records(records)
    for planner in planner_names():  # every planner call goes through the check first
        with pytest.raises(RecordError, match=message):
            plan_memory(records, planner)


def test_lower_bound_is_the_most_bytes_alive_at_one_step():
    assert lower_bound([]) == 0
    assert lower_bound([A, B, C]) == 192  # steps 1-2: a + b; step 3: b + c
    assert lower_bound([A, C]) == 128


@pytest.mark.parametrize("alignment", [0, -3, 1.5, True])
def test_the_validator_refuses_an_alignment_that_is_not_a_positive_whole_number(alignment):
    records = [TensorUsageRecord("a", 0, 1, 10)]
    with pytest.raises(ValueError, match=rf"alignment must be a positive whole number of bytes, got {alignment!r}"):
        validate_plan(records, MemoryPlan("x", {"a": 0}, 10), alignment)


@pytest.mark.parametrize("name", planner_names())
def test_steps_beyond_the_largest_are_refused_before_planning_naming_the_record(name):
    records = [TensorUsageRecord("a", 0, 2**63 - 1, 8), TensorUsageRecord("b", 2**63 - 1, 2**63 - 1, 8)]
    with pytest.raises(RecordError, match=r"record 'a': last step 9223372036854775807 is beyond the largest step"):
        plan_memory(records, name)
    at_the_largest = [TensorUsageRecord("a", 0, MAX_STEP, 8), TensorUsageRecord("b", MAX_STEP, MAX_STEP, 8)]
    assert plan_memory(at_the_largest, name).plan.total_bytes == 72
