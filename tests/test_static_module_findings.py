"""Regression tests for what the ModuleInfo sweep found (``tests/test_conformance_modules.py`` with
``SRBENCH_MODULE_SWEEP=full``; README, "Module by module"): each a small model of one finding."""

from __future__ import annotations

import pytest
import torch

from srbench.graph import CaptureError, capture
from srbench.static import StaticModule, StaticOptions


@pytest.mark.parametrize("decompose", [False, True], ids=["graph", "decomposed"])
def test_an_uninitialized_lazy_module_is_refused_naming_its_parameter(decompose):
    # srbench's state check read the lazy parameter's shape before the capture and failed with
    # torch's RuntimeError about load_state_dict (under decompose, its storage: a ValueError)
    model = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.LazyLinear(4)).eval()
    with pytest.raises(CaptureError, match=r"'1\.weight' is not initialized .*call the model once"):
        StaticModule(model, (torch.randn(2, 3),), StaticOptions(decompose=decompose))
    with pytest.raises(CaptureError, match=r"'1\.weight' is not initialized"):
        capture(model, (torch.randn(2, 3),))
    assert torch.nn.parameter.is_lazy(model[1].weight)  # left as it was: no call initialized it


def test_a_lazy_module_initialized_by_a_call_is_prepared(conformance):
    model = torch.nn.LazyLinear(4).eval()
    with torch.no_grad():
        model(torch.randn(2, 3))
    conformance(model, (torch.randn(2, 3),), (torch.randn(5, 3),), StaticOptions())
