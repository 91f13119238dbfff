"""Schedulers: the registry, each strategy on hand-made graphs, the schedule validator (a bad
schedule is rejected before anything runs, naming the two ops), the graph built from a captured
model, and properties on random DAGs (hypothesis)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from srbench.graph import capture
from srbench.memory.lifetimes import analyze_lifetimes
from srbench.registry import UnknownPluginError
from srbench.schedulers import (
    SCHEDULERS,
    CostModel,
    CrossStreamWait,
    HappensBefore,
    OpGraph,
    OpGraphError,
    Schedule,
    ScheduleError,
    check_schedule,
    schedule_graph,
    scheduler_names,
)
from srbench.schedulers.critical_path import bottom_levels
from srbench.schedulers.from_fx import op_graph
from srbench.schedulers.parallel_steps import levels
from srbench.schedulers.schedule import build_schedule
from srbench.schedulers.timeline import SerialResource, estimate

# A cost model without overheads, so expected schedules follow from the op costs alone.
FREE = CostModel(dispatch_seconds=0.0, wait_seconds=0.0, stream_seconds=0.0, cores=4.0, contention_seconds=0.0)
IDLE_TWO_CORES = CostModel(cores=2.0)


def graph_of(deps: dict[str, str], costs: dict[str, float] | None = None, model: CostModel = FREE) -> OpGraph:
    """An op graph from ``{"op": "dep1 dep2"}`` (ops in insertion order)."""
    return OpGraph(
        tuple(deps), {op: frozenset(d.split()) for op, d in deps.items()}, costs or dict.fromkeys(deps, 1.0), model
    )


# a1 -> a2 and b1 -> b2 are independent branches of x, joined by c
TWO_BRANCHES = {"x": "", "a1": "x", "a2": "a1", "b1": "x", "b2": "b1", "c": "a2 b2"}


def test_the_registry_lists_the_schedulers_and_suggests_names():
    assert {"sequential", "parallel_steps", "critical_path"} <= set(scheduler_names())
    with pytest.raises(UnknownPluginError, match="did you mean 'critical_path'"):
        schedule_graph(graph_of(TWO_BRANCHES), "critical_pth", streams=2)


@pytest.mark.parametrize("streams", [0, -1, 1.5, True])
def test_streams_must_be_a_positive_integer(streams):
    with pytest.raises(ValueError, match="streams must be a positive integer"):
        schedule_graph(graph_of(TWO_BRANCHES), "sequential", streams=streams)


def test_an_op_graph_must_list_dependencies_first():
    with pytest.raises(OpGraphError, match="op 'a' depends on 'b', which does not come before it"):
        graph_of({"a": "b", "b": ""})


def test_sequential_runs_the_graph_order_on_one_stream():
    schedule = schedule_graph(graph_of(TWO_BRANCHES), "sequential", streams=4)
    assert schedule.streams == (tuple(TWO_BRANCHES),)
    assert schedule.waits == ()
    assert schedule.order == tuple(TWO_BRANCHES)


def test_parallel_steps_groups_ops_with_no_path_between_them():
    graph = graph_of(TWO_BRANCHES)
    assert levels(graph) == {"x": 0, "a1": 1, "b1": 1, "a2": 2, "b2": 2, "c": 3}
    schedule = schedule_graph(graph, "parallel_steps", streams=2)
    assert schedule.streams == (("x", "a1", "a2", "c"), ("b1", "b2"))
    # steps run one after the other: b1 waits for x, b2 for a1, c for b2 (and a2 for b1: step 2 after step 1)
    assert set(schedule.waits) == {
        CrossStreamWait("x", "b1"),
        CrossStreamWait("b1", "a2"),
        CrossStreamWait("a1", "b2"),
        CrossStreamWait("b2", "c"),
    }
    assert schedule.notes["steps"] == 4


def test_parallel_steps_caps_the_ops_per_step():
    graph = graph_of({f"o{i}": "" for i in range(5)})
    schedule = schedule_graph(graph, "parallel_steps", streams=4, max_ops_per_step=2)
    assert schedule.streams == (("o0", "o2", "o4"), ("o1", "o3"))
    assert schedule.notes == {"steps": 3, "max_ops_per_step": 2}
    assert schedule_graph(graph, "parallel_steps", streams=4, max_ops_per_step=1).num_streams == 1


def test_critical_path_runs_heavy_branches_side_by_side():
    costs = {"x": 1e-6, "a1": 1e-3, "a2": 1e-3, "b1": 1e-3, "b2": 1e-3, "c": 1e-6}
    schedule = schedule_graph(graph_of(TWO_BRANCHES, costs, IDLE_TWO_CORES), "critical_path", streams=4)
    streams = {frozenset(ops) for ops in schedule.streams}
    assert schedule.num_streams == 2
    assert frozenset({"a1", "a2"}) <= next(s for s in streams if "a1" in s)
    assert "b1" not in next(s for s in streams if "a1" in s)
    by_streams = schedule.notes["estimated_seconds_by_streams"]
    assert by_streams[2] < 0.6 * by_streams[1]
    assert schedule.notes["estimated_seconds"] == by_streams[2]


def test_critical_path_keeps_branches_too_small_to_pay_on_one_stream():
    costs = dict.fromkeys(TWO_BRANCHES, 2e-6)  # each op about as long as a wake-up
    schedule = schedule_graph(graph_of(TWO_BRANCHES, costs, IDLE_TWO_CORES), "critical_path", streams=4)
    assert schedule.streams == (tuple(TWO_BRANCHES),)
    assert schedule.notes["estimated_seconds"] == schedule.notes["estimated_seconds_by_streams"][1]


def test_critical_path_keeps_one_stream_when_no_core_is_free():
    """Heavy branches, but the machine runs one kernel at a time (its cores are busy): two
    streams would only add their costs."""
    costs = {"x": 1e-6, "a1": 1e-3, "a2": 1e-3, "b1": 1e-3, "b2": 1e-3, "c": 1e-6}
    schedule = schedule_graph(graph_of(TWO_BRANCHES, costs, CostModel(cores=1.0)), "critical_path", streams=4)
    assert schedule.num_streams == 1


def test_critical_path_keeps_one_stream_when_streams_fight_over_the_gil():
    """Ops of 20 us, but each dispatch costs 30 us more when two threads take turns at the GIL
    (a loaded machine): concurrency would only slow the run down."""
    costs = dict.fromkeys(TWO_BRANCHES, 20e-6)
    model = CostModel(cores=2.0, contention_seconds=30e-6)
    assert schedule_graph(graph_of(TWO_BRANCHES, costs, model), "critical_path", streams=2).num_streams == 1
    idle = CostModel(cores=2.0, contention_seconds=0.0, wait_seconds=1e-6, stream_seconds=1e-6)
    assert schedule_graph(graph_of(TWO_BRANCHES, costs, idle), "critical_path", streams=2).num_streams == 2


def test_bottom_levels_follow_the_longest_chain():
    costs = {"x": 1.0, "a1": 5.0, "a2": 1.0, "b1": 1.0, "b2": 1.0, "c": 1.0}
    assert bottom_levels(graph_of(TWO_BRANCHES, costs)) == {"c": 1, "a2": 2, "b2": 2, "a1": 7, "b1": 3, "x": 8}


# -- the validator -------------------------------------------------------------------------------


def two_streams(waits: tuple[CrossStreamWait, ...], a=("x", "a1", "a2", "c"), b=("b1", "b2")) -> Schedule:
    order = ("x", "a1", "b1", "a2", "b2", "c")
    return Schedule("hand-made", (a, b), waits, order)


GOOD_WAITS = (CrossStreamWait("x", "b1"), CrossStreamWait("b2", "c"))


def test_a_correct_hand_made_schedule_passes():
    order = check_schedule(graph_of(TWO_BRANCHES), two_streams(GOOD_WAITS))
    assert order.before("x", "b2") and order.before("b2", "c") and order.before("a1", "c")
    assert not order.before("a1", "b1") and not order.before("b1", "a1") and not order.before("a1", "a1")


def test_a_missing_event_is_rejected_naming_both_ops():
    with pytest.raises(ScheduleError, match=r"op 'c' may start before 'b2', which it depends on") as caught:
        check_schedule(graph_of(TWO_BRANCHES), two_streams(GOOD_WAITS[:1]))
    assert caught.value.ops == ("b2", "c")
    assert "no event orders stream 1 before it on stream 0" in str(caught.value)


def test_a_wrong_order_on_one_stream_is_rejected_naming_both_ops():
    schedule = two_streams(GOOD_WAITS, a=("x", "a2", "a1", "c"))
    with pytest.raises(ScheduleError, match=r"op 'a2' may start before 'a1'.*comes before 'a1' on stream 0"):
        check_schedule(graph_of(TWO_BRANCHES), schedule)


def test_waiting_in_a_circle_is_a_deadlock():
    waits = (*GOOD_WAITS, CrossStreamWait("a2", "b1"), CrossStreamWait("b1", "a1"))
    with pytest.raises(ScheduleError, match="deadlock") as caught:
        check_schedule(graph_of(TWO_BRANCHES), two_streams(waits))
    assert set(caught.value.ops) >= {"a1", "b1"}


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ((("x", "a1", "a2", "c"), ("b1",)), "op 'b2' is not scheduled"),
        ((("x", "a1", "a2", "c"), ("b1", "b2", "a1")), "op 'a1' is scheduled twice"),
        ((("x", "a1", "a2", "c"), ("b1", "b2", "zz")), "op 'zz' is not in the graph"),
        ((("x", "a1", "a2", "c"), ("b1", "b2"), ()), "stream 2 has no ops"),
    ],
)
def test_schedules_that_do_not_run_each_op_once_are_rejected(streams, message):
    with pytest.raises(ScheduleError, match=message):
        check_schedule(graph_of(TWO_BRANCHES), Schedule("hand-made", streams, GOOD_WAITS, tuple(TWO_BRANCHES)))


def test_an_issue_order_against_a_wait_is_rejected():
    schedule = Schedule("hand-made", two_streams(GOOD_WAITS).streams, GOOD_WAITS, ("b1", "x", "a1", "a2", "b2", "c"))
    with pytest.raises(ScheduleError, match="issue order puts 'b1' before 'x'"):
        check_schedule(graph_of(TWO_BRANCHES), schedule)


def test_a_scheduler_plugin_that_breaks_a_dependency_is_rejected_before_anything_runs(monkeypatch):
    def careless(graph, *, streams):  # puts b2 on stream 1 and forgets that c needs it
        return two_streams(GOOD_WAITS[:1])

    monkeypatch.setattr(SCHEDULERS, "load", lambda name: careless)
    with pytest.raises(ScheduleError, match="op 'c' may start before 'b2'") as caught:
        schedule_graph(graph_of(TWO_BRANCHES), "careless", streams=2)
    assert caught.value.ops == ("b2", "c")


def test_a_scheduler_plugin_may_not_use_more_streams_than_allowed(monkeypatch):
    monkeypatch.setattr(SCHEDULERS, "load", lambda name: lambda graph, *, streams: two_streams(GOOD_WAITS))
    with pytest.raises(ScheduleError, match="used 2 streams, more than the 1 allowed"):
        schedule_graph(graph_of(TWO_BRANCHES), "greedy", streams=1)


def test_schedulers_are_offered_no_more_streams_than_ops_can_be_busy(monkeypatch):
    """At most 3 of TWO_BRANCHES' ops can run at once by its bound (6 ops, a chain of 4): a
    million streams asked, the scheduler weighs 3 (critical path tried every count up to it)."""
    offered = []

    def spy(graph, *, streams):
        offered.append(streams)
        return build_schedule("spy", graph, [list(graph.ops)])

    monkeypatch.setattr(SCHEDULERS, "load", lambda name: spy)
    schedule_graph(graph_of(TWO_BRANCHES), "spy", streams=10**6)
    schedule_graph(graph_of({"a": "", "b": "a", "c": "b"}), "spy", streams=8)
    assert offered == [3, 1]


def test_the_concurrency_bound_of_chains_independent_ops_and_nothing():
    assert graph_of({"a": "", "b": "a", "c": "b"}).concurrency_bound() == 1
    assert graph_of({"a": "", "b": "", "c": ""}).concurrency_bound() == 3
    assert OpGraph((), {}, {}).concurrency_bound() == 1


# -- the serial resource and the timeline --------------------------------------------------------


def test_the_serial_resource_books_the_earliest_free_slot():
    gil = SerialResource()
    assert gil.reserve(0.0, 2.0) == 0.0
    assert gil.reserve(5.0, 1.0) == 5.0
    assert gil.reserve(1.0, 2.0) == 2.0  # fits between [0, 2) and [5, 6)
    assert gil.reserve(1.0, 2.0) == 6.0  # [4, 5) is too short
    assert gil.reserve(4.0, 1.0) == 4.0


def test_the_timeline_charges_dispatch_serially_and_waits_across_streams():
    model = CostModel(dispatch_seconds=1.0, wait_seconds=10.0, stream_seconds=100.0, cores=2.0, contention_seconds=0.0)
    graph = graph_of({"x": "", "a": "x", "b": "x"}, {"x": 0.0, "a": 5.0, "b": 5.0}, model)
    schedule = build_schedule("hand-made", graph, [("x", "a"), ("b",)])
    timeline = estimate(graph, schedule)
    assert timeline.start == {"x": 0.0, "a": 1.0, "b": 100.0}  # b: its stream starts 100 late
    assert timeline.seconds == 106.0 + 100.0  # b ends at 106, its stream joins 100 later


# -- the graph of a captured model ---------------------------------------------------------------


class InPlaceThroughAView(torch.nn.Module):
    def forward(self, x):
        h = x.relu()
        v = h.view(-1)
        side = x * 3  # independent of h
        h.add_(1)  # writes what v views: v's reader must follow it, and h's earlier readers precede it
        return v * 2, side


def test_writes_through_aliases_order_the_ops_around_them():
    captured = capture(InPlaceThroughAView(), (torch.randn(2, 3),))
    graph = op_graph(captured.graph, analyze_lifetimes(captured.graph))
    assert graph.ops == ("relu", "view", "mul", "add_", "mul_1")
    assert graph.deps_of("add_") == {"relu", "view"}  # the view read relu's storage before add_ writes it
    assert graph.deps_of("mul_1") == {"view", "add_"}  # reads, through the view, what add_ wrote
    assert graph.deps_of("mul") == frozenset()
    view_only = op_graph(captured.graph, analyze_lifetimes(captured.graph), runs={"relu", "mul", "add_", "mul_1"})
    assert view_only.deps_of("mul_1") == {"relu", "add_"}  # a view made once is looked through


class RandomBranches(torch.nn.Module):
    def forward(self, x):
        return torch.rand_like(x) + x, torch.rand_like(x) * x


def test_random_ops_keep_their_order():
    captured = capture(RandomBranches(), (torch.randn(4),))
    graph = op_graph(captured.graph, analyze_lifetimes(captured.graph))
    first, second = (op for op in graph.ops if op.startswith("rand"))
    assert first in graph.deps_of(second)


def test_costs_rank_a_matmul_above_a_relu():
    captured = capture(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()), (torch.randn(8, 64),))
    graph = op_graph(captured.graph, analyze_lifetimes(captured.graph))
    linear, relu = graph.ops
    assert graph.cost(linear) > graph.cost(relu) > 0
    measured = op_graph(captured.graph, analyze_lifetimes(captured.graph), measured={linear: 42.0})
    assert measured.cost(linear) == 42.0


# -- properties on random DAGs -------------------------------------------------------------------


@st.composite
def random_dags(draw, max_ops: int = 14) -> OpGraph:
    count = draw(st.integers(1, max_ops))
    ops = [f"n{i}" for i in range(count)]
    deps = {op: frozenset(draw(st.sets(st.sampled_from(ops[:i]), max_size=3)) if i else ()) for i, op in enumerate(ops)}
    costs = {op: draw(st.sampled_from([0.0, 1e-6, 1e-5, 1e-4, 1e-3])) for op in ops}
    return OpGraph(tuple(ops), deps, costs)


SCHEDULES = settings(max_examples=60, deadline=None)


@pytest.mark.parametrize("name", scheduler_names())
@SCHEDULES
@given(graph=random_dags(), streams=st.integers(1, 4))
def test_every_schedule_is_valid(name, graph, streams):
    schedule = schedule_graph(graph, name, streams=streams)  # checked inside
    assert sorted(op for ops in schedule.streams for op in ops) == sorted(graph.ops)
    assert schedule.num_streams <= streams


@SCHEDULES
@given(graph=random_dags(), streams=st.integers(2, 4))
def test_critical_path_is_never_estimated_slower_than_one_stream(graph, streams):
    one = estimate(graph, schedule_graph(graph, "sequential", streams=1)).seconds
    schedule = schedule_graph(graph, "critical_path", streams=streams)
    assert schedule.notes["estimated_seconds"] <= one
    assert estimate(graph, schedule).seconds <= one * 1.000001 or schedule.num_streams > 1


@SCHEDULES
@given(graph=random_dags(), data=st.data())
def test_waits_are_the_fewest_and_happens_before_is_reachability(reachability, graph, data):
    """On any assignment of ops to streams, every wait ``build_schedule`` adds is needed, and
    vector clocks agree with a plain search over same-stream successions and waits."""
    streams = data.draw(st.integers(1, 3))
    assignment = {op: data.draw(st.integers(0, streams - 1)) for op in graph.ops}
    per_stream = [[op for op in graph.ops if assignment[op] == s] for s in range(streams)]
    schedule = build_schedule("random", graph, per_stream)
    check_schedule(graph, schedule)
    for dropped in range(len(schedule.waits)):
        fewer = schedule.waits[:dropped] + schedule.waits[dropped + 1 :]
        with pytest.raises(ScheduleError):
            check_schedule(graph, Schedule("random", schedule.streams, fewer, schedule.order))
    order = HappensBefore(schedule)
    reachable = reachability(schedule)
    for a in graph.ops:
        after = reachable(a)
        for b in graph.ops:
            assert order.before(a, b) == (b in after)
        for s, ops in enumerate(schedule.streams):  # first_after: the suffix of each stream after a
            assert [op in after for op in ops] == [i >= order.first_after(a, s) for i in range(len(ops))]


def _width(graph: OpGraph) -> int:
    """The most pairwise unordered ops, by brute force (small graphs only)."""
    before = {op: set() for op in graph.ops}
    for op in graph.ops:
        for dep in graph.deps_of(op):
            before[op] |= before[dep] | {dep}
    best = 0
    for mask in range(1 << len(graph.ops)):
        chosen = [op for i, op in enumerate(graph.ops) if mask >> i & 1]
        if all(a not in before[b] and b not in before[a] for a in chosen for b in chosen if a != b):
            best = max(best, len(chosen))
    return best


@settings(max_examples=60, deadline=None)
@given(graph=random_dags(max_ops=10))
def test_the_concurrency_bound_is_never_below_what_can_run_at_once(graph):
    assert _width(graph) <= graph.concurrency_bound() <= len(graph.ops)
