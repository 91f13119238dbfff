"""Module state after srbench's calls, beside eager's (issues #13, #16): buffers assigned anew in
forward, state a first call sets (lazy initialisation), what capture leaves on the model, and the
caller's autocast settings after an error inside the model's own autocast region. Each model is
the smallest that showed a difference when probed against eager."""

from __future__ import annotations

import pytest
import torch
from conftest import static_options_id
from test_static_outside_round6 import OPTIONS  # the sixth round's option sets
from torch import nn

from srbench.graph import CaptureError, capture
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.runtimes import get_runtime
from srbench.static import StaticModule

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class RetypedAverage(nn.Module):
    """Assigns its float32 buffer a float64 average."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ema", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ema = (self.ema * 0.9 + x.mean(0) * 0.1).double()
        return x * 2


class ReshapedSum(nn.Module):
    """Assigns its (3,) buffer a (1, 3) sum."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total = x.sum(0, keepdim=True) + self.total
        return x * 2


@pytest.mark.parametrize(
    ("model_class", "named"),
    [
        (RetypedAverage, r"buffer 'ema' .* torch\.float32 \(3,\) on cpu before a call, torch\.float64 \(3,\)"),
        (ReshapedSum, r"buffer 'total' .* torch\.float32 \(3,\) on cpu before a call, torch\.float32 \(1, 3\)"),
    ],
    ids=["dtype", "shape"],
)
def test_a_buffer_assigned_another_dtype_or_shape_is_refused_with_its_name(model_class, named):
    """The program writes a buffer's new value into the buffer it captured: a float64 value was
    cast to float32, silently (eager's later calls compute in float64), and a (1, 3) one failed
    to prepare with "op aten::copy_ ... can run neither with an out variant nor as fallback". The
    eager call preparing makes tells the buffer and both geometries."""
    model = model_class()
    with pytest.raises(CaptureError, match=named):
        StaticModule(model, (randn(2, 3),), StaticOptions())
    assert next(model.buffers()).dtype == torch.float32 and next(model.buffers()).shape == (3,)


class Average(nn.Module):
    """A buffer assigned anew at every call, and returned."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ema", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ema = self.ema * 0.9 + x.mean(0) * 0.1
        return self.ema


class Centred(nn.Module):
    """A buffer assigned anew at every call, not returned."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ema", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.ema = self.ema * 0.9 + x.mean(0) * 0.1
        return x - self.ema


def _runner(model: nn.Module, options: StaticOptions | None):
    example = randn(2, 3)
    if options is None:
        return get_runtime("srbench")(model, Inputs.of(example))
    return StaticModule(model, (example,), options).runtime()


@pytest.mark.parametrize(
    "options", [*OPTIONS, None], ids=lambda options: "plugin" if options is None else static_options_id(options)
)
@pytest.mark.parametrize("model_class", [Average, Centred])
def test_a_buffer_assigned_anew_is_a_new_tensor_after_every_call(model_class, options):
    """The program wrote each new value into the buffer it captured: the values were eager's, but
    after a call ``model.ema`` was not the tensor the call returned (eager's is), and a tensor the
    caller held as ``model.ema`` before a call changed with it (eager's keeps its value). The
    program now reads the buffer from its module's table and puts the new tensor there (a copy
    where the value lives in the runtime's memory), so a buffer the caller assigns between calls
    is read as eager reads it too. Preparing, its timing runs included, leaves the buffer as it
    was."""
    model, twin = model_class(), model_class()
    original = model.ema
    runtime = _runner(model, options)
    assert model.ema is original
    for seed in range(3):
        held, value = model.ema, model.ema.clone()
        with torch.no_grad():
            expected = twin(randn(2, 3, seed=seed))
        returned = runtime(randn(2, 3, seed=seed))
        torch.testing.assert_close(returned, expected, rtol=0, atol=0)
        torch.testing.assert_close(model.ema, twin.ema, rtol=0, atol=0)
        assert model.ema is not held
        assert returned is model.ema or model_class is Centred
        torch.testing.assert_close(held, value, rtol=0, atol=0)
    assert not original.any()
    model.ema, twin.ema = torch.ones(3), torch.ones(3)
    with torch.no_grad():
        expected = twin(randn(2, 3, seed=7))
    torch.testing.assert_close(runtime(randn(2, 3, seed=7)), expected, rtol=0, atol=0)


