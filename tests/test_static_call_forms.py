"""A call written in another form than its program's (``model(x, mask)`` where the mask's program
takes ``attention_mask=mask``; ``model(x=x)`` for ``model(x)``; a default given or left out) gets
the program's answers, as eager's, and takes the slow path once per form, not at every call; and
a call the model does not take is captured once per signature, then refused at once."""

from __future__ import annotations

import gc
import inspect
import itertools
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch
from test_static_signature_programs import Counted
from torch import nn

import srbench.static.module as static_module
from srbench.graph.capture import CaptureError
from srbench.inputs import Inputs
from srbench.options import StaticOptions
from srbench.static import InputSignatureError, StaticModule, StaticRuntime
from srbench.static.errors import FailureScope, UnsupportedOpError
from srbench.static.failure_scope import failure_scope
from srbench.static.forms import Adapters, Form, _is_default, rebinding

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

QUICK = StaticOptions(measure_choices=False)


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Masked(nn.Module):
    """An optional mask, as transformers' ``attention_mask``, and a scalar with a default."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, scale: float = 2.0) -> torch.Tensor:
        h = self.linear(x) * scale
        return h if attention_mask is None else h * attention_mask.unsqueeze(-1)


class Extras(nn.Module):
    """Keywords the signature does not name (``**extra``), one of them no Python identifier."""

    def forward(self, x: torch.Tensor, **extra: torch.Tensor) -> torch.Tensor:
        return x.sin() + extra["bias"] * extra["not-an-identifier"]


class Varargs(nn.Module):
    def forward(self, x: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        return x.cos() + sum(rest)


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (the rest runs as it did)."""
    original: Callable[..., Any] = getattr(owner, name)
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return count


def check_forms(
    monkeypatch: pytest.MonkeyPatch, model: nn.Module, example: Inputs, calls: list[Inputs], repeats: int = 3
) -> StaticModule:
    """Each of ``calls`` ``repeats`` times on a runtime, as eager answers it; the slow path (which
    looks the program up) is taken at its first call only."""
    module = StaticModule(model, example, QUICK, name="forms")
    runtime = module.runtime()
    slow = counting(monkeypatch, module, "prepared_for")
    with torch.no_grad():
        for inputs in calls:
            expected = inputs.call(model)
            for repeat in range(repeats):
                torch.testing.assert_close(inputs.call(runtime), expected)
                if repeat == 0:
                    first = slow[0]
            assert slow[0] == first, f"{inputs}: the slow path at {slow[0] - first} of {repeats - 1} repeats"
    return module


def test_a_positional_mask_where_its_program_takes_it_by_keyword_runs_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    module = check_forms(
        monkeypatch,
        Masked().eval(),
        Inputs.of(x),
        [
            Inputs.of(x, mask),  # positional: the program takes attention_mask=mask
            Inputs.of(x=x),  # by keyword where the example passed it positionally
            Inputs.of(x=x, attention_mask=mask),
            Inputs.of(x, mask, 3.0),  # a scalar other than its default: passed by keyword
            Inputs.of(x, None, 2.0),  # the defaults given: the example's program
            Inputs.of(x, scale=2.0),
        ],
    )
    assert module.shapes_prepared == 3  # the example's, the mask's, the mask's at scale 3


def test_defaults_left_out_where_the_example_gave_them(monkeypatch: pytest.MonkeyPatch) -> None:
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    check_forms(
        monkeypatch,
        Masked().eval(),
        Inputs.of(x, mask, 2.0),
        [Inputs.of(x), Inputs.of(x, attention_mask=mask), Inputs.of(x=x, attention_mask=mask, scale=2.0)],
    )


def test_a_left_out_scalar_of_another_value_runs_its_own_program() -> None:
    """``model(x, None, 2.0)`` leaves out the defaults (the example's program, through the form's
    adapter); ``model(x, None, 3.0)``, of the same form, is another program's call."""
    model = Masked().eval()
    x = randn(2, 5, 4)
    module = StaticModule(model, Inputs.of(x), QUICK)
    runtime = module.runtime()
    with torch.no_grad():
        for scale in (2.0, 3.0, 2.0, 3.0, 2):
            torch.testing.assert_close(runtime(x, None, scale), model(x, None, scale))
    assert module.shapes_prepared == 3  # 2 (an int) is not the float default: a program of its own


