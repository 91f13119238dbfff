"""The static runtime on several streams: results equal eager whatever the interleaving.

Branches are delayed at random by a test-only op that sleeps (``srbench_test::delay``), so each
run interleaves the streams differently; a branch can also be made to fail, to show the run
stops cleanly and the next one works. The CUDA program is generated and run on the CPU with
stand-in streams and events that record what they are asked (the real CUDA test needs a GPU).
"""

from __future__ import annotations

import builtins
import dis
import gc
import random
import statistics
import threading
import time
from concurrent.futures import Future
from dataclasses import replace

import pytest
import torch

from srbench.memory.concurrency import check_concurrency
from srbench.schedulers import SCHEDULERS, ScheduleError
from srbench.schedulers.from_fx import tensor_uses
from srbench.static import StaticModule, StaticOptions
from srbench.static.codegen import Entry, Hook
from srbench.static.errors import ConcurrentUseError
from srbench.static.stream_code import StreamMode
from srbench.static.stream_runner import ThreadStreams
from srbench.zoo import load_zoo

DELAYS: dict[int, float] = {}
FAILING: set[int] = set()


@torch.library.custom_op("srbench_test::delay", mutates_args=())
def delay(x: torch.Tensor, branch: int) -> torch.Tensor:
    """A copy of ``x`` made after sleeping ``DELAYS[branch]`` seconds (the GIL is free meanwhile);
    raises when ``branch`` is in ``FAILING``."""
    time.sleep(DELAYS.get(branch, 0.0))
    if branch in FAILING:
        raise RuntimeError(f"branch {branch} fails on purpose")
    return x.clone()


@delay.register_fake
def _(x: torch.Tensor, branch: int) -> torch.Tensor:
    return torch.empty_like(x)


class Branches(torch.nn.Module):
    """Four branches of one input, each delayable, summed; the first also returned on its own."""

    def __init__(self, branches: int = 4, width: int = 16):
        super().__init__()
        self.first = torch.nn.ModuleList(torch.nn.Linear(width, 2 * width) for _ in range(branches))
        self.second = torch.nn.ModuleList(torch.nn.Linear(2 * width, width) for _ in range(branches))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outs = []
        for index, (first, second) in enumerate(zip(self.first, self.second)):
            hidden = torch.ops.srbench_test.delay(torch.relu(first(x)), index)
            outs.append(second(hidden))
        return torch.stack(outs).sum(0), outs[0] * 2


@pytest.fixture(autouse=True)
def no_delays():
    DELAYS.clear()
    FAILING.clear()
    yield
    DELAYS.clear()
    FAILING.clear()


def branches_module(streams: int = 2, **options) -> tuple[torch.nn.Module, torch.Tensor, StaticModule]:
    torch.manual_seed(0)
    model = Branches().eval()
    x = torch.randn(3, 16)
    module = StaticModule(model, (x,), StaticOptions(streams=streams, scheduler="parallel_steps", **options))
    assert module.prepared.program.streams is not None
    return model, x, module


@pytest.mark.parametrize("streams", [2, 4])
@pytest.mark.parametrize("out_variants", [True, False], ids=["out", "fallback"])
def test_equal_to_eager_under_random_interleavings(one_thread, streams, out_variants):
    model, x, module = branches_module(streams, enable_out_variant=out_variants)
    assert module.prepared.schedule.num_streams == streams
    expected = model(x)
    runtime = module.runtime()
    rng = random.Random(streams)
    for _ in range(25):
        DELAYS.update({branch: rng.choice([0.0, 0.0, 2e-4, 1e-3]) for branch in range(4)})
        for got, want in zip(runtime(x), expected):
            torch.testing.assert_close(got, want)


def test_far_more_streams_than_ops_can_use_prepare_as_the_most_they_can(one_thread, monkeypatch):
    """``streams=1_000_000`` on four branches: the machine is measured with at most as many
    threads as ops can run at once, and the schedule uses no more (before, critical path weighed
    every count up to a million and the machine was measured with as many threads)."""
    import srbench.static.streams as static_streams

    measured_with = []

    def recording(model, threads):
        measured_with.append(threads)
        return model

    monkeypatch.setattr(static_streams, "with_measured_machine", recording)
    model, x, module = branches_module(1_000_000)
    (threads,) = set(measured_with)  # once per program weighed, each time the same
    assert 4 <= threads < 30  # the 4 branches may run at once; far fewer than the program's ops
    assert module.prepared.schedule.num_streams <= threads
    for got, want in zip(module.runtime()(x), model(x)):
        torch.testing.assert_close(got, want)


