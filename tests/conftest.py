"""Fixtures shared by the test modules.

``static_options`` parametrizes a test over every combination of the static runtime's switches
(out variants, cleanup, managed outputs, decompose); ``conformance`` runs PyTorch Static Runtime's
test protocol on a model under given options and compares everything eager does (outputs, inputs
after the call, which outputs alias which inputs and outputs); ``reachability`` is the
brute-force happens-before oracle of the scheduler tests; ``two_branch_model`` the multistream
tests' smallest model with independent branches; ``fused_layers_first`` has transformer layers
prepared as eager's fused kernel; ``cuda_issued`` has multistream programs written for CUDA
streams and run on the CPU with stand-in streams and events.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs
from srbench.measure.aliasing import aliasing
from srbench.measure.equivalence import compare
from srbench.measure.layout import layout_difference
from srbench.options import id_parts
from srbench.runtimes import intra_op_threads
from srbench.schedulers import Schedule
from srbench.static import StaticModule, StaticOptions
from srbench.static.stream_code import StreamMode
from srbench.static.stream_runner import CudaStreams

ALL_STATIC_OPTIONS = [
    StaticOptions(
        enable_out_variant=out, cleanup_activations=cleanup, manage_output_tensors=manage, decompose=decompose
    )
    for out, cleanup, manage, decompose in itertools.product((True, False), repeat=4)
]


def static_options_id(options: StaticOptions) -> str:
    return "-".join(id_parts(options))


@pytest.fixture(params=ALL_STATIC_OPTIONS, ids=static_options_id)
def static_options(request: pytest.FixtureRequest) -> StaticOptions:
    """Every combination of enable_out_variant, cleanup_activations, manage_output_tensors and decompose."""
    return request.param


@pytest.fixture(
    params=[options for options in ALL_STATIC_OPTIONS if not options.manage_output_tensors], ids=static_options_id
)
def static_options_caller_owned_outputs(request: pytest.FixtureRequest) -> StaticOptions:
    """The combinations whose outputs are the caller's (``manage_output_tensors`` off): managed
    outputs are valid only until the runtime's next run, whichever thread makes it."""
    return request.param


class CudaTrace:
    """Stand-ins for CUDA streams and events that run nothing and record what they are asked."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.main = FakeStream(self, "main")
        self.current = self.main

    def set_stream(self, stream: FakeStream) -> None:
        self.log.append(("set", stream.name))
        self.current = stream

    def current_stream(self) -> FakeStream:
        return self.current

    def record_stream(self, tensor: torch.Tensor, stream: FakeStream) -> None:
        self.log.append(("record_stream", stream.name))

    def cuda_streams(self, device: torch.device, side: int, events: int) -> CudaStreams:
        return CudaStreams(
            [FakeStream(self, f"side{i + 1}") for i in range(side)],
            [FakeEvent(self, f"ev{i}") for i in range(events)],
            lambda: FakeEvent(self, "join"),
            self.set_stream,
            self.current_stream,
            self.record_stream,
        )


class FakeStream:
    def __init__(self, trace: CudaTrace, name: str):
        self.trace, self.name = trace, name

    def wait_event(self, event: FakeEvent) -> None:
        self.trace.log.append(("wait", self.name, event.name))


class FakeEvent:
    def __init__(self, trace: CudaTrace, name: str):
        self.trace, self.name = trace, name

    def record(self, stream: FakeStream) -> None:
        self.trace.log.append(("record", self.name, stream.name))


@pytest.fixture
def cuda_issued(monkeypatch: pytest.MonkeyPatch) -> CudaTrace:
    """Multistream programs prepared from here on are CUDA programs (one thread issuing every op,
    switching streams), run on the CPU with stand-in streams and events: what they were asked is
    in the returned trace's ``log`` (the real CUDA tests need a GPU)."""
    trace = CudaTrace()
    monkeypatch.setattr(StreamMode, "for_device", classmethod(lambda cls, device: cls.CUDA))
    monkeypatch.setattr(CudaStreams, "on", staticmethod(trace.cuda_streams))
    return trace