def test_shapes_switched_in_another_form_take_the_slow_path_once_a_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server calling ``model(x, mask)`` at ever other lengths: the adapter's call whose program
    guard fails reaches the slow path moved, which takes it as written (not as the program's
    form, which made the next call of the form take the slow path a second time)."""
    model = Masked().eval()
    module = StaticModule(model, Inputs.of(randn(2, 5, 4)), QUICK)
    runtime = module.runtime()
    slow = counting(monkeypatch, module, "prepared_for")
    calls = [Inputs.of(randn(2, n, 4, seed=n), (randn(2, n, seed=n + 1) > 0).float()) for n in (5, 7, 5, 7, 5, 7)]
    with torch.no_grad():
        for inputs in calls:
            torch.testing.assert_close(inputs.call(runtime), inputs.call(model))
            torch.testing.assert_close(inputs.call(runtime), inputs.call(model))
    assert slow[0] == len(calls)


def test_forms_alternated_take_the_slow_path_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """``model(x, mask)`` and ``model(x=x, attention_mask=mask)`` in turn, neither the mask's
    program's form (``model(x, attention_mask=mask)``), then that form too: each form's first call
    takes the slow path, and no switch after (before, one adapter was the fast path at a time, and
    each switch between the two took the slow path). Past the bound (one form kept, on another
    runtime), the form used least recently is dropped: every switch takes the slow path."""
    model = Masked().eval()
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    module = StaticModule(model, Inputs.of(x), QUICK)
    runtime = module.runtime()
    slow = counting(monkeypatch, module, "prepared_for")
    positional, by_keyword, own = (
        Inputs.of(x, mask),
        Inputs.of(x=x, attention_mask=mask),
        Inputs.of(x, attention_mask=mask),
    )
    expected = model(x, mask)
    with torch.no_grad():
        for inputs in [positional, by_keyword] * 3 + [own, positional, own, by_keyword]:
            torch.testing.assert_close(inputs.call(runtime), expected)
    assert slow[0] == 2
    monkeypatch.setattr("srbench.static.runtime.FORMS_KEPT", 1)
    bounded = module.runtime()
    with torch.no_grad():
        for inputs in [positional, by_keyword, positional, by_keyword, by_keyword]:
            torch.testing.assert_close(inputs.call(bounded), expected)
    assert slow[0] == 2 + 4


def test_keywords_the_signature_does_not_name_and_varargs(monkeypatch: pytest.MonkeyPatch) -> None:
    x, bias, factor = randn(3), randn(3, seed=1), randn(3, seed=2)
    extras = {"bias": bias, "not-an-identifier": factor}
    check_forms(monkeypatch, Extras(), Inputs(tuple([x]), extras), [Inputs((), {"x": x, **extras})])
    check_forms(monkeypatch, Varargs(), Inputs.of(x, bias), [Inputs.of(x, bias), Inputs.of(x, bias, factor)])


def test_threads_calling_one_module_in_their_own_forms() -> None:
    model = Masked().eval()
    x, mask = randn(2, 5, 4), (randn(2, 5, seed=1) > 0).float()
    module = StaticModule(model, Inputs.of(x), QUICK)
    forms = [Inputs.of(x, mask), Inputs.of(x, attention_mask=mask), Inputs.of(x=x, attention_mask=mask), Inputs.of(x)]
    with torch.no_grad():
        expected = [inputs.call(model) for inputs in forms]
    errors: list[BaseException] = []

    def work(order: list[int]) -> None:
        runtime = module.runtime()
        try:
            with torch.no_grad():
                for _ in range(50):
                    for index in order:
                        torch.testing.assert_close(forms[index].call(runtime), expected[index])
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(order,)) for order in ([0, 0, 1, 2, 3], [2, 1, 0, 3], [3])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert module.shapes_prepared == 2


GOOD = Inputs.of(randn(3), {"a": randn(3, seed=1), "b": randn(3, seed=2)})


def bad(key: str) -> Inputs:
    """A call whose dict lacks ``b`` (the model reads it) and has ``key`` instead."""
    return Inputs.of(randn(3), {"a": randn(3), key: randn(3)})


def test_a_call_the_model_does_not_take_is_captured_once_then_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    model = Counted()
    module = StaticModule(model, GOOD, QUICK, name="counted")
    runtime = module.runtime()
    captures = counting(monkeypatch, static_module, "capture_graph")
    messages = []
    for _ in range(3):
        with pytest.raises(InputSignatureError, match=r"pair must be a dict with keys \['a', 'b'\]") as info:
            bad("c").call(runtime)
        assert isinstance(info.value.__cause__, Exception) and "'b'" in str(info.value.__cause__)
        messages.append(str(info.value))
    assert captures[0] == 1 and len(set(messages)) == 1
    assert int(model.calls) == 0 and module.shapes_prepared == 1, "nothing ran, nothing was prepared"
    with torch.no_grad():
        torch.testing.assert_close(GOOD.call(runtime), GOOD.call(model))


def test_refusals_are_kept_to_the_bound_least_recently_used_first(monkeypatch: pytest.MonkeyPatch) -> None:
    module = StaticModule(Counted(), GOOD, StaticOptions(measure_choices=False, max_signatures=2))
    runtime = module.runtime()
    captures = counting(monkeypatch, static_module, "capture_graph")
    for key in ("c", "d", "c", "e", "c", "d"):  # d is dropped for e; c, used last, is kept
        with pytest.raises(InputSignatureError):
            bad(key).call(runtime)
    assert captures[0] == 4


def test_a_refusal_under_an_autocast_the_caller_entered_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    module = StaticModule(Counted(), GOOD, QUICK)
    captures = counting(monkeypatch, static_module, "capture_graph")
    with pytest.raises(InputSignatureError, match="autocast"), torch.autocast("cpu"):
        module.prepared_for(bad("c"))
    with pytest.raises(InputSignatureError, match="KeyError"):
        module.prepared_for(bad("c"))
    assert captures[0] == 2


def test_threads_repeating_a_refused_call_capture_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    module = StaticModule(Counted(), GOOD, QUICK)
    captures = counting(monkeypatch, static_module, "capture_graph")
    refused: list[BaseException] = []

    def work() -> None:
        runtime = module.runtime()
        for _ in range(3):
            try:
                bad("c").call(runtime)
            except BaseException as error:  # counted by the main thread
                refused.append(error)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(refused) == 9 and all(isinstance(error, InputSignatureError) for error in refused)
    assert captures[0] == 1


class Lookup(nn.Module):
    """An embedding read at the call's indices, then a linear layer on float32 weights."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(10, 4)
        self.linear = nn.Linear(4, 4)

    def forward(self, indices: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.embedding(indices)


def lookup(rows: int, index: int = 1, dtype: torch.dtype = torch.float32, width: int = 4) -> Inputs:
    return Inputs.of(torch.full((rows,), index), torch.ones(rows, width, dtype=dtype))


@pytest.mark.parametrize(
    "call, error, scope",
    [
        (lookup(3, width=5), CaptureError, "a shape the layer cannot take"),
        (lookup(3, dtype=torch.float64), InputSignatureError, "a dtype the weights refuse, after the capture"),
    ],
    ids=["capture", "after capture"],
)
def test_a_failure_of_the_signature_is_prepared_once_then_refused_at_once(
    monkeypatch: pytest.MonkeyPatch, call: Inputs, error: type[Exception], scope: str
) -> None:
    """Before, neither was kept: the shape differs from the example's only in a size (the
    model's own error, uncached), and the dtype fails at the resolver's run of ``linear``, after
    the capture (captured and prepared again at every repeat). Both fail for every call of their
    signature."""
    model = Lookup().eval()
    runtime = StaticModule(model, lookup(2), QUICK).runtime()
    captures = counting(monkeypatch, static_module, "capture_graph")
    messages = set()
    for _ in range(3):
        with pytest.raises(error) as info:
            call.call(runtime)
        messages.add(str(info.value))
    assert captures[0] == 1, scope
    assert len(messages) == 1
    with torch.no_grad():
        torch.testing.assert_close(lookup(2, 3).call(runtime), lookup(2, 3).call(model))


@pytest.mark.parametrize("call", [lookup(3, width=5), lookup(3, dtype=torch.float64)], ids=["capture", "after capture"])
def test_a_kept_refusal_holds_none_of_the_calls_tensors(call: Inputs) -> None:
    """Each repeat raises an error of the first one's type and message, and the module does not
    keep the refused calls' tensors alive (nor, after the capture, the intermediates the resolver
    made from them): before, the kept error's traceback held every frame of the first call.
    Logging is off meanwhile: torch logs the fake kernel's failure with its traceback, and
    pytest's log capture keeps the record."""
    runtime = StaticModule(Lookup().eval(), lookup(2), QUICK).runtime()  # alive to the end: it keeps the refusal
    logging.disable(logging.CRITICAL)
    try:
        held, errors = _refuse_twice(runtime, call)
    finally:
        logging.disable(logging.NOTSET)
    gc.collect()
    assert [ref() for ref in held] == [None, None]
    assert len(errors) == 2 and errors[0] == errors[1]
    assert len(runtime.module._refused) == 1


def _refuse_twice(
    runtime: StaticRuntime, call: Inputs
) -> tuple[list[weakref.ref[torch.Tensor]], list[tuple[type, str]]]:
    """Two refused calls like ``call`` on ``runtime``: weak references to their tensors, and what
    each raised."""
    calls = [Inputs(tuple(tensor.clone() for tensor in call.args), {}) for _ in range(2)]
    held = [weakref.ref(inputs.args[1]) for inputs in calls]
    errors = []
    for inputs in calls:
        try:
            inputs.call(runtime)
        except Exception as error:
            errors.append((type(error), str(error)))
    return held, errors


def test_a_failure_of_the_values_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """An index out of range fails the resolver's run of ``embedding`` on the call's values, not
    on zeros: each repeat is prepared again, and a call of the same signature in range runs."""
    model = Lookup().eval()
    runtime = StaticModule(model, lookup(2), QUICK).runtime()
    captures = counting(monkeypatch, static_module, "capture_graph")
    for _ in range(2):
        with pytest.raises(UnsupportedOpError, match="index out of range") as info:
            lookup(3, index=12).call(runtime)
        assert info.value.scope is FailureScope.VALUES
    assert captures[0] == 2
    with torch.no_grad():
        torch.testing.assert_close(lookup(3, index=9).call(runtime), lookup(3, index=9).call(model))


@pytest.mark.parametrize(
    "op, args, scope",
    [
        (torch.ops.aten.mm.default, (torch.ones(2, 3, dtype=torch.float64), torch.ones(3, 2)), FailureScope.SIGNATURE),
        (torch.ops.aten.mm.default, (torch.ones(2, 3), torch.ones(4, 2)), FailureScope.SIGNATURE),
        (torch.ops.aten.embedding.default, (torch.ones(3, 2), torch.tensor([5])), FailureScope.VALUES),
        (torch.ops.aten.index_select.default, (torch.ones(3), 0, torch.tensor([3])), FailureScope.VALUES),
        (torch.ops.aten.linalg_cholesky_ex.default, (-torch.eye(2),), FailureScope.SIGNATURE),  # no raise: ex
        (torch.ops.aten.cholesky.default, (-torch.eye(2),), FailureScope.VALUES),
        (torch.ops.aten.multinomial.default, (torch.tensor([-1.0, 2.0]), 1), FailureScope.VALUES),
    ],
    ids=["dtypes", "shapes", "embedding", "index_select", "cholesky_ex", "cholesky", "multinomial"],
)
def test_a_failure_is_the_signatures_where_other_values_fail_alike(op: Any, args: tuple, scope: FailureScope) -> None:
    graph = torch.fx.Graph()
    try:
        op(*args)
    except Exception as error:
        assert failure_scope(op, args, {}, error, graph) is scope
    else:
        assert scope is FailureScope.SIGNATURE  # the one that runs: no failure to judge


def test_a_failure_in_a_graph_with_data_dependent_sizes_is_the_values() -> None:
    """Shapes there follow the values (an empty ``nonzero`` result that an op refuses)."""

    class Selected(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[x > 0].max()

    graph = torch.export.export(Selected(), (torch.ones(3),)).graph
    error = RuntimeError("max(): Expected reduction dim to be specified for input.numel() == 0.")
    assert failure_scope(torch.ops.aten.max.default, (torch.ones(0),), {}, error, graph) is FailureScope.VALUES


def _masked(x: Any, mask: Any = None, scale: float = 2.0, *, flag: bool = False) -> None:
    """A signature of every parameter kind but ``*args`` (which rebinding leaves as given)."""


def _extras(x: Any, y: Any, /, z: int = 1, **extra: Any) -> None:
    """Positional-only parameters and keywords the signature does not name."""


@pytest.mark.parametrize("function, names", [(_masked, "x mask scale flag"), (_extras, "x y z w")])
def test_every_adapter_moves_a_call_as_the_slow_path_does_or_passes_it_on(
    function: Callable[..., Any], names: str
) -> None:
    """Every call of every form (of 0-3 positional arguments and up to two keywords, each a
    tensor, None or a float), through the adapter made from every call of its form: moved as
    :func:`rebinding` moves it, or passed on as given (another form, a left-out scalar of another
    value), or with an argument its program took for a value other than its default given that
    default (the program's guard holds the other value: it sends that call to the slow path)."""
    tensor = torch.zeros(1)
    parameters = inspect.signature(function).parameters
    forms: dict[Form, list[Inputs]] = {}
    for positional in range(4):
        for keywords in (keys for size in range(3) for keys in itertools.combinations(names.split(), size)):
            for values in itertools.product((tensor, None, 2.0, 3.0), repeat=min(2, positional + len(keywords))):
                given = [*values, *[tensor] * (positional + len(keywords) - len(values))]
                inputs = Inputs(tuple(given[:positional]), dict(zip(keywords, given[positional:])))
                forms.setdefault(Form.of(inputs), []).append(inputs)
    adapters, moved = Adapters("check"), 0
    for example_form in (Form(1, frozenset()), Form(2, frozenset({names.split()[-1]}))):
        for calls in forms.values():
            for first in calls:
                made = rebinding(function, first, example_form.positional, example_form.keywords)
                if made is None:
                    continue
                adapter = adapters.bind(made, lambda *args, **kwargs: Inputs(args, kwargs), [None])
                for call in calls:
                    got: Inputs = adapter(*call.args, **call.kwargs)
                    again = rebinding(function, call, example_form.positional, example_form.keywords)
                    want = call if again is None else again.apply(call)
                    extra = got.kwargs.keys() - want.kwargs.keys()
                    kept = {key: value for key, value in got.kwargs.items() if key not in extra}
                    guarded = all(
                        _is_default(parameters[key], got.kwargs[key])
                        and not _is_default(parameters[key], made.apply(first).kwargs[key])
                        for key in extra
                    )
                    assert same(got, call) or (guarded and same(Inputs(got.args, kept), want)), (first, call, got)
                    moved += not same(got, call)
    assert moved > 1000


def same(a: Inputs, b: Inputs) -> bool:
    return (
        len(a.args) == len(b.args)
        and all(x is y for x, y in zip(a.args, b.args))
        and a.kwargs.keys() == b.kwargs.keys()
        and all(a.kwargs[key] is b.kwargs[key] for key in a.kwargs)
    )
