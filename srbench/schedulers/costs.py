"""What running ops on several streams costs: a small machine model for schedulers.

Whether a branch pays on a stream of its own depends on how long its ops take against what
concurrency costs: every op is dispatched from Python holding the GIL (on CUDA, launched from
one host thread), so dispatch is serial whatever the number of streams; a cross-stream wait
costs a thread wake-up (an event on CUDA); each extra stream costs a hand-off when a run starts
and a join when it ends. :class:`CostModel` holds those figures; :func:`estimate_seconds`
estimates an op's kernel time from its FakeTensor shapes when no measured time is at hand
(FLOPs from :mod:`torch.utils.flop_counter`, bytes from the tensors it reads and writes).

The default figures were measured on this project's machines (torch 2.13, one intra-op thread;
``python -m srbench.schedulers.costs`` measures them again): a 32x256x512 ``mm`` ran at about
170 GFLOP/s, a 16 MB ``add`` at about 30 GB/s, a tiny op with ``out=`` cost about 2 us to call,
and a lock hand-off between two threads about 2.5 us each way (5 us a round trip). Waits are
charged more than a bare hand-off: a woken thread must also take the GIL back.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where it is used: the cost model itself is plain data
    import torch
    import torch.fx


@dataclass(frozen=True)
class CostModel:
    """Seconds per op dispatch (serial: GIL or host thread), per cross-stream wait, per extra
    stream (start hand-off and join), the rates used to estimate kernels from shapes,
    ``cores``: how many kernels can really run at once (the machine's cores when it is idle;
    about one when other processes keep every core busy), and ``contention_seconds``: what each
    dispatch costs more when several streams take turns at the GIL (a thread that gives the GIL
    up waits until the next one has taken it: microseconds on an idle machine, far more when the
    next thread first has to wait for a core)."""

    dispatch_seconds: float = 3e-6
    contention_seconds: float = 2e-6
    wait_seconds: float = 10e-6
    stream_seconds: float = 10e-6
    flops_per_second: float = 150e9
    bytes_per_second: float = 25e9
    cores: float = float(os.cpu_count() or 1)


DEFAULT_COST_MODEL = CostModel()
# A CUDA device: every op is a kernel launch from the one host thread (a few microseconds), a
# wait is an event, and kernels run at a GPU's rates. Nominal figures for a recent data-centre
# GPU, not measured here (this project's machines have none); only their ratios steer scheduling.
CUDA_COST_MODEL = CostModel(
    dispatch_seconds=5e-6,
    wait_seconds=2e-6,
    stream_seconds=4e-6,
    flops_per_second=20e12,
    bytes_per_second=1.5e12,
)


def _meta_tensors(value: object) -> list[torch.Tensor]:
    import torch
    from torch.utils import _pytree as pytree

    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _in_one_fake_mode(values: Any) -> tuple[Any, Any]:
    """``values`` with every FakeTensor remade, by its geometry, in one new fake mode, and that
    mode (``None`` where a size is symbolic). A rewrite gives every op node metadata of a fake
    mode of its own (:func:`srbench.static.passes.apply._refresh_metadata`), the graph's inputs
    keep export's, so an op reading an input and an op's result has arguments of two modes,
    which no op runs on (``F.normalize``'s ``expand_as`` beside a rewritten convolution:
    preparing failed under ``streams``)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.utils import _pytree as pytree

    from srbench.memory.lifetimes import has_static_geometry

    fakes = [leaf for leaf in pytree.tree_leaves(values) if isinstance(leaf, FakeTensor)]
    if not all(has_static_geometry(fake) for fake in fakes):
        return None, values
    mode = FakeTensorMode()

    def remade(fake: torch.Tensor) -> torch.Tensor:
        with mode:
            return torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype, device=fake.device)

    return mode, pytree.tree_map_only(FakeTensor, remade, values)


