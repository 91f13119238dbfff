"""Which nodes run below the ``ADInplaceOrView`` dispatch key as well as below autograd's.

A run is below the autograd dispatch keys (:meth:`srbench.static.codegen.CodeWriter.head`), so an
op goes straight to ``ADInplaceOrView`` and its backend kernel. Eager, under ``no_grad`` or not,
reaches a functional op's kernel through the op's autograd kernel, which redispatches below *both*
the autograd keys and ``ADInplaceOrView``: the ops that kernel calls inside itself make no view
metadata and bump no version counters. Below the autograd keys alone they do:
``_embedding_bag_forward_only`` calls 48 ops, a dozen of them views (``select``, ``expand``) and
as many in-place writes of its own temporaries, and ``embedding_bag`` took about 0.6-0.9 µs (of
10) longer a call, four times in each call of Wide & Deep.

Running such a node below ``ADInplaceOrView`` too changes nothing a caller can see, where its op
is *functional by schema*: no argument annotated as written, no result annotated as aliasing one
(:func:`functional`), and eager reaches its kernel through an autograd kernel. An op that has none
(``CompositeImplicitAutograd``: ``linear``, ``matmul``) runs its inner ops through theirs in eager,
each inner view made with autograd's metadata, and what an inner op decides can hang on that:
``matmul`` folds a 3-d input into one ``mm`` where the other operand requires grad, and a weight's
``t()`` made below the key carries no ``requires_grad``, so ``linear`` on a strided 3-d input ran
``bmm`` instead, 4e-7 off eager's and 6e-4 after LUKE's layers (its entities' states, in the
preparations whose timing chose the switch). Rather than read kernels' code for such branches, the
node's call is run both ways on the example inputs at prepare time, and a call whose results
differ bit for bit keeps the key (:func:`changes_results`): the branches hang on shapes, strides
and flags, which the program's input guard and its constant weights fix.

``ADInplaceOrView`` has kernels only for views and in-place ops; a functional op falls through it,
so what is skipped is the tracking of the kernel's inner ops, which eager skips as well. The node's
results are then either fresh tensors, which eager's also are (version 0, no ``_base``), or the out
variant's buffers (the slab's tensors, a run buffer or the output arena), whose version counters
nobody outside the run reads before the caller gets them: eager's result is a fresh tensor at
version 0, where the out variant's write bumped the buffer's counter. Views, in-place and mutating
ops, control-flow and opaque callables, and the write-back of mutated inputs run with
``ADInplaceOrView`` as before (a ``getitem`` of a multi-result op's tuple dispatches nothing and
runs either way). The caller's dispatch state is read once per call and given back after the last
skipped node, and in the run's ``finally``.

Switching the key costs two calls (about 0.15 µs, :data:`_EXCLUDE`), so a node runs below it only
where that measurably pays: its call is timed at prepare time, on the example inputs, both ways
(the switch included) in interleaved rounds, and the node is :attr:`ViewTracking.SKIPPED` only if
the switched call's best time is :data:`MARGIN` lower. Most out variants gain nothing (``addmm``
makes one inner ``expand``: 0.02 µs); such a node is :attr:`ViewTracking.EITHER`: it runs in
whichever state the nodes before it left, so it neither switches nor splits a run of skipped nodes
(the MLP's middle layer, between the layers that make its output, which run below the key so that
the output comes back at eager's version counter: :meth:`srbench.static.choose.Chooser._write_tracking`).

The switch is per thread: on several streams each thread running nodes switches its own
(:class:`srbench.static.codegen.TrackingSwitches`; a worker thread starts with the default state).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

# Timed only below this many seconds a call: the gain is a few tenths of a microsecond per inner
# view, under the margin beside a longer kernel.
MEASURED_BELOW = 50e-6
# The switched call must be at least this much quicker (best times, switch included) to be kept.
MARGIN = 0.02
# Interleaved rounds of the two timings (each a best of a few calls).
ROUNDS = 5
# The key switched, and the two calls that switch it for this thread (about 0.07 µs each: the
# ``_AutoDispatchBelowADInplaceOrView`` context manager costs 0.4-0.5 µs per use).
AD_INPLACE_OR_VIEW = torch._C.DispatchKey.ADInplaceOrView
_EXCLUDED = torch._C._dispatch_tls_is_dispatch_key_excluded
_EXCLUDE = torch._C._dispatch_tls_set_dispatch_key_excluded


class ViewTracking(enum.Enum):
    """Whether a node's call goes through ``ADInplaceOrView`` (its inner views tracked, its inner
    in-place writes counted), as every node did, or skips it, as eager's autograd kernel does."""

    KEPT = "kept"
    SKIPPED = "skipped"
    EITHER = "either"  # functional, no gain measured: runs as the nodes before it left the key, no switch
    # measured only, never a plan's: its results differ below the key, so it keeps it whatever else
    # would send it below (an output's version counter: srbench.static.choose.Chooser._write_tracking)
    NEEDED = "needed"


