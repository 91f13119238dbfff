"""Whether every fresh preparation of a model gives the same numbers.

Much of a program is chosen by timing at prepare time (the call that runs a node, out variant or
fallback, whether it runs below ``ADInplaceOrView``), so two preparations of one model can be two
programs. Each choice is meant to give the op's own results; ``hf_luke_entities`` showed one that
did not (its entity queries' ``linear`` below the key took ``bmm`` for eager's ``mm``, 6e-4 off in
the preparations whose timing chose that), and no single preparation can show such a fault, since
which program comes out is the machine's load's choice. This prepares each model several times in
one process, runs each on the model's two shapes, and compares every preparation's outputs with the
first's with no tolerance (srbench's equivalence check), and each with eager's.

    python -m benchmarks.preparation_stability --models hf_luke_entities,transformer_encoder

Models are the zoo's (:func:`srbench.zoo.load_zoo`) or the outside sweep's
(:func:`benchmarks.outside_models.outside_models`), by name. The exit status is 1 where some
model's preparations disagree.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from srbench.inputs import Inputs
from srbench.measure.equivalence import EquivalenceError, compare, difference, eager_answer, leaves
from srbench.static import StaticModule, StaticOptions


@dataclass(frozen=True)
class Subject:
    """A model to prepare again and again: how to build it and its call at each of two shapes."""

    name: str
    build: Callable[[], torch.nn.Module]
    calls: Callable[[], tuple[Inputs, Inputs]]


@dataclass(frozen=True)
class Stability:
    """One model's preparations: each one's largest difference from eager at the two shapes, and
    whether all gave the first's outputs exactly."""

    name: str
    differences: tuple[tuple[float, float], ...]
    agree: bool


def subject(name: str) -> Subject:
    """The zoo's model ``name``, else the outside sweep's; a ``KeyError`` naming both places."""
    from srbench.zoo import load_zoo

    zoo = load_zoo()
    if name in {case.name for case in zoo.select()}:
        case = zoo.get(name)
        return Subject(
            name,
            case.build,
            lambda: (Inputs.coerce(case.make_inputs(0, None)), Inputs.coerce(case.make_inputs(1, None))),
        )
    from benchmarks.outside_models import outside_models

    outside = {case.name: case for case in outside_models()}
    if name not in outside:
        raise KeyError(f"no model {name!r} in the zoo or in the outside-models sweep")
    found = outside[name]
    return Subject(
        name, found.build, lambda: (Inputs.coerce(found.make_inputs(0)), Inputs.coerce(found.make_inputs(1)))
    )


def _largest_difference(got: Any, expected: Any) -> float:
    """The largest absolute difference over the outputs (:func:`srbench.measure.equivalence.difference`)."""
    pairs = zip(leaves(got), leaves(expected))
    return max(
        (difference(path, a, e).max_abs for (path, a), (_, e) in pairs if isinstance(a, torch.Tensor)), default=0.0
    )


def _same_bits(got: Any, first: Any) -> bool:
    """Whether two preparations' outputs are equal, the equivalence check at no tolerance."""
    try:
        compare(got, first, rtol=0.0, atol=0.0, run="a later preparation against the first")
    except EquivalenceError:
        return False
    return True


def stability(model: Subject, preparations: int) -> Stability:
    """``model`` prepared ``preparations`` times afresh on its first shape (the default options),
    each run on both shapes."""
    torch.manual_seed(0)
    built = model.build().eval()
    calls = model.calls()
    expected = [eager_answer(built, call).outputs for call in calls]
    first: list[Any] | None = None
    differences, agree = [], True
    for _ in range(preparations):
        runtime = StaticModule(built, calls[0], StaticOptions(), name=model.name).runtime()
        outputs = [pytree.tree_map_only(torch.Tensor, torch.clone, call.clone().call(runtime)) for call in calls]
        differences.append((_largest_difference(outputs[0], expected[0]), _largest_difference(outputs[1], expected[1])))
        if first is None:
            first = outputs
        agree = agree and all(_same_bits(a, b) for a, b in zip(outputs, first))
    return Stability(model.name, tuple(differences), agree)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", required=True, help="comma-separated model names (zoo or outside sweep)")
    parser.add_argument("--preparations", type=int, default=8, help="fresh preparations per model (default 8)")
    parser.add_argument("--threads", type=int, help="intra-op threads (default: torch's, one per core)")
    options = parser.parse_args(argv)
    if options.preparations < 2:
        parser.error(f"--preparations must be at least 2 to compare preparations, got {options.preparations}")
    if options.threads is not None:
        torch.set_num_threads(options.threads)
    unstable = 0
    print(f"{'model':<28} {'agree':<6} largest difference from eager per preparation (shape 0 / shape 1)")
    for name in options.models.split(","):
        result = stability(subject(name), options.preparations)
        unstable += not result.agree
        cells = " ".join(f"{a:.1e}/{b:.1e}" for a, b in result.differences)
        print(f"{result.name:<28} {'yes' if result.agree else 'NO':<6} {cells}", flush=True)
    return 1 if unstable else 0


if __name__ == "__main__":
    raise SystemExit(main())