def test_a_deliberately_delayed_branch(one_thread):
    """The slow branch finishes last, long after the others reached their waits."""
    model, x, module = branches_module(4)
    expected = model(x)
    runtime = module.runtime()
    for slow in range(4):
        DELAYS.clear()
        DELAYS[slow] = 0.02
        for got, want in zip(runtime(x), expected):
            torch.testing.assert_close(got, want)


def test_the_plan_of_a_prepared_multistream_module_passes_the_concurrency_check():
    _, _, module = branches_module(4)
    prepared = module.prepared
    assert prepared.plan is not None
    ops = {op for ops in prepared.schedule.streams for op in ops}
    uses = tensor_uses(prepared.captured.graph, prepared.analysis, ops)
    planned = [r for r in prepared.analysis.records if r.id in prepared.plan.plan.offsets]
    check_concurrency(planned, prepared.plan.plan, uses, prepared.schedule)


def test_a_failing_stream_fails_the_run_cleanly_and_the_next_run_works(one_thread):
    model, x, module = branches_module(4)
    runtime = module.runtime()
    for branch in range(4):
        FAILING.clear()
        FAILING.add(branch)
        with pytest.raises(RuntimeError, match=f"branch {branch} fails on purpose"):
            runtime(x)
        FAILING.clear()
        for got, want in zip(runtime(x), model(x)):
            torch.testing.assert_close(got, want)


def test_one_runtime_runs_one_call_at_a_time(one_thread):
    _, x, module = branches_module(2)
    runtime = module.runtime()
    runtime(x)  # bound: the next calls go straight to the generated code
    DELAYS[0] = DELAYS[1] = 0.3
    slow = threading.Thread(target=runtime, args=(x,))
    slow.start()
    time.sleep(0.1)
    with pytest.raises(ConcurrentUseError, match="serves one call at a time"):
        runtime(x)
    slow.join()


def test_run_async_returns_futures_that_hold_the_results(one_thread):
    model, x, module = branches_module(2)
    runtime = module.runtime()
    inputs = [torch.randn(3, 16) for _ in range(4)]
    DELAYS[1] = 1e-3
    futures = [runtime.run_async(value) for value in inputs]
    assert all(isinstance(future, Future) for future in futures)
    for future, value in zip(futures, inputs):
        for got, want in zip(future.result(timeout=30), model(value)):
            torch.testing.assert_close(got, want)
    FAILING.add(0)
    with pytest.raises(RuntimeError, match="branch 0 fails on purpose"):
        runtime.run_async(x).result(timeout=30)


def test_run_async_on_one_stream():
    module = StaticModule(torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),))
    value = torch.randn(2, 4)
    torch.testing.assert_close(module.runtime().run_async(value).result(timeout=30), module.model(value))


def _stream_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith("srbench-stream")}


def test_stream_threads_end_with_their_runtime(one_thread):
    _, x, module = branches_module(4)
    before = _stream_threads()
    runtime = module.runtime()
    runtime(x)
    mine = _stream_threads() - before
    assert len(mine) == 3
    del runtime
    gc.collect()
    deadline = time.monotonic() + 5
    while any(thread.is_alive() for thread in mine) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(thread.is_alive() for thread in mine)


def test_stream_threads_of_an_evicted_program_end(one_thread):
    """A program evicted past ``max_signatures`` lets its stream threads go at the runtime's next
    switch of program, not when the runtime is collected."""
    model, _, module = branches_module(4, max_signatures=2, measure_choices=False)
    runtime = module.runtime()
    before = _stream_threads()
    runtime(torch.randn(5, 16))
    evicted = _stream_threads() - before
    assert len(evicted) == 3
    y = torch.randn(7, 16)
    got = runtime(y)  # a third signature: the program for 5 rows goes
    assert module.shapes_prepared == 2
    deadline = time.monotonic() + 5
    while any(thread.is_alive() for thread in evicted) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(thread.is_alive() for thread in evicted)
    torch.testing.assert_close(got, model(y))


def test_every_global_of_the_stream_functions_is_bound():
    _, x, module = branches_module(4)
    runtime = module.runtime()
    bound = runtime.bind((x,))
    code = module.code(module.prepared)
    assert set(code) == {entry.value for entry in Entry} | {"stream_1", "stream_2", "stream_3"}
    provided = set(bound.forward.__globals__)
    for name, function in code.items():
        read = {i.argval for i in dis.get_instructions(function) if i.opname == "LOAD_GLOBAL"}
        assert read - set(dir(builtins)) <= provided, (name, sorted(read - set(dir(builtins)) - provided))
    assert Hook.STREAMS in bound.hooks.streams


