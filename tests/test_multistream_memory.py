"""Multistream memory plans: lifetimes on a schedule's happens-before order, planned by every
planner unchanged, and the validator of the concurrency rule (naming both tensors).

The central example is a two-branch graph: planned as one stream, its two branches reuse each
other's bytes, which is wrong as soon as the branches run on two streams; planned for the
schedule, they do not. Properties on random DAGs check the records, the validator against a
brute-force reachability check, and plans under random interleavings of the streams' ops.
"""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from srbench.graph import capture
from srbench.memory.concurrency import (
    ConcurrencyError,
    TensorUses,
    check_concurrency,
    concurrent_records,
    plan_concurrent_memory,
)
from srbench.memory.lifetimes import analyze_lifetimes
from srbench.memory.records import MemoryPlan, TensorUsageRecord, validate_plan
from srbench.planners import plan_memory, planner_names
from srbench.schedulers import CrossStreamWait, HappensBefore, OpGraph, Schedule, schedule_graph, scheduler_names
from srbench.schedulers.from_fx import op_graph, tensor_uses
from srbench.schedulers.schedule import build_schedule

PLANNER_OPTIONS: dict[str, dict] = {"exact": {"time_limit": 0.2}}

# x -> a1 -> a2 -> c and x -> b1 -> b2 -> c; each op produces the tensor named after it
BRANCHES = {"x": "", "a1": "x", "a2": "a1", "b1": "x", "b2": "b1", "c": "a2 b2"}
SIZES = {"x": 64, "a1": 4096, "a2": 64, "b1": 4096, "b2": 64, "c": 64}


def uses_of(deps: dict[str, str]) -> dict[str, TensorUses]:
    readers: dict[str, set[str]] = {op: set() for op in deps}
    for op, needs in deps.items():
        for dep in needs.split():
            readers[dep].add(op)
    return {op: TensorUses(op, op, frozenset(r)) for op, r in readers.items()}


def single_stream_records(order: tuple[str, ...], uses: dict[str, TensorUses], sizes: dict[str, int]):
    position = {op: i for i, op in enumerate(order)}
    return [
        TensorUsageRecord(t, position[u.producer], max(position[o] for o in u.ops), sizes[t]) for t, u in uses.items()
    ]


BRANCH_GRAPH = OpGraph(
    tuple(BRANCHES), {op: frozenset(d.split()) for op, d in BRANCHES.items()}, dict.fromkeys(BRANCHES, 1.0)
)
TWO_STREAMS = build_schedule("hand-made", BRANCH_GRAPH, [("x", "a1", "a2", "c"), ("b1", "b2")])


def test_the_two_stream_schedule_is_the_expected_one():
    assert set(TWO_STREAMS.waits) == {CrossStreamWait("x", "b1"), CrossStreamWait("b2", "c")}


def test_a_single_stream_plan_fails_the_concurrency_check_naming_both_tensors():
    uses = uses_of(BRANCHES)
    records = single_stream_records(tuple(BRANCHES), uses, SIZES)
    plan = plan_memory(records, "greedy_by_size").plan
    assert plan.offsets["a1"] == plan.offsets["b1"]  # one stream: b1 reuses a1's bytes
    check_concurrency(records, plan, uses, build_schedule("one", BRANCH_GRAPH, [tuple(BRANCHES)]))  # fine there
    with pytest.raises(ConcurrencyError, match=r"tensors 'a1' \[0, 4096\) and 'b1' \[0, 4096\) share bytes") as caught:
        check_concurrency(records, plan, uses, TWO_STREAMS)
    assert set(caught.value.tensors) == {"a1", "b1"}
    assert "on streams 0 and 1) may run at the same time" in str(caught.value)


