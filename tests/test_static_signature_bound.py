"""The per-signature program cache is bounded (``StaticOptions.max_signatures``): a model called
with ever new shapes keeps the example's program and the most recently used others, and each
runtime gives back the memory of an evicted program."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
import torch
from torch import nn

from srbench.options import StaticOptions
from srbench.static import StaticModule

QUICK = StaticOptions(measure_choices=False, cleanup_activations=False, max_signatures=3)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = nn.Linear(16, 256), nn.Linear(256, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)) * 2)


def batch(size: int) -> torch.Tensor:
    return torch.randn(size, 16)


def test_past_the_bound_the_least_recently_used_program_is_evicted_and_its_memory_given_back() -> None:
    model = MLP().eval()
    module = StaticModule(model, (batch(1),), QUICK)
    runtime = module.runtime()
    runtime(batch(64))
    large = module.prepared_for((batch(64),))
    large_slab = runtime.slab_bytes
    assert large_slab == large.slab_bytes > 0
    evicted = weakref.ref(large)
    runtime(batch(2))
    runtime(batch(3))  # a fourth signature: 64's program, the least recently used other, goes
    assert module.shapes_prepared == 3 and module.evictions == 1
    assert not module.holds(large)
    del large
    gc.collect()
    assert evicted() is None, "the module and the runtime dropped the evicted program"
    kept = max(module.prepared_for((batch(size),)).slab_bytes for size in (1, 2, 3))
    assert runtime.slab_bytes == kept < large_slab, "the slab shrank to what the programs left need"
    for size in (64, 2, 1):  # 64 prepared again (evicting 3), then programs bound before and rebound
        x = batch(size)
        with torch.inference_mode():
            torch.testing.assert_close(runtime(x), model(x))
    assert module.shapes_prepared == 3


def test_a_program_switched_to_counts_as_used_and_the_examples_is_never_evicted() -> None:
    module = StaticModule(MLP().eval(), (batch(1),), QUICK)
    runtime = module.runtime()
    programs = {}
    for size in (2, 3):
        runtime(batch(size))
        programs[size] = module.prepared_for((batch(size),))  # the most recently used already
    runtime(batch(2))  # switched to: 3 is now the least recently used
    runtime(batch(4))
    assert module.holds(module.prepared) and module.holds(programs[2]) and not module.holds(programs[3])
    runtime(batch(5))  # the example's is the least recently used, and stays
    assert module.holds(module.prepared) and not module.holds(programs[2])


def test_with_managed_outputs_the_arena_of_an_evicted_program_is_given_back() -> None:
    model = MLP().eval()
    module = StaticModule(model, (batch(1),), StaticOptions(measure_choices=False, manage_output_tensors=True))
    runtime = module.runtime()
    runtime(batch(512))
    large_arena = runtime.arena_bytes
    for size in range(2, 10):  # eight more signatures: the bound of 8 evicts 512's first
        runtime(batch(size))
    assert module.shapes_prepared == 8
    assert runtime.arena_bytes < large_arena and runtime.arena_bytes <= 9 * 16 * 4
    x = batch(512)
    with torch.inference_mode():
        torch.testing.assert_close(runtime(x), model(x))


def test_runtimes_in_threads_share_the_bounded_cache() -> None:
    model = MLP().eval()
    module = StaticModule(model, (batch(1),), QUICK)
    inputs = {size: batch(size) for size in range(1, 7)}
    with torch.inference_mode():  # eager calls overlapping a capture in another thread would disturb it
        expected = {size: model(x) for size, x in inputs.items()}
    errors: list[BaseException] = []

    def calls(sizes: list[int]) -> None:
        runtime = module.runtime()
        try:
            for size in sizes:
                torch.testing.assert_close(runtime(inputs[size]), expected[size])
        except BaseException as error:  # reported by the test's thread
            errors.append(error)

    orders = [[2, 3, 4, 5, 2, 6, 3, 1, 5], [5, 4, 3, 2, 6, 1, 4, 2, 3]]
    threads = [threading.Thread(target=calls, args=(order,)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert module.shapes_prepared <= 3 and module.evictions >= 3


@pytest.mark.parametrize("bound", [1, 0, 2.5, True])
def test_a_bound_below_two_or_not_an_integer_is_refused(bound: object) -> None:
    with pytest.raises(ValueError, match="max_signatures must be an integer of at least 2"):
        StaticModule(MLP().eval(), (batch(1),), StaticOptions(max_signatures=bound))  # type: ignore[arg-type]