class RunningTotal(nn.Module):
    """Assigns its own buffer anew in its forward, as a sub-module."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total = self.total + x.sum(0)
        return x + self.total


class WithRunningTotal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = RunningTotal()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * 2


@pytest.mark.parametrize(
    "options", [*OPTIONS, None], ids=lambda options: "plugin" if options is None else static_options_id(options)
)
def test_a_sub_modules_buffer_assigned_anew_is_a_new_tensor_after_every_call(options):
    """torch.export records a buffer assigned anew only on the root module: a sub-module's
    (``self.total = self.total + ...`` in its forward) was never written by the graph, so the
    program read the first total at every call and left the buffer as it was (other numbers from
    the second call on, silently); then it was refused, named. The graph now writes it as
    export writes the root's (``srbench.graph.buffer_writes``, the fourteenth round), and after
    each call the buffer is a new tensor holding eager's values, as the root's is. Preparing
    leaves it as it was."""
    model, twin = WithRunningTotal(), WithRunningTotal()
    original = model.inner.total
    runtime = _runner(model, options)
    assert model.inner.total is original and not original.any()
    for seed in range(3):
        held = model.inner.total
        with torch.no_grad():
            expected = twin(randn(2, 3, seed=seed))
        torch.testing.assert_close(runtime(randn(2, 3, seed=seed)), expected, rtol=0, atol=0)
        torch.testing.assert_close(model.inner.total, twin.inner.total, rtol=0, atol=0)
        assert model.inner.total is not held


class LazyCache(nn.Module):
    """Keeps the first call's input: ``if not hasattr(self, "cache")``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "cache"):
            self.cache = x.detach().clone()
        return x + self.cache


class LazyScale(nn.Module):
    """A Python number the first call sets from its input's values."""

    def __init__(self) -> None:
        super().__init__()
        self.scale: float | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.scale is None:
            self.scale = float(x.abs().max())
        return x / self.scale


class LazyBuffer(nn.Module):
    """Registers a buffer at its first call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "first"):
            self.register_buffer("first", x.detach().clone())
        return x + self.first


class EmptyBuffer(nn.Module):
    """Fills a buffer registered as ``None`` at its first call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("first", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.first is None:
            self.first = x.detach().clone()
        return x + self.first


class LazyLayer(nn.Module):
    """Makes a Linear layer at its first call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not hasattr(self, "layer"):
            self.layer = nn.Linear(x.shape[-1], 2)
        return self.layer(x)


def _python_state(model: nn.Module) -> dict[str, dict[str, object]]:
    return {
        path: {**vars(module), **module._buffers, **module._parameters, **module._modules}
        for path, module in model.named_modules()
    }


@pytest.mark.parametrize(
    ("model_class", "named"),
    [
        (LazyCache, r"the model's attribute 'cache' \(absent before, a tensor \(2, 3\)"),
        (LazyScale, r"the model's attribute 'scale' \(None before, 2\.17"),
        (LazyBuffer, r"the model's buffer 'first' \(absent before\)"),
        (EmptyBuffer, r"the model's buffer 'first' \(None before\)"),
        (LazyLayer, r"the model's module 'layer' \(absent before\); module 'layer''s parameter 'bias'"),
    ],
    ids=["attribute", "python_number", "buffer_registered", "buffer_filled", "layer"],
)
def test_state_a_first_call_sets_is_refused_with_its_name(model_class, named):
    """torch.export traces forward as a first call: the program repeated the first call's path
    (``cache = x.clone()``) at every call where eager's later calls read the first call's value,
    so from the second call on the numbers were other than eager's, silently (``LazyScale`` was
    refused by export, for reading a value; ``LazyLayer`` with "'Linear' object has no attribute
    '_non_persistent_buffers_set'"). A call after a first one is compared with a first call, on
    other inputs; the model is left as it was, with no fake tensor export made on it."""
    model = model_class()
    before = _python_state(model)
    with pytest.raises(CaptureError, match=named):
        StaticModule(model, (randn(2, 3),), StaticOptions())
    assert _python_state(model) == before


class SettledFirst(nn.Module):
    """State a first call sets that changes no output: a counter's start, and positions made from
    the input's shape (as rotary embeddings cache theirs)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: int | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.steps is None:
            self.steps = 0
        if not hasattr(self, "positions"):
            self.positions = torch.arange(x.shape[-1], dtype=x.dtype)
        return x * 2 + self.positions


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["defaults", "decompose"])
def test_state_a_first_call_sets_that_changes_no_output_is_accepted(options):
    model, twin = SettledFirst(), SettledFirst()
    runtime = StaticModule(model, (randn(2, 3),), options).runtime()
    assert model.steps is None and not hasattr(model, "positions")
    for seed in range(3):
        with torch.no_grad():
            expected = twin(randn(2, 3, seed=seed))
        torch.testing.assert_close(runtime(randn(2, 3, seed=seed)), expected, rtol=0, atol=0)