def node_flops(node: torch.fx.Node) -> int:
    """FLOPs of one op of a captured graph, counted by :class:`torch.utils.flop_counter.FlopCounterMode`
    running the op on the node's FakeTensor arguments (composite ops such as ``linear`` and
    ``conv2d`` decompose to the counted ones). 0 when it cannot run fake or counts nothing."""
    import torch
    import torch.fx
    from torch._guards import detect_fake_mode
    from torch.utils.flop_counter import FlopCounterMode

    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return 0
    if any("val" not in argument.meta for argument in node.all_input_nodes):
        return 0  # an input without metadata (a constant a rewrite added): nothing to run fake on
    args = torch.fx.node.map_arg(node.args, lambda arg: arg.meta.get("val"))
    kwargs = torch.fx.node.map_arg(node.kwargs, lambda arg: arg.meta.get("val"))
    try:
        fake_mode = detect_fake_mode(_meta_tensors((args, tuple(kwargs.values()))))
    except AssertionError:  # FakeTensors of two modes: remade in one
        fake_mode, (args, kwargs) = _in_one_fake_mode((args, kwargs))
    if fake_mode is None:
        return 0
    try:
        with fake_mode, FlopCounterMode(display=False) as counter:
            node.target(*args, **kwargs)
    except Exception:  # an op that will not run on fake values counts no FLOPs; its bytes still do
        return 0
    return int(counter.get_total_flops())


def _tensor_bytes(tensor: torch.Tensor) -> int:
    """``numel * itemsize``; a size that depends on the data (an unbacked symbol: ``nonzero``,
    boolean-mask indexing) counts at its proved upper bound, 0 when unbounded, as the memory
    estimate counts it: comparing the symbol itself would guard on the data and fail."""
    from srbench.estimate.sizes import is_data_dependent, tensor_bytes

    if is_data_dependent(tensor):
        return tensor_bytes(tensor).nbytes
    return tensor.numel() * tensor.element_size()


def node_bytes(node: torch.fx.Node) -> int:
    """Bytes an op reads and writes: its tensor arguments and results, from FakeTensor metadata."""
    touched = _meta_tensors(node.meta.get("val"))
    for argument in node.all_input_nodes:
        touched += _meta_tensors(argument.meta.get("val"))
    return sum(_tensor_bytes(t) for t in touched)


def estimate_seconds(node: torch.fx.Node, model: CostModel = DEFAULT_COST_MODEL) -> float:
    """Estimated kernel time of an op: its FLOPs at the model's rate plus its bytes at the
    model's bandwidth (a roofline sum: crude, but it ranks a convolution above a ReLU of the
    same output, which is what scheduling needs)."""
    return node_flops(node) / model.flops_per_second + node_bytes(node) / model.bytes_per_second


def measure_cost_model(repeats: int = 200) -> CostModel:
    """The machine's figures, measured now with one intra-op thread (best of ``repeats``)."""
    import torch

    def best(fn, times: int = repeats) -> float:
        result = float("inf")
        for _ in range(times):
            start = time.perf_counter()
            fn()
            result = min(result, time.perf_counter() - start)
        return result

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a, w, o = torch.randn(32, 256), torch.randn(256, 512), torch.empty(32, 512)
        flops = 2 * 32 * 256 * 512 / best(lambda: torch.mm(a, w, out=o))
        x = torch.randn(1 << 22)
        y = torch.empty_like(x)
        bandwidth = 2 * x.numel() * 4 / best(lambda: torch.add(x, 1, out=y), 20)
        tiny, tiny_out = torch.randn(4), torch.empty(4)
        dispatch = best(lambda: [torch.add(tiny, 1, out=tiny_out) for _ in range(100)], 20) / 100
    finally:
        torch.set_num_threads(previous)
    handoff = handoff_seconds()
    return CostModel(
        dispatch_seconds=dispatch,
        wait_seconds=2 * handoff,
        stream_seconds=2 * handoff,
        flops_per_second=flops,
        bytes_per_second=bandwidth,
    )


# the machine as measured within one :func:`machine_measured_once` block, by thread count
_MEASURED: ContextVar[dict[int, tuple[float, float]] | None] = ContextVar("srbench_measured_machine", default=None)


@contextmanager
def machine_measured_once() -> Iterator[None]:
    """Within the block, :func:`with_measured_machine` measures the machine once per thread
    count: one prepare weighs several candidate programs (with and without rewrites, fused
    layers), each planning streams, and measured each time they cost 50-160 ms more apiece for
    what a moment earlier's measurement says."""
    token = _MEASURED.set({})
    try:
        yield
    finally:
        _MEASURED.reset(token)