def test_the_profiled_variant_runs_the_issue_order_on_one_thread(one_thread):
    _, x, module = branches_module(4)
    profile = module.runtime().profile((x,), iterations=3, warmup=1)
    scheduled = [op for op in module.prepared.schedule.order]
    assert [node.node for node in profile.nodes] == scheduled


def test_a_scheduler_breaking_a_dependency_is_rejected_at_prepare_time(monkeypatch):
    def backwards(graph, *, streams):  # the graph's order reversed on one stream
        from srbench.schedulers import Schedule

        ops = tuple(reversed(graph.ops))
        return Schedule("backwards", (ops,), (), ops)

    monkeypatch.setattr(SCHEDULERS, "load", lambda name: backwards)
    with pytest.raises(ScheduleError, match=r"scheduler 'backwards': op '\w+' may start before '\w+'") as caught:
        StaticModule(Branches().eval(), (torch.randn(3, 16),), StaticOptions(streams=2, scheduler="backwards"))
    assert len(caught.value.ops) == 2  # raised while preparing: no runtime, no run


def test_a_scheduler_keeping_one_stream_gives_the_one_stream_program():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8)).eval()
    x = torch.randn(2, 8)
    module = StaticModule(model, (x,), StaticOptions(streams=4))
    assert module.prepared.schedule is not None and module.prepared.schedule.num_streams == 1
    assert module.prepared.program.streams is None
    plain = StaticModule(model, (x,), StaticOptions())
    assert module.prepared.slab_bytes == plain.prepared.slab_bytes
    torch.testing.assert_close(module.runtime()(x), model(x))


# -- every built-in model ------------------------------------------------------------------------

ZOO = ["mlp", "dlrm", "deep_and_wide", "bert_encoder", "gpt_decoder", "lstm_lm", "transformer_encoder", "small_cnn"]
SLOW_ZOO = ["resnet18", "mobilenet_v2", "resnet50"]


@pytest.mark.parametrize("name", [*ZOO, *(pytest.param(name, marks=pytest.mark.slow) for name in SLOW_ZOO)])
@pytest.mark.parametrize(
    "options",
    [
        StaticOptions(streams=2, scheduler="parallel_steps"),
        StaticOptions(streams=4, scheduler="critical_path", manage_output_tensors=True, cleanup_activations=False),
    ],
    ids=["steps-2", "critical-4-managed"],
)
def test_builtin_models_match_eager_on_several_streams(conformance, name, options):
    case = load_zoo().get(name)
    module = conformance(
        case.model(), case.example_inputs(0), case.example_inputs(1), options, rtol=case.rtol, atol=case.atol
    )
    assert module.prepared.schedule is not None


# -- CUDA ----------------------------------------------------------------------------------------


def test_the_cuda_program_orders_streams_with_events(cuda_issued):
    """The CUDA program, run on the CPU with stand-in streams: results equal eager, every event is
    recorded on its producer's stream before a consumer's stream waits for it, one wait per
    cross-stream wait of the schedule, side streams start after the caller's stream and end
    before it, and the caller's stream is current again at the end."""
    trace = cuda_issued
    model, x, module = branches_module(4, enable_out_variant=False)
    program = module.prepared.program
    assert program.streams.mode is StreamMode.CUDA
    runtime = module.runtime()
    for _ in range(2):
        trace.log.clear()
        for got, want in zip(runtime(x), model(x)):
            torch.testing.assert_close(got, want)
        schedule = module.prepared.schedule
        name_of = {0: "main", **{s: f"side{s}" for s in range(1, schedule.num_streams)}}
        stream_of = schedule.stream_of()
        event_of = {producer: f"ev{i}" for i, producer in enumerate(schedule.events())}
        recorded: dict[str, str] = {}
        waited = []
        for entry in trace.log:
            if entry[0] == "record":
                recorded[entry[1]] = entry[2]
            elif entry[0] == "wait":
                assert entry[2] in recorded, f"{entry} before its event was recorded"
                waited.append((recorded[entry[2]], entry[1], entry[2]))
        for wait in schedule.waits:
            event = event_of[wait.producer]
            assert (name_of[stream_of[wait.producer]], name_of[stream_of[wait.consumer]], event) in waited
        begin = [e for e in trace.log if e[0] == "wait" and e[2] == "join" and e[1] != "main"]
        assert len(begin) == schedule.num_streams - 1  # every side stream waits for the caller's first
        assert trace.log[-1] == ("set", "main") and trace.current is trace.main
        assert ("record_stream", "main") in trace.log or all(stream_of[op] == 0 for op in schedule.order[-1:])


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none is available here")
def test_on_cuda_streams_results_equal_eager():
    torch.manual_seed(0)
    model = Branches(width=256).eval().cuda()
    x = torch.randn(64, 256, device="cuda")
    module = StaticModule(model, (x,), StaticOptions(streams=4, scheduler="parallel_steps"))
    assert module.prepared.program.streams.mode is StreamMode.CUDA
    runtime = module.runtime()
    expected = model(x)
    for _ in range(50):
        DELAYS.update({branch: random.choice([0.0, 1e-4]) for branch in range(4)})
        for got, want in zip(runtime(x), expected):
            torch.testing.assert_close(got, want)
    torch.cuda.synchronize()