def test_capture_leaves_no_fake_tensor_on_the_model():
    """Capture alone (no eager call before it): export's trace set ``self.cache`` to a FakeTensor
    and left it, and the model's next eager call read it."""
    model = LazyCache()
    capture(model, (randn(2, 3),))
    assert not hasattr(model, "cache")
    torch.testing.assert_close(model(randn(2, 3)), randn(2, 3) * 2)


class SwitchesToEval(nn.Module):
    """Puts itself out of training in forward (dropout then does nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.train(False)
        return self.dropout(self.linear(x))


def test_preparing_leaves_the_training_flag_a_forward_flips():
    """export's trace ran ``self.train(False)`` on the model and left it: preparing, which is no
    call of the user's, switched the model out of training. The program is eager's eval path."""
    torch.manual_seed(0)
    model = SwitchesToEval().train()
    runtime = StaticModule(model, (randn(2, 3),), StaticOptions()).runtime()
    assert model.training and model.dropout.training
    got = runtime(randn(2, 3))
    with torch.no_grad():
        torch.testing.assert_close(got, model(randn(2, 3)), rtol=0, atol=0)


class AutocastBranchGather(nn.Module):
    """Its own autocast region around a data-dependent branch and an index that can be out of
    range: the program runs the region as ``_enter_autocast``/``_exit_autocast`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.cond(x.sum() > 0, lambda v: self.linear(v).sin(), lambda v: self.linear(v).cos(), (x,))
            z = y.index_select(0, index)
        return z.float() * 2


@pytest.mark.parametrize(
    "options", [StaticOptions(), StaticOptions(streams=2), None], ids=["defaults", "two_streams", "plugin"]
)
def test_an_error_in_the_models_autocast_region_gives_the_callers_settings_back(options):
    """An op failing inside the model's region left the cache of casts switched on and the
    autocast dtype the model's (the error path switched autocast off and the cache on), where
    eager's ``with`` restores the caller's ``set_autocast_cache_enabled(False)`` and dtype. The
    regions the program's frames hold are exited as eager exits them."""
    torch.manual_seed(0)
    model = AutocastBranchGather().eval()
    x, index = torch.randn(4, 8), torch.tensor([0, 3])
    if options is None:
        run = get_runtime("srbench")(model, Inputs.of(x, index))
    else:
        run = StaticModule(model, (x, index), options).runtime()
    dtype = torch.get_autocast_dtype("cpu")
    try:
        torch.set_autocast_cache_enabled(False)
        torch.set_autocast_dtype("cpu", torch.float16)
        with pytest.raises(IndexError):
            run(x, torch.tensor([0, 9]))
        assert not torch.is_autocast_cache_enabled()
        assert torch.get_autocast_dtype("cpu") == torch.float16
        assert not torch.is_autocast_enabled("cpu")
    finally:
        torch.set_autocast_cache_enabled(True)
        torch.set_autocast_dtype("cpu", dtype)
    with torch.no_grad():
        torch.testing.assert_close(run(x, index), model(x, index), rtol=0, atol=0)
