"""What a twenty-third round of models from outside the zoo broke (``benchmarks/outside_round23.py``:
hand-written models and transformers architectures no earlier round built, run by
``benchmarks/outside_models.py``), each as the smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.measure.equivalence import EquivalenceError, check_equivalence, eager_answer
from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Collecting(nn.Module):
    """Each layer's output appended to a list the caller passes in, as the round's
    ``list_argument_appended``."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, trace: list[torch.Tensor]) -> torch.Tensor:
        hidden = self.first(x)
        trace.append(hidden)
        out = self.second(hidden)
        trace.append(out)
        return out


class Stateful(nn.Module):
    """A state entry of a dict the caller keeps, replaced by a new tensor (``dict_argument_replaced``)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 4)

    def forward(self, x: torch.Tensor, state: dict[str, torch.Tensor]) -> torch.Tensor:
        state["hidden"] = self.cell(x, state["hidden"])
        return state["hidden"].tanh()


@pytest.mark.parametrize("decompose", [False, True])
def test_a_list_argument_that_forward_appends_to_is_refused(decompose):
    """Export runs ``forward`` on a list it builds again from the call, so the program holds no
    append: srbench answered every output right and left the caller's list empty where eager
    fills it, silently. Capture now refuses, naming the argument's new items."""
    model, trace = Collecting().eval(), []
    with torch.no_grad():
        model(torch.randn(2, 4), trace)
    assert len(trace) == 2  # eager's answer includes the list it filled
    with pytest.raises(CaptureError) as refused:
        StaticModule(model, Inputs((torch.randn(2, 4), []), {}), StaticOptions(decompose=decompose))
    assert "forward changes the Python containers it is called with (added trace[0], trace[1])" in refused.value.reason
    assert "Return the new values instead" in refused.value.reason


def test_a_dict_entry_replaced_by_forward_is_refused_by_its_key():
    """``state["hidden"] = h`` puts a new tensor in the caller's dict; the program cannot, and the
    caller's state stayed the old one (the sweep saw its value differ). Refused, naming the key."""
    with pytest.raises(CaptureError) as refused:
        StaticModule(Stateful().eval(), Inputs((torch.randn(2, 4), {"hidden": torch.zeros(2, 4)}), {}))
    assert "(replaced by new values state['hidden'])" in refused.value.reason


class Popping(nn.Module):
    """The last of the caller's tensors taken off its list (``xs.pop()``), as a stack of pending
    inputs is consumed."""

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        return xs.pop() * 2 + xs[0]


def test_an_item_forward_takes_off_a_list_argument_is_refused():
    """Eager leaves the caller's list one item shorter; the program could not."""
    with pytest.raises(CaptureError) as refused:
        StaticModule(Popping().eval(), Inputs(([torch.randn(3), torch.randn(3)],), {}))
    assert "(removed xs[1])" in refused.value.reason


class Unchanged(nn.Module):
    """Containers left as they came: a tensor in a list written in place (the program keeps
    that), an item appended and taken off again."""

    def forward(self, x: torch.Tensor, buffers: list[torch.Tensor]) -> torch.Tensor:
        buffers[0].add_(x)
        buffers.append(x * 2)
        return buffers.pop() + buffers[0]


def test_containers_written_in_place_or_left_as_they_came_are_not_refused():
    model = Unchanged().eval()
    call = Inputs((torch.randn(2, 4), [torch.zeros(2, 4)]), {})
    expected = eager_answer(model, call)
    runtime = StaticModule(model, call).runtime()
    fresh = call.clone()
    torch.testing.assert_close(fresh.call(runtime), expected.outputs)
    torch.testing.assert_close(fresh.args[1][0], expected.inputs_after.args[1][0])


def test_the_protocol_sees_an_item_eager_appends_that_the_runtime_does_not():
    """The protocol compared the call's leaves after a run pair by pair (``zip``), so the items
    eager appended to a list went unseen and a runtime leaving the list empty passed: the sweep
    said ``ok`` for ``list_argument_appended``. Now the containers must hold what eager's hold."""
    model = Collecting().eval()

    @torch.no_grad()
    def faithful(x: torch.Tensor, trace: list[torch.Tensor]) -> torch.Tensor:
        return model(x, trace)

    @torch.no_grad()
    def forgetful(x: torch.Tensor, trace: list[torch.Tensor]) -> torch.Tensor:
        return model(x, [])  # right output, the caller's list untouched

    first, second = Inputs((torch.randn(2, 4), []), {}), Inputs((torch.randn(3, 4), []), {})
    expected = [eager_answer(model, call) for call in (first, second)]
    check_equivalence(faithful, first, second, *expected, rtol=1e-5, atol=1e-6)  # eager itself agrees
    with pytest.raises(EquivalenceError, match="containers hold other items than eager leaves in them"):
        check_equivalence(forgetful, first, second, *expected, rtol=1e-5, atol=1e-6)


def test_the_protocol_sees_a_plain_value_eager_sets_that_the_runtime_does_not():
    """A plain value put in a dict entry (a step count) was skipped by the leaf comparison."""

    def counting(x: torch.Tensor, state: dict[str, int]) -> torch.Tensor:
        state["step"] += 1
        return x * 2

    first, second = Inputs((torch.randn(2), {"step": 0}), {}), Inputs((torch.randn(3), {"step": 4}), {})
    expected = [eager_answer(counting, call) for call in (first, second)]
    with pytest.raises(EquivalenceError, match=r"input args\[1\]\['step'\] is 0 after the call, eager leaves 1"):
        check_equivalence(lambda x, state: x * 2, first, second, *expected, rtol=1e-5, atol=1e-6)


class DataRead(nn.Module):
    """A weight's ``.data`` read in ``forward`` (old code's way to a detached value)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.proj.weight.data.T


class DataClamped(nn.Module):
    """A scale kept in a parameter, clamped in place in ``forward``: through ``.data`` (the round's
    ``data_attribute_writes``), through ``.detach()`` or under ``no_grad`` (the remedies said)."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 4), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.how == "data":
            self.scale.data.clamp_(0.75, 1.25)
        elif self.how == "detach":
            self.scale.detach().clamp_(0.75, 1.25)
        else:
            with torch.no_grad():
                self.scale.clamp_(0.75, 1.25)
        return x * self.scale


@pytest.mark.parametrize("model", [DataRead(), DataClamped("data")], ids=["read", "written"])
def test_data_in_forward_is_refused_naming_it(model):
    """Export lifts what ``.data`` returns as a constant it cannot fill and stopped with "We found
    a fake tensor in the exported program constant's list ... Please file an issue on github",
    naming a ``lifted_tensor_0`` the model does not have. The refusal now names ``.data`` and
    what to write instead."""
    with pytest.raises(CaptureError) as refused:
        StaticModule(model.eval(), (torch.randn(2, 4),))
    assert "most often a tensor's .data" in refused.value.reason
    assert ".detach() where a detached value is meant" in refused.value.reason


@pytest.mark.parametrize("how", ["detach", "no_grad"])
def test_the_remedies_said_for_data_run(how):
    model, twin = DataClamped(how).eval(), DataClamped(how).eval()
    x = torch.randn(2, 4)
    runtime = StaticModule(model, (x,)).runtime()
    with torch.no_grad():
        torch.testing.assert_close(runtime(x), twin(x))
    torch.testing.assert_close(model.scale, twin.scale)  # the clamp written into the parameter
