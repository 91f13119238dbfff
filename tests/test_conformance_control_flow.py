"""Control flow: a Python branch on a tensor's value cannot be captured and is refused at prepare
time with the model's source line."""

from __future__ import annotations

import inspect

import pytest
import torch

from srbench.graph import CaptureError
from srbench.static import StaticModule


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
