"""A call of another structure, leaf kind or dtype than the example's gets a program of its own, as
``torch.compile`` compiles anew where a guard fails: an optional keyword given or not, a list of
another length, float64 or bfloat16 after float32, int32 indices after int64, a float for an int.
What no program can serve is still refused before any op of a program runs: a tensor on another
device, and a call the model itself does not take (named by how it differs from the example)."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch import nn

from srbench.inputs import Inputs
from srbench.observe.static import observe_static
from srbench.options import StaticOptions
from srbench.static import InputSignatureError, StaticModule
from srbench.static.signature import InputSignature

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

QUICK = StaticOptions(measure_choices=False)


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


class Masked(nn.Module):
    """An optional keyword, as transformers' ``attention_mask``."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.linear(x)
        return h if attention_mask is None else h * attention_mask.unsqueeze(-1)


class Elementwise(nn.Module):
    """No parameters: any floating dtype runs; ``scale`` a Python scalar of any type."""

    def forward(self, x: torch.Tensor, scale: float = 2.0, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = x.sin() * scale + x.cumsum(0)
        return h if mask is None else h * mask


class Series(nn.Module):
    """A list whose length is the batch, as TimesFM's ``past_values``; a counter buffer the
    program writes (its runs take turns under the module's state lock)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, series: list[torch.Tensor], offset: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return torch.stack([s.mean() + s.amax() for s in series]) + offset


def _check(runtime, model: nn.Module, calls: list[Inputs]) -> None:
    for inputs in calls:
        with torch.no_grad():
            torch.testing.assert_close(inputs.call(runtime), inputs.call(model))


def test_an_optional_keyword_given_or_not_gets_a_program_of_its_own_and_back() -> None:
    model = Masked().eval()
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    module = StaticModule(model, Inputs.of(x), QUICK, name="masked")
    runtime = module.runtime()
    with_mask = Inputs.of(x, attention_mask=mask)
    _check(runtime, model, [Inputs.of(x), with_mask, Inputs.of(x, attention_mask=None), Inputs.of(x), with_mask])
    assert module.shapes_prepared == 2  # None, the default, is the example's call
    assert module.prepared_for(with_mask) is not module.prepared


def test_a_keyword_the_example_gave_left_out_gets_a_program_of_its_own() -> None:
    model = Masked().eval()
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    module = StaticModule(model, Inputs.of(x, attention_mask=mask), QUICK)
    _check(module.runtime(), model, [Inputs.of(x), Inputs.of(x, attention_mask=mask), Inputs.of(x)])
    assert module.shapes_prepared == 2


def test_a_list_of_another_length_gets_a_program_of_its_own() -> None:
    model = Series()
    module = StaticModule(model, Inputs.of([randn(20)], torch.tensor(1.0)), QUICK)
    runtime = module.runtime()
    calls = [
        Inputs.of([randn(n, seed=n) for n in lengths], torch.tensor(0.5))
        for lengths in ((20,), (32, 17, 25), (20,), (8, 9))
    ]
    _check(runtime, model, calls)
    assert module.shapes_prepared == 3  # the example's (a list of 1 at 20), of 3, of 2
    assert int(model.calls) == 2 * len(calls), "the runtime's calls wrote the counter once each, as eager's"


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_another_floating_dtype_gets_a_program_of_its_own(dtype: torch.dtype) -> None:
    model = Elementwise()
    module = StaticModule(model, Inputs.of(randn(3, 4)), QUICK)
    runtime = module.runtime()
    _check(runtime, model, [Inputs.of(randn(3, 4, seed=1, dtype=dtype)), Inputs.of(randn(3, 4, seed=2))])
    with torch.no_grad():
        assert runtime(randn(3, 4, dtype=dtype)).dtype == dtype
    assert module.shapes_prepared == 2


def test_int32_indices_after_int64_get_a_program_of_their_own() -> None:
    torch.manual_seed(0)
    model = nn.Embedding(10, 4).eval()
    module = StaticModule(model, Inputs.of(torch.tensor([[1, 2, 3]])), QUICK)
    indices = torch.tensor([[4, 0, 9], [1, 1, 2]])
    _check(module.runtime(), model, [Inputs.of(indices.int()), Inputs.of(indices), Inputs.of(indices.int())])
    assert module.shapes_prepared == 3  # the example's, int32 at [2, 3], int64 at [2, 3]


def test_a_float_for_an_int_and_a_tensor_for_a_scalar_get_programs_of_their_own() -> None:
    model = Elementwise()
    x = randn(3, 4)
    module = StaticModule(model, Inputs.of(x, 2), QUICK)
    _check(
        module.runtime(), model, [Inputs.of(x, 2), Inputs.of(x, 2.5), Inputs.of(x, torch.tensor(3.0)), Inputs.of(x, 2)]
    )
    assert module.shapes_prepared == 3


class Counted(nn.Module):
    """Takes a dict with keys ``a`` and ``b``; counts its calls in a buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor, pair: dict[str, torch.Tensor]) -> torch.Tensor:
        self.calls.add_(1)
        return x * pair["a"] + pair["b"]