@pytest.mark.parametrize("planner", planner_names())
def test_the_multistream_plan_passes_with_every_planner(planner):
    uses = uses_of(BRANCHES)
    records = single_stream_records(tuple(BRANCHES), uses, SIZES)
    result = plan_concurrent_memory(records, uses, TWO_STREAMS, planner, **PLANNER_OPTIONS.get(planner, {}))
    offsets = result.plan.offsets
    assert not (offsets["a1"] < offsets["b1"] + 4096 and offsets["b1"] < offsets["a1"] + 4096)
    check_concurrency(records, result.plan, uses, TWO_STREAMS)
    assert result.plan.total_bytes >= 2 * 4096
    # the bound beside it: the schedule's issue order run on one stream (x a1 a2 b1 b2 c: a1 is
    # dead before b1 is made)
    assert result.lower_bound == 4096 + 64 + 64 <= result.plan.total_bytes


def test_long_branches_get_a_region_per_stream():
    """Two chains of 4096-byte tensors on two streams: on one region every tensor would stay alive
    until the join (the other stream may still run beside it); a region per stream lets each
    chain reuse its own bytes as on one stream."""
    deps = {"x": "", **{f"a{i}": f"a{i - 1}" if i > 1 else "x" for i in range(1, 5)}}
    deps |= {f"b{i}": f"b{i - 1}" if i > 1 else "x" for i in range(1, 5)}
    deps["c"] = "a4 b4"
    graph = OpGraph(tuple(deps), {op: frozenset(d.split()) for op, d in deps.items()}, dict.fromkeys(deps, 1.0))
    a, b = [op for op in deps if op.startswith("a")], [op for op in deps if op.startswith("b")]
    schedule = build_schedule("hand-made", graph, [["x", *a, "c"], b])
    uses = uses_of(deps)
    records = single_stream_records(schedule.order, uses, {op: 64 if op in ("x", "c") else 4096 for op in deps})
    result = plan_concurrent_memory(records, uses, schedule, "greedy_by_size")
    assert result.plan.notes["layout"] == "a region per stream"
    assert result.plan.total_bytes <= 5 * 4096 + 64  # b4 and x are read by both streams: a region of their own
    one_region = plan_memory(concurrent_records(records, uses, schedule), "greedy_by_size").plan
    assert one_region.total_bytes >= 6 * 4096 > result.plan.total_bytes


def test_multistream_records_span_what_may_run_beside_their_uses():
    uses = uses_of(BRANCHES)
    interleaved = Schedule("hand-made", TWO_STREAMS.streams, TWO_STREAMS.waits, ("x", "a1", "b1", "a2", "b2", "c"))
    records = concurrent_records(single_stream_records(interleaved.order, uses, SIZES), uses, interleaved)
    by_id = {r.id: (r.first, r.last) for r in records}
    # a1 is read by a2 (stream 0); b2 (stream 1, step 4) may still run beside a2
    assert by_id["a1"] == (1, 4)
    assert by_id["b1"] == (2, 4)  # read by b2, the last op before the join
    assert by_id["x"] == (0, 4)  # read by a1, beside which all of stream 1 may run
    assert by_id["c"] == (5, 5)


def test_outputs_live_to_the_end():
    uses = uses_of(BRANCHES)
    records = single_stream_records(tuple(BRANCHES), uses, SIZES)
    concurrent = concurrent_records(records, uses, TWO_STREAMS, live_to_end={"a1"})
    assert next(r for r in concurrent if r.id == "a1").last == len(BRANCHES) - 1
    # c may reuse a1's bytes (a1's uses, a1 and a2, both come before c on stream 0) unless a1
    # is an output, which must outlive the run
    plan = MemoryPlan("hand-made", {"x": 0, "a1": 64, "b1": 4160, "a2": 8256, "b2": 8320, "c": 64}, 8384)
    check_concurrency(records, plan, uses, TWO_STREAMS)
    with pytest.raises(ConcurrencyError, match=r"tensors .a1. .* and .c. .* share bytes, but .a1. is a graph output"):
        check_concurrency(records, plan, uses, TWO_STREAMS, live_to_end={"a1"})