@pytest.fixture
def fused_layers_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eager's fused ``nn.TransformerEncoderLayer`` kernel proposed before the lean attention,
    which otherwise takes its regions (:mod:`srbench.static.passes.lean_attention`): the program
    the prepare-time choice measures the lean one against, and the op with results and scratch
    but no out kernel that tests of serving exercise."""
    from srbench.static import module
    from srbench.static.passes import FUSED_LAYER_PASSES

    monkeypatch.setattr(module, "PASSES", FUSED_LAYER_PASSES)


@pytest.fixture
def rewrites_measured_as(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[tuple]]:
    """Make the prepare-time comparisons of rewritten programs (:mod:`srbench.static.rewrite_choice`)
    answer stand-in timings instead of timing, so that choices do not depend on the machine's load:
    the n-th comparison answers the n-th of the answers given (the last again once they run out),
    each a :class:`~srbench.static.timing.Comparison` or a pair of steady seconds per call (first
    program, second) over the fewest rounds a comparison decides on. The candidates each
    comparison was asked about are recorded in the list returned."""
    from srbench.static import rewrite_choice
    from srbench.static.timing import MIN_ROUNDS, Comparison

    def measured_as(*answers: tuple[float, float] | Comparison) -> list[tuple]:
        calls: list[tuple] = []
        comparisons = [
            answer if isinstance(answer, Comparison) else Comparison(*((seconds,) * MIN_ROUNDS for seconds in answer))
            for answer in answers
        ]

        def compare(module: StaticModule, candidates: tuple, inputs: Any, threshold: float) -> Comparison:
            calls.append(candidates)
            return comparisons[min(len(calls), len(comparisons)) - 1]

        monkeypatch.setattr(rewrite_choice, "compare", compare)
        return calls

    return measured_as


@pytest.fixture
def one_thread() -> Iterator[None]:
    with intra_op_threads(1):  # the machine is shared; parallel kernels only add noise
        yield


def _exact(actual: Any, expected: Any, what: str) -> None:
    for (path, got), (_, want) in zip(
        pytree.tree_flatten_with_path(actual)[0], pytree.tree_flatten_with_path(expected)[0]
    ):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True, msg=f"{what} {pytree.keystr(path)}")


@pytest.fixture(scope="session")
def output_aliasing() -> Callable[[Any, Inputs], list[tuple[str, list[str]]]]:
    """``output_aliasing(outputs, inputs)``: :func:`aliasing`, for tests with protocols of their own."""
    return aliasing


Protocol = Callable[..., StaticModule]


@pytest.fixture
def conformance(one_thread: None) -> Protocol:
    """``conformance(model, first, second, options, *, rtol, atol)``: PyTorch Static Runtime's
    protocol. ``first`` and ``second`` are calls (:class:`Inputs`, or tuples of positional
    arguments). The runtime is prepared on ``first`` and run on ``first``, on ``second`` (another
    shape) and on ``first`` again, each time on fresh copies of the inputs (memory sharing kept),
    beside eager on its own copies: the outputs must agree; the inputs must end as eager leaves
    them (unchanged unless the model itself writes them); outputs must alias the inputs and each
    other as eager's do, and be laid out with eager's strides (:mod:`srbench.measure.layout`);
    and, unless outputs are managed, an output the caller still holds must survive the next run.
    Returns the prepared module."""

    def run(
        model: torch.nn.Module,
        first: Inputs | tuple,
        second: Inputs | tuple,
        options: StaticOptions,
        *,
        rtol: float = 1e-5,
        atol: float = 1e-6,
    ) -> StaticModule:
        first, second = Inputs.coerce(first), Inputs.coerce(second)
        module = StaticModule(model, first.clone(), options)
        runtime = module.runtime()
        held: list[tuple[Any, Any]] = []
        for index, inputs in enumerate((first, second, first), start=1):
            eager_inputs, runtime_inputs = inputs.clone(), inputs.clone()
            with torch.no_grad():
                expected = eager_inputs.call(model)
            got = runtime_inputs.call(runtime)
            compare(got, expected, rtol=rtol, atol=atol, run=f"run {index}")
            _exact(
                (runtime_inputs.args, runtime_inputs.kwargs),
                (eager_inputs.args, eager_inputs.kwargs),
                f"run {index}: input",
            )
            assert aliasing(got, runtime_inputs) == aliasing(expected, eager_inputs), f"run {index}: aliasing differs"
            assert (difference := layout_difference(got, expected)) is None, f"run {index}: {difference}"
            if not options.manage_output_tensors:
                for output, saved in held:
                    _exact(output, saved, f"run {index}: an output of an earlier run")
                held.append((got, pytree.tree_map_only(torch.Tensor, torch.clone, got)))
        return module

    return run


def _reachability(schedule: Schedule) -> Callable[[str], set[str]]:
    """The ops reachable from an op through same-stream successions and waits, found by a plain
    search: the oracle the vector clocks of ``HappensBefore`` are tested against."""
    successors: dict[str, set[str]] = {op: set() for ops in schedule.streams for op in ops}
    for ops in schedule.streams:
        for a, b in itertools.pairwise(ops):
            successors[a].add(b)
    for wait in schedule.waits:
        successors[wait.producer].add(wait.consumer)

    def after(op: str) -> set[str]:
        seen: set[str] = set()
        stack = [op]
        while stack:
            for nxt in successors[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    return after


@pytest.fixture(scope="session")
def reachability() -> Callable[[Schedule], Callable[[str], set[str]]]:
    """``reachability(schedule)(op)``: the ops a schedule orders after ``op`` (brute force)."""
    return _reachability


class _TwoBranches(torch.nn.Module):
    """Two MLP branches of one input, added: the smallest graph with ops that may run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.left = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 32))
        self.right = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.left(x) + self.right(x)


@pytest.fixture(scope="session")
def two_branch_model() -> Callable[[], torch.nn.Module]:
    """``two_branch_model()``: a new two-branch MLP taking ``[batch, 32]`` inputs."""
    return _TwoBranches