@pytest.mark.parametrize(
    "inputs, message, cause",
    [
        (
            Inputs.of(randn(3), {"a": randn(3)}),
            r"pair must be a dict with keys \['a', 'b'\], got keys \['a'\]",
            "KeyError: 'b'",
        ),
        (Inputs.of(randn(3)), r"expected 2 positional arguments, got 1", "missing a required argument: 'pair'"),
        (
            Inputs.of(randn(3), {"a": randn(3), "b": randn(3)}, randn(3)),
            "expected 2 positional arguments, got 3",
            "too many",
        ),
        (
            Inputs.of(randn(3), {"a": randn(3), "b": randn(3)}, scale=2.0),
            "keyword arguments differ: unexpected scale",
            "unexpected keyword",
        ),
    ],
    ids=["dict-keys", "missing", "extra", "keyword"],
)
def test_a_call_the_model_does_not_take_names_its_difference_runs_nothing_and_loses_nothing(
    inputs: Inputs, message: str, cause: str
) -> None:
    model = Counted()
    good = Inputs.of(randn(3), {"a": randn(3, seed=1), "b": randn(3, seed=2)})
    module = StaticModule(model, good, QUICK, name="counted")
    runtime = module.runtime()
    good.call(runtime)
    with pytest.raises(
        InputSignatureError, match=rf"model 'counted': {message}, and no program could be prepared"
    ) as info:
        inputs.call(runtime)
    assert cause in str(info.value) and r"expected signature (x: float32[3] on cpu" in str(info.value)
    assert int(model.calls) == 1, "nothing of the model ran"
    assert module.shapes_prepared == 1
    with torch.no_grad():
        torch.testing.assert_close(good.call(runtime), good.call(model))  # the runtime, and the module, still serve
    assert int(model.calls) == 3


def test_a_dtype_an_op_cannot_take_names_the_dtype_and_the_op() -> None:
    model = Masked().eval()  # float32 weights: a float64 input fails in eager too
    module = StaticModule(model, Inputs.of(randn(2, 4)), QUICK, name="masked")
    runtime = module.runtime()
    with pytest.raises(
        InputSignatureError, match=r"x must have dtype torch.float32, got torch.float64, and no program"
    ) as info:
        runtime(randn(2, 4, dtype=torch.float64))
    assert "aten::linear" in str(info.value)
    _check(runtime, model, [Inputs.of(randn(2, 4, seed=3))])


def test_a_tensor_on_another_device_is_still_refused_before_preparing() -> None:
    module = StaticModule(Elementwise(), Inputs.of(randn(3)), QUICK, name="elementwise")
    runtime = module.runtime()
    for inputs, message in (
        (Inputs.of(torch.empty(3, device="meta")), r"x must be on cpu, got meta"),
        (
            Inputs.of(randn(3), mask=torch.empty(3, device="meta")),
            r"mask must be on cpu, got meta",
        ),  # a path the example lacks
    ):
        with pytest.raises(InputSignatureError, match=rf"model 'elementwise': {message}; expected signature"):
            inputs.call(runtime)
    assert module.shapes_prepared == 1