# -- a tentative schedule is measured against one stream at prepare time ------------------------


def _with_twin():
    """A multistream program (parallel steps) with its one-stream twin attached, as prepare
    attaches it to a tentative schedule."""

    torch.manual_seed(0)
    model, x = Branches().eval(), torch.randn(3, 16)
    several = StaticModule(model, (x,), StaticOptions(streams=2, scheduler="parallel_steps"))
    one = StaticModule(model, (x,), StaticOptions())
    twin = replace(one.prepared, schedule=several.prepared.schedule)
    return several, replace(several.prepared, one_stream=twin), x


def _streams_measured_as(monkeypatch, comparison):
    """Make the streams' prepare-time comparison answer ``comparison`` (several streams first);
    the candidates it was asked about are recorded in the list returned."""
    from srbench.static import stream_choice

    calls: list[tuple] = []

    def compare(module, candidates, inputs, threshold):
        calls.append(candidates)
        return comparison

    monkeypatch.setattr(stream_choice, "compare", compare)
    return calls


@pytest.mark.parametrize(
    ("several", "one", "kept_streams"),
    [
        ((1.0,) * 8, (2.0,) * 8, 2),
        ((1.0,) * 8, (1.02,) * 8, 1),  # faster, but within the margin
        ((3.0,) * 8, (1.0,) * 8, 1),
        ((0.8, 1.0) * 5, (1.0,) * 10, 1),  # 0.8x in half the rounds: cannot tell, one stream stays
        ((0.9, 0.88, 0.86, 0.91, 0.89) * 2, (1.0,) * 10, 2),  # every round clearly below 0.95
    ],
)
def test_several_streams_are_kept_only_where_measured_clearly_faster(monkeypatch, several, one, kept_streams):
    from srbench.static import stream_choice
    from srbench.static.timing import Comparison

    module, prepared, x = _with_twin()
    calls = _streams_measured_as(monkeypatch, Comparison(several, one))
    kept = stream_choice.keep_faster(module, prepared, (x,))
    assert len(calls) == 1 and kept.streams_used == kept_streams and kept.one_stream is None
    assert kept.schedule.notes["measured_seconds"] == {1: statistics.median(one), 2: statistics.median(several)}


def test_several_streams_are_timed_by_the_wall_clock_even_on_one_intra_op_thread():
    """CPU time would not see what two streams do at once; the one-stream programs are timed by
    it only where every call's work is on the calling thread."""
    from srbench.runtimes import intra_op_threads
    from srbench.static.timing import Clock

    _, prepared, _ = _with_twin()
    several = replace(prepared, one_stream=None)
    with intra_op_threads(1):
        assert Clock.for_candidates((several, prepared.one_stream)) is Clock.WALL
        assert Clock.for_candidates((prepared.one_stream, prepared.one_stream)) is Clock.THREAD_CPU
    with intra_op_threads(2):
        assert Clock.for_candidates((prepared.one_stream, prepared.one_stream)) is Clock.WALL


def test_the_measurement_runs_both_programs_on_copies_of_the_inputs():
    from srbench.static import stream_choice

    module, prepared, x = _with_twin()
    before = x.clone()
    kept = stream_choice.keep_faster(module, prepared, (x,))
    torch.testing.assert_close(x, before, rtol=0, atol=0)
    assert set(kept.schedule.notes["measured_seconds"]) == {1, 2}
    assert all(seconds > 0 for seconds in kept.schedule.notes["measured_seconds"].values())


def _openmp_threads_probe():
    """``omp_get_max_threads`` of the calling thread, read from the OpenMP runtime torch loaded
    (``torch.get_num_threads`` cannot probe it: calling it sets a fresh thread's count)."""
    import ctypes
    from pathlib import Path

    maps = Path("/proc/self/maps")
    lines = maps.read_text().splitlines() if maps.exists() else []
    libraries = {line.split()[-1] for line in lines if "libgomp" in line}
    if not libraries:
        pytest.skip("no GNU OpenMP runtime loaded in this process to probe (torch built without it, or not Linux)")
    return ctypes.CDLL(sorted(libraries)[0]).omp_get_max_threads


