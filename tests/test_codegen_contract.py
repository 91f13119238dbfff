"""The generated code reads only globals that its Program or the runtime's hooks provide, and
every node plan is typed."""

from __future__ import annotations

import builtins
import dataclasses
import dis
import types

import pytest
import torch

from srbench.static import StaticModule, StaticOptions
from srbench.static.choose import NodePlan, RunAs
from srbench.static.codegen import Entry, Hook, RuntimeHooks


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.linear(x))
        return y.view(-1), y.sum(dim=0)


@pytest.mark.parametrize("cleanup", [True, False])
def test_every_global_of_the_generated_code_is_bound(cleanup):
    module = StaticModule(Model().eval(), (torch.randn(4, 8),), StaticOptions(cleanup_activations=cleanup))
    prepared = module.prepared
    program = prepared.program
    provided = (
        set(program.shared)
        | set(program.managed_globals)
        | {view.name for view in program.static_views}
        | set(RuntimeHooks(miss=print, slab=torch.UntypedStorage(0), times=[]).as_globals())
    )
    code = module.code(prepared)
    assert set(code) == {entry.value for entry in Entry}
    read = {entry: _globals_read(code[entry.value]) for entry in Entry}
    for entry, names in read.items():
        assert names - set(dir(builtins)) <= provided, (entry, sorted(names - provided))
    assert Hook.MISS in read[Entry.FORWARD]
    assert {Hook.TIMES, Hook.CLOCK} <= read[Entry.PROFILED]
    assert (Hook.SLAB in read[Entry.UNCHECKED]) is cleanup


def _globals_read(code: types.CodeType) -> set[str]:
    return {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}


def test_node_plans_are_typed_and_calls_match_how_they_run():
    plans = StaticModule(Model().eval(), (torch.randn(4, 8),)).prepared.plans
    assert {plan.how for plan in plans} <= set(RunAs)
    assert RunAs.OUT in {plan.how for plan in plans}
    for plan in plans:
        assert (plan.call is not None) is plan.how.runs_code
    some = plans[0]
    with pytest.raises(ValueError, match="has no call"):
        dataclasses.replace(some, how=RunAs.FALLBACK, call=None)
    with pytest.raises(ValueError, match="runs no code"):
        _ = NodePlan(some.node, RunAs.SKIP, some.kind, None).runs