def test_uses_by_unscheduled_ops_are_an_error():
    uses = {**uses_of(BRANCHES), "a1": TensorUses("a1", "a1", frozenset({"ghost"}))}
    with pytest.raises(ValueError, match="tensor 'a1' is used by op 'ghost', which is not scheduled"):
        concurrent_records([TensorUsageRecord("a1", 0, 1, 64)], uses, TWO_STREAMS)


def test_a_captured_two_branch_model(two_branch_model):
    """The same story on a real graph: its single-stream plan is unsafe on the two-stream
    schedule, and its multistream plan is safe, with every planner."""
    captured = capture(two_branch_model(), (torch.randn(8, 32),))
    analysis = analyze_lifetimes(captured.graph)
    graph = op_graph(captured.graph, analysis)
    schedule = schedule_graph(graph, "parallel_steps", streams=2)
    assert schedule.num_streams == 2
    uses = tensor_uses(captured.graph, analysis, set(graph.ops))
    assert {r.id for r in analysis.records} <= set(uses)
    single = plan_memory(analysis.records, "greedy_by_size").plan
    with pytest.raises(ConcurrencyError):
        check_concurrency(analysis.records, single, uses, schedule)
    outputs = {r.id for r in analysis.output_records}
    for planner in planner_names():
        result = plan_concurrent_memory(
            analysis.records, uses, schedule, planner, live_to_end=outputs, **PLANNER_OPTIONS.get(planner, {})
        )
        assert result.plan.total_bytes >= single.total_bytes


# -- properties on random DAGs -------------------------------------------------------------------


@st.composite
def random_cases(draw, max_ops: int = 12):
    """A random DAG whose every op makes one tensor read by its dependents, and a random
    assignment of its ops to streams (in graph order per stream)."""
    count = draw(st.integers(1, max_ops))
    ops = [f"n{i}" for i in range(count)]
    deps = {op: frozenset(draw(st.sets(st.sampled_from(ops[:i]), max_size=3)) if i else ()) for i, op in enumerate(ops)}
    graph = OpGraph(tuple(ops), deps, {op: draw(st.sampled_from([1e-6, 1e-4, 1e-3])) for op in ops})
    streams = draw(st.integers(1, 4))
    assignment = {op: draw(st.integers(0, streams - 1)) for op in ops}
    schedule = build_schedule("random", graph, [[op for op in ops if assignment[op] == s] for s in range(streams)])
    uses = uses_of({op: " ".join(sorted(d)) for op, d in deps.items()})
    sizes = {op: draw(st.sampled_from([0, 64, 128, 1000, 4096])) for op in ops}
    outputs = {op for op in ops if draw(st.booleans()) and not uses[op].readers}
    return graph, schedule, uses, sizes, outputs


CASES = settings(max_examples=60, deadline=None)


def brute_force_conflict(reachability, records, plan, uses, schedule, outputs) -> bool:
    """Some two tensors share a byte without every use of one reaching the other's producer
    through same-stream successions and waits (searched, not computed with clocks)."""
    after = reachability(schedule)

    def ordered(earlier, later):
        return earlier not in outputs and all(uses[later].producer in after(op) for op in uses[earlier].ops)

    sized = [r for r in records if r.size]
    for i, a in enumerate(sized):
        for b in sized[i + 1 :]:
            oa, ob = plan.offsets[a.id], plan.offsets[b.id]
            if oa < ob + b.size and ob < oa + a.size and not ordered(a.id, b.id) and not ordered(b.id, a.id):
                return True
    return False


@pytest.mark.parametrize("planner", ["greedy_by_size", "linear_scan", "naive", "storage_groups", "best"])
@CASES
@given(case=random_cases())
def test_multistream_plans_are_safe_under_every_planner(reachability, planner, case):
    _, schedule, uses, sizes, outputs = case
    records = single_stream_records(schedule.order, uses, sizes)
    result = plan_concurrent_memory(records, uses, schedule, planner, live_to_end=outputs)
    assert not brute_force_conflict(reachability, records, result.plan, uses, schedule, outputs)


