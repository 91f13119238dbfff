"""Control flow. ``torch.cond``, ``torch.while_loop`` and ``torch.map`` run their sub-graphs as
sub-blocks, each prepared on its own (its ops resolved, its memory planned, its code generated),
and give eager's answers under every option by PyTorch Static Runtime's protocol. A Python branch
on a tensor's value, which cannot be captured, is refused at prepare time with the source line."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch._higher_order_ops.map import map as torch_map

from srbench.graph import CaptureError
from srbench.inputs import Inputs
from srbench.static import StaticModule, StaticOptions
from srbench.static.blocks import ControlFlow, ControlFlowOp
from srbench.static.choose import RunAs


class Branches(torch.nn.Module):
    """A branch on the data: a linear layer (its parameters captured by the branch) or a shift."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = x * 2
        z = torch.cond(y.sum() > 0, lambda a: torch.relu(self.linear(a)) + 1, lambda a: a.sin() - 1, (y,))
        return z * 3, y


class Doubling(torch.nn.Module):
    """Doubles until the values reach a limit: as many iterations as the data asks for (none for
    large inputs, whose loop returns copies of what it was given); returns the loop's results."""

    def forward(self, x, limit):
        step = torch.zeros((), dtype=torch.int64)
        return torch.while_loop(lambda i, a: a.abs().sum() < limit, lambda i, a: (i + 1, a * 2 + 0.5), (step, x))


class Rows(torch.nn.Module):
    """Maps a body with two results over the rows of two tensors, with an argument shared by all."""

    def forward(self, xs, ys, bias):
        return torch_map(lambda x, y, b: (x.sin() * y + b, (x @ b).unsqueeze(0)), xs, ys, bias)


class LoopOfBranches(torch.nn.Module):
    """A cond inside a while_loop's body: sub-blocks nest."""

    def forward(self, x):
        def body(i, a):
            return i + 1, torch.cond(a.sum() > 0, lambda b: b - 1.5, lambda b: b * -2.0, (a,))

        return torch.while_loop(lambda i, a: i < 4, body, (torch.zeros((), dtype=torch.int64), x))[1]


def _randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


CASES = {
    # first call takes the linear branch, the second (another shape) the other one
    "cond": (Branches, Inputs.of(_randn(3, 4, seed=0).abs()), Inputs.of(-_randn(5, 4, seed=1).abs())),
    # first call loops a few times, the second never (its loop returns copies of its inputs)
    "while_loop": (
        Doubling,
        Inputs.of(_randn(3, 4, seed=0, scale=0.1), limit=40.0),
        Inputs.of(_randn(6, 4, seed=1, scale=10.0), limit=40.0),
    ),
    "map": (
        Rows,
        Inputs.of(_randn(3, 4, seed=0), _randn(3, 4, seed=1), _randn(4, seed=2)),
        Inputs.of(_randn(5, 4, seed=3), _randn(5, 4, seed=4), _randn(4, seed=5)),
    ),
    "nested": (LoopOfBranches, Inputs.of(_randn(3, 4, seed=0)), Inputs.of(_randn(2, 5, seed=1))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_control_flow_matches_eager(case, conformance, static_options):
    model_class, first, second = CASES[case]
    conformance(model_class(), first, second, static_options)


def _control_flow_ops(module: StaticModule) -> list[ControlFlowOp]:
    return list(module.prepared.program.per_runtime.values())


@pytest.mark.parametrize(
    ("case", "kind", "roles"),
    [
        ("cond", ControlFlow.COND, ["true_branch", "false_branch"]),
        ("while_loop", ControlFlow.WHILE_LOOP, ["condition", "body"]),
        ("map", ControlFlow.MAP, ["body"]),
    ],
)
def test_every_sub_graph_is_a_prepared_block_with_its_own_plan(case, kind, roles, one_thread):
    model_class, first, _ = CASES[case]
    module = StaticModule(model_class(), first, StaticOptions(cleanup_activations=False))
    (op,) = _control_flow_ops(module)
    assert op.kind is kind
    assert [block.name.rsplit(".", 1)[1] for block in op.blocks] == roles
    node = next(plan for plan in module.prepared.plans if plan.runs.fn is op)
    assert node.how is RunAs.NATIVE and node.kind == kind.value
    for block in op.blocks:  # every block, the branch not taken included, prepared at prepare time
        assert block.module is not None, block.name
        assert not block.module.options.manage_output_tensors
    planned = [block.module.prepared.plan for block in op.blocks if block.module.prepared.plan is not None]
    assert planned, "no sub-block planned any memory"
    for plan in planned:
        assert plan.plan.total_bytes > 0


def test_each_runtime_has_runtimes_of_its_own_for_the_sub_blocks(one_thread):
    model_class, first, _ = CASES["cond"]
    module = StaticModule(model_class(), first, StaticOptions(cleanup_activations=False))
    runtimes = [module.runtime(), module.runtime()]
    with torch.no_grad():
        expected = first.call(module.model)
    for runtime in runtimes:
        torch.testing.assert_close(first.call(runtime), expected)
    (name,) = module.prepared.program.per_runtime
    runners = [runtime.bind(first).forward.__globals__[name] for runtime in runtimes]
    assert runners[0] is not runners[1]


class PythonBranch(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        if y.sum() > 0:
            return y + 1
        return y - 1


class PythonLoop(torch.nn.Module):
    def forward(self, x):
        while x.sum() < 10:
            x = x * 2
        return x


class SizeFromData(torch.nn.Module):
    def forward(self, x):
        return x[: int(x.max())]


def _line_of(model_class: type, text: str) -> str:
    lines, start = inspect.getsourcelines(model_class)
    number = start + next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(model_class)}:{number} `{text}`"


@pytest.mark.parametrize(
    ("model_class", "code"),
    [
        (PythonBranch, "if y.sum() > 0:"),
        (PythonLoop, "while x.sum() < 10:"),
        (SizeFromData, "return x[: int(x.max())]"),
    ],
    ids=["branch", "loop", "size"],
)
def test_python_control_flow_on_tensor_values_is_refused_with_the_source_line(model_class, code):
    with pytest.raises(CaptureError) as caught:
        StaticModule(model_class(), (torch.randn(3),), name=model_class.__name__)
    error = caught.value
    assert error.source == _line_of(model_class, code)
    assert str(error).startswith(f"cannot capture model {model_class.__name__!r} at {error.source}: ")
    assert "reads a tensor's value to decide what to run" in str(error) and "torch.cond" in str(error)