class Counting(nn.Module):
    """Writes a counter buffer at every call: a call that ran any of the program moved it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        self.calls.add_(1)
        return x.sin() if y is None else x.sin() + y


def test_a_call_mixing_devices_is_refused_before_anything_runs() -> None:
    """Prepared on cpu, called on meta or with cpu and meta mixed, as either argument, or an
    optional one on meta: refused by the tensor's path, and neither the program nor a new prepare
    ran (the counter the program writes did not move)."""
    model = Counting()
    module = StaticModule(model, Inputs.of(randn(3), randn(3, seed=1)), QUICK, name="counting")
    runtime = module.runtime()
    meta = torch.empty(3, device="meta")
    model.calls.zero_()
    for inputs, message in (
        (Inputs.of(meta, meta), r"x must be on cpu, got meta"),
        (Inputs.of(randn(3), meta), r"y must be on cpu, got meta"),
        (Inputs.of(meta, randn(3)), r"x must be on cpu, got meta"),
        (Inputs.of(meta), r"x must be on cpu, got meta"),  # another structure: no new program either
    ):
        with pytest.raises(InputSignatureError, match=rf"model 'counting': {message}; expected signature"):
            inputs.call(runtime)
    assert model.calls.item() == 0 and module.shapes_prepared == 1
    _check(runtime, model, [Inputs.of(randn(3, seed=2), randn(3, seed=3))])  # the runtime still serves


def test_a_call_whose_program_would_run_off_the_runtimes_device_is_refused_for_an_example_mixing_devices() -> None:
    """The second check of ``device_difference``: an example on cpu and meta (meta standing in for
    a CUDA device, which this machine lacks: the rule reads only ``device.type``), whose program
    runs on meta (its accelerator), called without its meta tensor. Each tensor is where the
    example's was, but a program for that call would run on cpu; the refusal says so, not that
    the tensor must move (the first check would then refuse it). Called without its cpu tensor,
    the program still runs on meta: served. With the weights on meta, every call runs there."""
    cpu, meta = randn(3), torch.empty(3, device="meta")
    example = InputSignature.of(Inputs.of(x=cpu, y=meta))
    device = torch.device("meta")

    def difference(inputs: Inputs, weights: torch.device | None = None) -> str | None:
        return example.device_difference(InputSignature.of(inputs), device, weights)

    assert difference(Inputs.of(x=randn(3, seed=1), y=meta)) is None
    assert difference(Inputs.of(x=meta, y=meta)) == "x must be on cpu, got meta"
    assert difference(Inputs.of(x=cpu, y=cpu)) == "y must be on meta, got cpu"
    assert difference(Inputs.of(x=cpu)) == (
        "a program for this call would run on cpu (its tensors' and the weights' device), and the runtime's "
        "memory is on meta (where the example's program runs)"
    )
    assert difference(Inputs.of(y=meta)) is None  # y is still on meta, and so is its program
    assert difference(Inputs.of(x=cpu), weights=device) is None  # the weights' device: meta


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device; none is available here")
def test_on_cuda_another_dtype_gets_a_program_and_a_cpu_tensor_is_refused() -> None:
    model = Elementwise()
    x = randn(3, 4).cuda()
    module = StaticModule(model, Inputs.of(x), QUICK, name="elementwise")
    runtime = module.runtime()
    _check(runtime, model, [Inputs.of(x.half()), Inputs.of(x, mask=torch.ones_like(x)), Inputs.of(x)])
    with pytest.raises(InputSignatureError, match=r"model 'elementwise': x must be on cuda:0, got cpu; expected"):
        runtime(x.cpu())
    assert module.shapes_prepared == 3


def test_the_bound_evicts_programs_of_other_structures_and_dtypes_as_of_other_shapes() -> None:
    model = Elementwise()
    x = randn(3, 4)
    module = StaticModule(model, Inputs.of(x), StaticOptions(measure_choices=False, max_signatures=2))
    runtime = module.runtime()
    masked, double = Inputs.of(x, mask=randn(3, 4, seed=1)), Inputs.of(x.double())
    _check(runtime, model, [masked])
    first = module.prepared_for(masked)
    _check(runtime, model, [double])  # past the bound: the mask's program, not the example's, goes
    assert module.evictions == 1 and module.shapes_prepared == 2
    assert not module.holds(first) and module.holds(module.prepared)
    _check(runtime, model, [masked, Inputs.of(x)])  # prepared again, evicting the float64 one
    assert module.evictions == 2 and module.shapes_prepared == 2


def test_threads_sharing_a_module_prepare_and_run_other_structures_at_once() -> None:
    """Two runtimes of one module, each switching between structures its own way while the other
    runs; the program writes the model's counter, so its runs take turns under the state lock,
    and a program prepared meanwhile (its capture calls the model, then puts its state back)
    loses none of the other thread's writes."""
    model = Series()
    module = StaticModule(model, Inputs.of([randn(6)], torch.tensor(0.0)), QUICK)
    calls = [Inputs.of([randn(6, seed=s) for s in range(n)], torch.tensor(float(n))) for n in (1, 2, 3, 4)]
    with torch.no_grad():
        expected = [inputs.call(model) for inputs in calls]
    model.calls.zero_()
    errors: list[BaseException] = []
    rounds = 6

    def work(order: list[int]) -> None:
        runtime = module.runtime()
        try:
            for _ in range(rounds):
                for index in order:
                    torch.testing.assert_close(calls[index].call(runtime), expected[index])
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(order,)) for order in ([0, 1, 2, 3], [3, 2, 1, 0])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert int(model.calls) == 2 * rounds * len(calls)
    assert module.shapes_prepared == 4