def with_measured_machine(model: CostModel, threads: int) -> CostModel:
    """``model`` with what this machine offers now: ``cores`` measured with ``threads`` threads
    (:func:`measured_parallelism`), the GIL's contention (:func:`measured_contention`), waits
    and extra streams charged at least a thread hand-off.
    On an idle machine two threads run two kernels at once; on one whose cores other processes
    keep busy they take turns, and concurrency only adds its costs: measured at prepare time,
    the scheduler sees it and keeps one stream (once per :func:`machine_measured_once` block)."""
    from dataclasses import replace

    measured = _MEASURED.get()
    machine = measured.get(threads) if measured is not None else None
    if machine is None:
        machine = (measured_parallelism(threads), measured_contention())
        if measured is not None:
            measured[threads] = machine
    cores, contention = machine
    handoff = 2 * handoff_seconds(200)
    return replace(
        model,
        wait_seconds=max(model.wait_seconds, handoff),
        stream_seconds=max(model.stream_seconds, handoff),
        cores=cores,
        contention_seconds=contention,
    )


def measured_contention(ops: int = 200, trials: int = 3) -> float:
    """Seconds each op dispatch costs more when two threads dispatch tiny ops at once than when
    one thread dispatches them all (median of ``trials``)."""
    import statistics

    import torch

    source = torch.randn(16)
    outs = [torch.empty(16), torch.empty(16)]

    def chain(count: int, out: torch.Tensor) -> None:
        for _ in range(count):
            torch.add(source, 1, out=out)

    penalties = []
    for _ in range(trials):
        start = time.perf_counter()
        chain(2 * ops, outs[0])
        alone = time.perf_counter() - start
        together = _seconds_on_threads(chain, [(ops, out) for out in outs])
        penalties.append(max(0.0, (together - alone) / (2 * ops)))
    return statistics.median(penalties)


def _seconds_on_threads(target: Callable[..., None], arguments: Sequence[tuple]) -> float:
    """Wall-clock seconds for one thread per entry of ``arguments``, each running ``target``
    on it, all started together, to finish. Each thread first takes the caller's intra-op
    thread count (a new thread's OpenMP count is the machine's, see
    :mod:`srbench.static.stream_runner`) and inference mode (a new thread is never in it, and
    could not write the tensors the caller made under it)."""
    import torch

    threads = torch.get_num_threads()
    inference = torch.is_inference_mode_enabled()

    def run(*args: object) -> None:
        torch.set_num_threads(threads)
        with torch.inference_mode(inference):
            target(*args)

    workers = [threading.Thread(target=run, args=args) for args in arguments]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start


def parallelism(threads: int, alone: float, together: float) -> float:
    """Threads' worth of work done at once, from the seconds one thread took for one share
    (``alone``) and ``threads`` threads for one share each (``together``): between 1 (they took
    turns, or worse) and ``threads`` (all at once; faster than that is noise)."""
    return min(max(threads * alone / together, 1.0), float(threads))


def measured_parallelism(threads: int, trials: int = 3) -> float:
    """How many threads' worth of ATen kernels run at once now: ``threads`` threads each
    running the same matrix products, against one thread running one share; between 1 and
    ``threads`` (best of ``trials``)."""
    import torch

    if threads <= 1:
        return 1.0
    a, b = torch.randn(128, 256), torch.randn(256, 256)
    outs = [torch.empty(128, 256) for _ in range(threads)]

    def work(index: int) -> None:
        for _ in range(8):
            torch.mm(a, b, out=outs[index])

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        best = 1.0
        for _ in range(trials):
            start = time.perf_counter()
            work(0)
            alone = time.perf_counter() - start
            best = max(best, parallelism(threads, alone, _seconds_on_threads(work, [(i,) for i in range(threads)])))
    finally:
        torch.set_num_threads(previous)
    return best


def handoff_seconds(rounds: int = 2000) -> float:
    """One lock hand-off between two threads: half a measured round trip (mean of ``rounds``)."""
    ping, pong = threading.Lock(), threading.Lock()
    ping.acquire()
    pong.acquire()

    def echo() -> None:
        for _ in range(rounds):
            ping.acquire()
            pong.release()

    thread = threading.Thread(target=echo)
    thread.start()
    start = time.perf_counter()
    for _ in range(rounds):
        ping.release()
        pong.acquire()
    elapsed = time.perf_counter() - start
    thread.join()
    return elapsed / rounds / 2


if __name__ == "__main__":
    print(measure_cost_model())
