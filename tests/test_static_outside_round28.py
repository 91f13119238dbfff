"""What a twenty-eighth round of models from outside the zoo broke (``benchmarks/outside_round28.py``:
models from libraries no earlier round built, run by ``benchmarks/outside_models.py``), each as the
smallest model that shows it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class _Store:
    """A plain object holding a tensor, as transformers' ``StaticCache`` holds its layers' keys
    and values."""

    def __init__(self) -> None:
        self.cache = torch.zeros(4)


class CacheHeldTwice(nn.Module):
    """The store's tensor registered as a buffer too, and written through the store, as
    transformers' ExecuTorch wrappers (``TorchExportableModuleWithStaticCache``) register and
    write their cache (the round's ``hf_static_cache_decode``): export lifts the store's tensor
    as a constant beside the buffer, two placeholders on one storage."""

    def __init__(self) -> None:
        super().__init__()
        self.store = _Store()
        self.register_buffer("cache", self.store.cache, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.store.cache.add_(x[0])
        return x * self.store.cache + self.cache.sum()


@pytest.mark.parametrize("options", [StaticOptions(), StaticOptions(decompose=True)], ids=["default", "decompose"])
def test_a_buffer_a_plain_object_holds_and_writes_prepares_under_decompose(options):
    """torch's own decomposition fails on the program ('expected compiled_fn to be
    GraphModule'), and srbench refused the model under ``decompose`` ("the model can be prepared
    without decompose"), where a buffer registered as a slice of another, the same fault, was
    prepared without it. It is now too, and answers as eager, the state moving as eager's."""
    model, eager = CacheHeldTwice(), CacheHeldTwice()
    x = torch.arange(1.0, 5.0)
    runtime = StaticModule(model, (x.clone(),), options).runtime()
    for _ in range(3):
        torch.testing.assert_close(runtime(x), eager(x))
    torch.testing.assert_close(model.cache, eager.cache)
    torch.testing.assert_close(model.cache, torch.full((4,), 3.0))
