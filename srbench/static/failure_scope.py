"""Whether an op's failure at prepare time is a property of the call's signature, not its values.

A call of a new signature is prepared on its own values: the resolver runs every op on them. An
op whose kernel refuses them (``mat1 and mat2 must have the same dtype`` for float64 inputs on
float32 weights) refuses every call of that signature, and the module keeps the refusal so that a
repeat is refused at once rather than captured and prepared again (about 190 ms on eight layers).
An index out of range or a matrix that is not positive-definite is the values' fault: a later call
of the same signature may run, so such a refusal must not be kept.

No kernel says which checks read values, and torch's meta kernels are not strict enough to ask
instead (``addmm``'s accepts mixed dtypes). So the op is run again on its arguments filled with
zeros, then with ones (same shapes, strides, dtypes, devices, scalars): a failure that comes back
the same (type and message) for all three sets of values is taken as the signature's. Zeros are
in range as indices of any non-empty dimension, ones are a singular matrix, and a message that
names a value differs, so the failures of values seen so far (indexing, ``embedding``,
``multinomial``, ``cholesky``, ``_assert_async``) run or differ on one of them and are not kept.
It is a check by examples, not a proof, and is asked only where shapes cannot depend on values: a
graph with data-dependent (unbacked) sizes, whose tensors' shapes at an op follow the values (an
empty ``nonzero`` result), keeps no refusal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._pytree import tree_map_only

from srbench.static.errors import FailureScope


def has_data_dependent_sizes(graph: torch.fx.Graph) -> bool:
    """Whether a node of ``graph`` has a size or scalar torch.export could only bound, not fix."""
    return any(free_unbacked_symbols(node.meta.get("val")) for node in graph.nodes)


def failure_scope(
    op: Callable[..., Any], args: tuple, kwargs: dict[str, Any], error: BaseException, graph: torch.fx.Graph
) -> FailureScope:
    """Whether ``op(*args, **kwargs)``, which raised ``error``, fails for its arguments' signature
    (see the module docstring), in ``graph``."""
    if has_data_dependent_sizes(graph):
        return FailureScope.VALUES
    for fill in (0, 1):
        try:
            filled = tree_map_only(torch.Tensor, functools.partial(torch.full_like, fill_value=fill), (args, kwargs))
            op(*filled[0], **filled[1])
        except Exception as again:
            if type(again) is type(error) and str(again) == str(error):
                continue
        return FailureScope.VALUES
    return FailureScope.SIGNATURE