class SlowSeries(Series):
    """``Series`` whose Python pauses (the GIL let go) before its ops: the eager calls preparing
    makes last long enough for another thread's runs to fall within them. The program, made of
    the ops alone, does not pause."""

    def forward(self, series: list[torch.Tensor], offset: torch.Tensor) -> torch.Tensor:
        time.sleep(0.01)
        return super().forward(series, offset)


def test_preparing_a_program_loses_no_write_of_another_thread_running_the_model() -> None:
    """Preparing calls the model in eager, then puts its parameters and buffers back as they were
    before: a runtime running meanwhile on another thread wrote the counter in between, and those
    writes were put back too (before this, the count came short in 4 runs of this test of 4). A
    program is prepared under the module's state lock now, as a state-writing run takes it."""
    model = SlowSeries()
    module = StaticModule(model, Inputs.of([randn(6)], torch.tensor(0.0)), QUICK)
    example = Inputs.of([randn(6, seed=1)], torch.tensor(0.0))
    others = [Inputs.of([randn(6, seed=s) for s in range(n)], torch.tensor(float(n))) for n in range(2, 9)]
    model.calls.zero_()
    running, done, runs = threading.Event(), threading.Event(), [0]

    def keep_running() -> None:
        runtime = module.runtime()
        while not done.is_set():
            example.call(runtime)
            runs[0] += 1
            running.set()

    thread = threading.Thread(target=keep_running)
    thread.start()
    try:
        running.wait()  # bound: its runs take no lock of the module's but the state lock
        runtime = module.runtime()
        for inputs in others:
            inputs.call(runtime)
    finally:
        done.set()
        thread.join()
    assert runs[0] > 0
    assert int(model.calls) == runs[0] + len(others)


def test_run_async_profile_and_observe_take_a_call_of_another_structure() -> None:
    model = Masked().eval()
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    module = StaticModule(model, Inputs.of(x), QUICK)
    runtime = module.runtime()
    with torch.no_grad():
        futures = [runtime.run_async(x, attention_mask=mask), runtime.run_async(x)]
        torch.testing.assert_close(futures[0].result(), model(x, attention_mask=mask))
        torch.testing.assert_close(futures[1].result(), model(x))
    profile = runtime.profile(Inputs.of(x, attention_mask=mask), iterations=2, warmup=1)
    assert profile.kinds and module.shapes_prepared == 2
    observed = observe_static(module, Inputs.of(x, attention_mask=mask))
    masked = {node.node for node in observed.nodes}
    assert masked - {node.node for node in observe_static(module, Inputs.of(x)).nodes}, "the mask's own nodes"