@CASES
@given(case=random_cases(), seed=st.integers(0, 2**32 - 1))
def test_the_validator_agrees_with_brute_force(reachability, case, seed):
    _, schedule, uses, sizes, outputs = case
    records = single_stream_records(schedule.order, uses, sizes)
    rng = random.Random(seed)
    plan = MemoryPlan("random", {r.id: 64 * rng.randrange(4) for r in records}, 64 * 3 + 4096)
    conflict = brute_force_conflict(reachability, records, plan, uses, schedule, outputs)
    try:
        check_concurrency(records, plan, uses, schedule, live_to_end=outputs)
    except ConcurrencyError as error:
        assert conflict, str(error)
        assert len(error.tensors) == 2
    else:
        assert not conflict


@CASES
@given(case=random_cases())
def test_multistream_lifetimes_contain_the_issue_orders_lifetimes(case):
    """Planning for several streams only ever lengthens lifetimes over the schedule's own order
    run on one stream; with one stream they are exactly those."""
    _, schedule, uses, sizes, _ = case
    plain = {r.id: r for r in single_stream_records(schedule.order, uses, sizes)}
    for record in concurrent_records(list(plain.values()), uses, schedule):
        assert record.first == plain[record.id].first
        assert record.last >= plain[record.id].last
        if schedule.num_streams == 1:
            assert record.last == plain[record.id].last


@CASES
@given(case=random_cases(), seed=st.integers(0, 2**32 - 1))
def test_no_tensor_is_overwritten_under_random_interleavings(case, seed):
    """Run the schedule as streams would, in a random interleaving: an op may start once its
    stream predecessor and the ops it waits for have finished, and several may be running at
    once. Each op, when it starts, claims its tensor's bytes; no byte may be claimed while a
    tensor that holds it still has a use that has not finished."""
    graph, schedule, uses, sizes, outputs = case
    records = single_stream_records(schedule.order, uses, sizes)
    plan = plan_concurrent_memory(records, uses, schedule, "greedy_by_size", live_to_end=outputs).plan
    rng = random.Random(seed)
    waits_for: dict[str, set[str]] = {}
    for wait in schedule.waits:
        waits_for.setdefault(wait.consumer, set()).add(wait.producer)
    heads = [0] * schedule.num_streams
    running: set[str] = set()
    finished: set[str] = set()
    holding: dict[str, set[str]] = {}  # tensor -> its uses not finished yet
    while len(finished) < len(graph.ops):
        can_start = [
            ops[heads[s]]
            for s, ops in enumerate(schedule.streams)
            if heads[s] < len(ops)
            and (heads[s] == 0 or ops[heads[s] - 1] in finished)
            and ops[heads[s]] not in running
            and waits_for.get(ops[heads[s]], set()) <= finished
        ]
        if running and (not can_start or rng.random() < 0.5):
            op = rng.choice(sorted(running))
            running.discard(op)
            finished.add(op)
            for pending in holding.values():
                pending.discard(op)
            continue
        op = rng.choice(can_start)
        running.add(op)
        heads[schedule.stream_of()[op]] += 1
        tensor = uses[op].id
        if sizes[tensor]:
            mine = range(plan.offsets[tensor], plan.offsets[tensor] + sizes[tensor])
            for other, pending in holding.items():
                theirs = range(plan.offsets[other], plan.offsets[other] + sizes[other])
                clash = pending or other in outputs
                assert not (clash and mine.start < theirs.stop and theirs.start < mine.stop), (tensor, other)
            holding[tensor] = set(uses[tensor].ops)
    assert all(dep in finished for dep in graph.ops)


def test_one_stream_gives_the_single_stream_records_back():
    uses = uses_of(BRANCHES)
    one = build_schedule("one", BRANCH_GRAPH, [tuple(BRANCHES)])
    records = single_stream_records(tuple(BRANCHES), uses, SIZES)
    assert concurrent_records(records, uses, one) == records
    validate_plan(records, plan_concurrent_memory(records, uses, one).plan)
    assert isinstance(HappensBefore(one), HappensBefore)
    assert set(scheduler_names()) >= {"sequential"}