def functional(op: Any) -> bool:
    """Whether ``op`` is an ATen op whose schema writes no argument and aliases none."""
    if not isinstance(op, torch._ops.OpOverload):
        return False
    schema = op._schema
    return not schema.is_mutable and all(item.alias_info is None for item in (*schema.arguments, *schema.returns))


def excluded() -> bool:
    """Whether this thread's dispatch excludes ``ADInplaceOrView`` (a caller's own guard may;
    inference mode instead takes it out of the included keys, which excluding it leaves alone)."""
    return _EXCLUDED(AD_INPLACE_OR_VIEW)


def timed_both_ways(run: Callable[[], Any]) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``run`` as it is and ``run`` below ``ADInplaceOrView``, each through one Python frame of
    its own: they differ by what the generated code adds around a skipped node, the two calls
    switching the key there and back."""
    before, switch, key = excluded(), _EXCLUDE, AD_INPLACE_OR_VIEW

    def kept() -> Any:
        return run()

    def skipped() -> Any:
        switch(key, True)
        try:
            return run()
        finally:
            switch(key, before)

    return kept, skipped


def changes_results(kept: Callable[[], Any], skipped: Callable[[], Any], same: Callable[[Any, Any], bool]) -> bool:
    """Whether a call gives other results below ``ADInplaceOrView`` (``skipped``) than through it
    (``kept``): ``same`` (the resolver's check of a candidate's results, values bit for bit and
    strides) says no, or the call raises either way. Each is run once; the first's results are
    copied first, as an out variant's second run writes the same buffers."""
    try:
        first = pytree.tree_map_only(torch.Tensor, torch.clone, kept())
        second = skipped()
    except Exception:  # the caller times the call; one that fails here is not switched
        return True
    return not same(first, second)


def measured_tracking(
    op: Any,
    run: Callable[[], Any],
    seconds: float | None,
    best_time: Callable[[Callable[[], Any]], float],
    same: Callable[[Any, Any], bool],
) -> ViewTracking:
    """How a node of ``op`` whose call is ``run`` should run: :attr:`ViewTracking.SKIPPED` where
    ``op`` is :func:`functional`, the call took under :data:`MEASURED_BELOW` (``seconds``, as
    timed when it was chosen) and it measures at least :data:`MARGIN` quicker so, below the
    autograd keys as a run is (``best_time``: the best time of a few calls of its argument);
    :attr:`ViewTracking.EITHER` for any other functional op; :attr:`ViewTracking.NEEDED` for a
    call whose results differ below the key by ``same`` (:func:`changes_results`: an ``EITHER``
    node after a skipped one would run below it too); :attr:`ViewTracking.KEPT` for the rest."""
    if not functional(op):
        return ViewTracking.KEPT
    runs = timed_both_ways(run)
    with torch._C._AutoDispatchBelowAutograd():
        if changes_results(*runs, same):
            return ViewTracking.NEEDED
    if seconds is None or seconds >= MEASURED_BELOW:
        return ViewTracking.EITHER
    best = [float("inf"), float("inf")]
    with torch._C._AutoDispatchBelowAutograd():
        for round_ in range(ROUNDS):
            for index in (0, 1) if round_ % 2 == 0 else (1, 0):
                best[index] = min(best[index], best_time(runs[index]))
    kept, skipped = best
    return ViewTracking.SKIPPED if skipped <= (1 - MARGIN) * kept else ViewTracking.EITHER
