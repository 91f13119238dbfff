"""The preparation-stability benchmark (``benchmarks/preparation_stability.py``): preparations
that give the same bits agree, ones that do not are reported, and bad arguments are refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from benchmarks import preparation_stability
from benchmarks.preparation_stability import Subject, main, stability, subject
from srbench.inputs import Inputs


class Drifting:
    """Stands in for ``StaticModule``: each preparation's runtime adds its own preparation count,
    as two programs that round differently would differ."""

    made = 0  # preparations so far, in this process

    def __init__(self, model: nn.Module, inputs: Inputs, options: object, *, name: str) -> None:
        Drifting.made += 1
        self.model, self.offset = model, float(Drifting.made)

    def runtime(self) -> Callable[..., torch.Tensor]:
        return lambda *args: self.model(*args) + self.offset


def test_preparations_of_a_zoo_model_agree_and_the_exit_status_says_so(capsys):
    assert main(["--models", "mlp", "--preparations", "2"]) == 0
    assert "mlp" in capsys.readouterr().out
    result = stability(subject("mlp"), 2)
    assert result.agree and len(result.differences) == 2


def test_preparations_that_differ_are_reported(monkeypatch):
    monkeypatch.setattr(preparation_stability, "StaticModule", Drifting)
    monkeypatch.setattr(Drifting, "made", 0)
    calls = (Inputs.coerce((torch.ones(2, 3),)), Inputs.coerce((torch.ones(4, 3),)))
    result = stability(Subject("relu", nn.ReLU, lambda: calls), 3)
    assert not result.agree
    assert [first for first, _ in result.differences] == [1.0, 2.0, 3.0]


def test_bad_arguments_are_refused():
    with pytest.raises(KeyError, match="no model 'no_such_model' in the zoo or in the outside-models sweep"):
        subject("no_such_model")
    with pytest.raises(SystemExit):
        main(["--models", "mlp", "--preparations", "1"])