def _fresh_thread_count(probe) -> int:
    fresh: list[int] = []
    thread = threading.Thread(target=lambda: fresh.append(probe()))
    thread.start()
    thread.join()
    return fresh[0]


def test_run_async_runs_with_the_callers_intra_op_threads():
    probe = _openmp_threads_probe()
    seen: list[int] = []

    @torch.library.custom_op("srbench_test::record_openmp_threads", mutates_args=())
    def record(x: torch.Tensor) -> torch.Tensor:
        seen.append(probe())
        return x.clone()

    record.register_fake(torch.empty_like)

    class Recorded(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return record(x) * 2

    x = torch.randn(3)
    runtime = StaticModule(Recorded(), (x,)).runtime()
    fresh = _fresh_thread_count(probe)
    previous = torch.get_num_threads()
    try:
        for count in (fresh + 1, 1 if fresh > 1 else 2):
            torch.set_num_threads(count)
            torch.testing.assert_close(runtime.run_async(x).result(timeout=60), x * 2)
            assert seen[-1] == count, (count, seen, fresh)
    finally:
        torch.set_num_threads(previous)


def test_stream_threads_run_with_the_callers_intra_op_threads():
    """A new thread's OpenMP count is the machine's, not ``torch.set_num_threads``'s: each run's
    workers take the caller's count, or two streams oversubscribe the cores."""
    probe = _openmp_threads_probe()
    fresh = _fresh_thread_count(probe)
    seen: list[int] = []
    runner = ThreadStreams([lambda args, mailbox: seen.append(probe())], events=0, mailbox=0)
    previous = torch.get_num_threads()
    try:
        for count in (fresh + 1, 1 if fresh > 1 else 2):
            torch.set_num_threads(count)
            runner.start(())
            runner.join()
            assert seen[-1] == count, (count, seen, fresh)
    finally:
        runner.close()
        torch.set_num_threads(previous)


@pytest.mark.parametrize("check", ["streams2_forced", "streams4_forced"])
@pytest.mark.parametrize("name", ["shared_storage_state", "overlapping_arguments"])
def test_inputs_sharing_a_storage_keep_the_graphs_order_on_several_streams(one_thread, name, check):
    """The outside sweep's models whose graph inputs share a storage (a buffer registered as a
    slice of another, written whole then read; two slices of one tensor as arguments, the first
    written) are separate placeholders: the read of one was scheduled beside (before) the write of
    the other on two streams, and answered the old values. Checked by the sweep's protocol, under
    the sweep's option sets that force the multistream program (the measured ones keep one stream
    on a busy machine, so they never ran it)."""
    from benchmarks import outside_models
    from srbench.measure.equivalence import eager_answer

    case = next(case for case in outside_models.outside_models() if case.name == name)
    calls = [case.make_inputs(0), case.make_inputs(1)]
    options = StaticOptions(**outside_models.OPTION_SETS[check])
    assert StaticModule(case.build(), calls[0].clone(), options).prepared_for(calls[0]).streams_used >= 2
    model = case.build().eval()
    expected = [eager_answer(model, call) for call in calls]
    check_result, _ = outside_models._check_option_set(model, case, calls, expected, options, plugin=False)
    assert check_result.outcome is outside_models.Outcome.EQUIVALENT, check_result.detail


def test_one_prepare_measures_the_machine_once_for_every_program_it_weighs(one_thread, monkeypatch):
    """Each candidate program a prepare weighs plans its streams for the machine; it was measured
    for each (50-160 ms apiece), and is now measured once per thread count within one prepare."""
    import srbench.schedulers.costs as costs
    import srbench.static.streams as static_streams

    weighed, measured = [], []
    monkeypatch.setattr(costs, "measured_parallelism", lambda threads: measured.append(threads) or float(threads))
    monkeypatch.setattr(costs, "measured_contention", lambda: 0.0)

    def counting(model, threads):
        weighed.append(threads)
        return costs.with_measured_machine(model, threads)

    monkeypatch.setattr(static_streams, "with_measured_machine", counting)
    branches_module(2, measure_choices=True)
    assert len(weighed) >= 2  # several programs weighed, streams planned for each
    assert sorted(measured) == sorted(set(weighed))
    branches_module(2, measure_choices=True)  # another prepare measures the machine again
    assert len(measured) == 2 * len(set(weighed))
