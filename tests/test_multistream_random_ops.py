"""Random ops on several streams: which ops keep eager's order is srbench's decision per node.

Ops that draw random numbers share the generator, so their order is which numbers each draws:
the scheduler keeps them in eager's order. Which ops draw is the resolver's decision
(``Resolution.draws``, the same draws under two seeds that decide how candidates are checked),
not torch's ``nondeterministic_seeded`` tag: an eval-mode ``lstm`` carries the tag and answers
fixed values, and two of them in parallel branches run at once.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from srbench.schedulers import Schedule
from srbench.static import StaticModule, StaticOptions

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

TWO_STREAMS = StaticOptions(streams=2, scheduler="parallel_steps", measure_choices=False)


class TwoBranches(torch.nn.Module):
    """Two independent branches of one input, each an LSTM followed by dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.left, self.right = torch.nn.LSTM(8, 8, batch_first=True), torch.nn.LSTM(8, 8, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        left, right = self.left(x)[0], self.right(x)[0]
        return (
            torch.nn.functional.dropout(left, 0.5, self.training),
            torch.nn.functional.dropout(right, 0.5, self.training),
        )


def prepared(training: bool) -> tuple[torch.nn.Module, StaticModule]:
    torch.manual_seed(0)
    model = TwoBranches().train(training)
    return model, StaticModule(model, (torch.randn(2, 5, 8),), TWO_STREAMS)


def happens_before(schedule: Schedule, first: str, second: str) -> bool:
    """Whether ``schedule`` finishes ``first`` before ``second`` starts: a path of stream order
    and cross-stream waits from one to the other."""
    after: dict[str, set[str]] = {}
    for ops in schedule.streams:
        for earlier, later in itertools.pairwise(ops):
            after.setdefault(earlier, set()).add(later)
    for wait in schedule.waits:
        after.setdefault(wait.producer, set()).add(wait.consumer)
    seen, frontier = set(), [first]
    while frontier:
        for op in after.get(frontier.pop(), ()):
            if op not in seen:
                seen.add(op)
                frontier.append(op)
    return second in seen


def test_fixed_tagged_ops_in_parallel_branches_run_at_once():
    """Eval mode: the LSTMs and dropouts carry torch's tag but answer fixed values; neither pair
    is ordered (told by the tag, the second LSTM waited for the first), and the runs answer as
    eager does."""
    model, module = prepared(training=False)
    schedule = module.prepared.schedule
    assert schedule is not None and module.prepared.streams_used == 2
    for pair in (("lstm", "lstm_1"), ("dropout", "dropout_1")):
        assert not happens_before(schedule, *pair) and not happens_before(schedule, *reversed(pair)), pair
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        expected = model(x)
    for a, b in zip(module.runtime()(x), expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_random_ops_keep_eager_order_and_draw_eager_numbers():
    """Train mode: the dropouts draw, so the second follows the first, and a run draws the
    numbers eager draws from the same seed, call after call."""
    model, module = prepared(training=True)
    schedule = module.prepared.schedule
    assert schedule is not None
    dropouts = [op for op in schedule.order if op.startswith("native_dropout") or op.startswith("dropout")]
    assert len(dropouts) == 2
    assert happens_before(schedule, *dropouts)
    runtime, x = module.runtime(), torch.randn(2, 5, 8)
    torch.manual_seed(11)
    with torch.no_grad():
        expected = [model(x) for _ in range(3)]
    torch.manual_seed(11)
    got = [runtime(x) for _ in range(3)]
    for mine, theirs in zip(got, expected):
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
