"""The static runtime under the caller's thread-local modes: an autocast the caller entered
(refused, since no captured program follows it), an autocast the model enters itself (captured,
and never left open by an error), and ``torch.inference_mode`` on the first call and not on the
next ones (the slab is bound as normal tensors whatever the mode of the call that binds it)."""

from __future__ import annotations

import pytest
import torch

from srbench.graph.capture import CaptureError, capture
from srbench.static import AmbientAutocastError, StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()


class AutocastBranches(torch.nn.Module):
    """An autocast region of its own around data-dependent control flow: the sub-blocks run
    inside the region the outer program entered."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.cond(
                x.sum() > 0,
                lambda v: self.linear(v).float().sin(),
                lambda v: self.linear(v).float().cos(),
                (x,),
            )
        return y * 2


class AutocastGather(torch.nn.Module):
    """An autocast region of its own in which an op can fail on the call's data (an index out of
    range): eager's ``with`` leaves the region on the error; the captured program must too."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.linear(x).index_select(0, index)
        return y.float() + 1


def test_a_call_under_the_callers_autocast_is_refused_with_the_autocast_named():
    model = _mlp()
    x = torch.randn(2, 8)
    runtime = StaticModule(model, (x,), StaticOptions()).runtime()
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(AmbientAutocastError, match="bfloat16"):
        runtime(x)
    assert not torch.is_autocast_enabled("cpu")
    with torch.no_grad():
        torch.testing.assert_close(runtime(x), model(x), rtol=0, atol=0)


def test_preparing_under_the_callers_autocast_is_refused():
    x = torch.randn(2, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(CaptureError, match=r"torch\.export does not capture"):
            capture(_mlp(), (x,))
        with pytest.raises(CaptureError, match="autocast"):
            StaticModule(_mlp(), (x,), StaticOptions())
    assert not torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("decompose", [False, True], ids=["whole", "decomposed"])
def test_an_autocast_region_of_the_models_own_runs_as_eager_around_control_flow(decompose):
    torch.manual_seed(0)
    model = AutocastBranches().eval()
    x = torch.randn(2, 8)
    runtime = StaticModule(model, (x,), StaticOptions(decompose=decompose)).runtime()
    for inputs in (x, -x.abs() - 1, x.abs() + 1):
        with torch.no_grad():
            expected = model(inputs)
        actual = runtime(inputs)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert not torch.is_autocast_enabled("cpu")


def test_an_error_inside_the_models_autocast_region_leaves_no_autocast_behind():
    torch.manual_seed(0)
    model = AutocastGather().eval()
    x, index = torch.randn(4, 8), torch.tensor([0, 3])
    runtime = StaticModule(model, (x, index), StaticOptions()).runtime()
    with torch.no_grad(), pytest.raises(IndexError):
        model(x, torch.tensor([0, 9]))
    assert not torch.is_autocast_enabled("cpu")  # eager's with statement left the region
    with pytest.raises(IndexError):
        runtime(x, torch.tensor([0, 9]))
    assert not torch.is_autocast_enabled("cpu")
    assert torch.mm(torch.randn(2, 2), torch.randn(2, 2)).dtype == torch.float32  # no cast leaked
    with torch.no_grad():
        torch.testing.assert_close(runtime(x, index), model(x, index), rtol=0, atol=0)


@pytest.mark.parametrize(
    "options",
    [StaticOptions(), StaticOptions(manage_output_tensors=True), StaticOptions(streams=2)],
    ids=["defaults", "managed_outputs", "two_streams"],
)
def test_a_first_call_under_inference_mode_leaves_later_calls_outside_it_working(options):
    """The first call binds the slab; made under ``torch.inference_mode`` its views were
    inference tensors, which every later call outside the mode failed to write."""
    model = _mlp()
    shapes = (torch.randn(2, 8), torch.randn(5, 8))
    with torch.no_grad():
        expected = [model(x) for x in shapes]
    runtime = StaticModule(model, (shapes[0],), options).runtime()
    for inference in (True, False, True, False):
        for x, wanted in zip(shapes, expected, strict=True):
            with torch.inference_mode(inference):
                torch.testing.assert_close(runtime(x.clone()), wanted, rtol=0, atol=0)


def test_a_module_prepared_under_inference_mode_runs_outside_it():
    model = _mlp()
    x = torch.randn(3, 8)
    with torch.inference_mode():
        module = StaticModule(model, (x,), StaticOptions())
        runtime = module.runtime()
        runtime(x)
    with torch.no_grad():
        torch.testing.assert_close(runtime(x.clone()), model(x), rtol=0, atol=0)


class WritesAnInputBesideABranch(torch.nn.Module):
    """Two independent branches at the first step, one writing its input in place."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p = self.a(x).relu()
        y.mul_(2)
        return p + self.b(y).relu()


def test_a_worker_stream_writes_an_input_made_under_inference_mode_as_eager_does():
    """Inference mode is per thread: a stream's worker thread takes the caller's for the run."""
    torch.manual_seed(0)
    model = WritesAnInputBesideABranch().eval()
    x, y = torch.randn(4, 16), torch.randn(4, 16)
    module = StaticModule(model, (x, y.clone()), StaticOptions(streams=2, scheduler="parallel_steps"))
    worker_ops = module.prepared.schedule.streams[1]
    assert "mul_" in worker_ops, worker_ops  # the premise: the write runs on the worker's thread
    runtime = module.runtime()
    for inference in (True, False):
        with torch.inference_mode(inference):
            eager_y, static_y = y.clone(), y.clone()
            expected = model(x, eager_y)
            actual = runtime(x, static_y)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        torch.testing.assert_close(static_y, eager_y, rtol=0, atol=0)
