"""torch.func's levels left as they were by a capture that fails inside a transform.

``torch.vmap`` (and ``grad``, ``jvp``, ``functionalize``) pushes a level on functorch's dynamic
layer stack when it starts and pops it when it ends; an exported graph holds those pushes and
pops as calls (``_vmap_increment_nesting``, ``_vmap_decrement_nesting``). When torch's retrace of
such a graph fails between the two, or ``torch.export`` fails inside a vmapped function, nothing
pops the level: the whole process then runs as if inside that ``vmap`` (the next model's
``torch.randn`` at construction raises "vmap: called random operation while in randomness error
mode"). The sixteenth round of the outside-models sweep met it: S5's nested ``vmap`` made torch's
retrace fail, and every model built after it in that process was reported unavailable.
``torch.compile`` guards its calls the same way (``torch._dynamo.eval_frame``).

Forward-mode AD's dual level likewise (``torch.func.jvp``, ``forward_ad.dual_level``: export
holds ``_enter_dual_level``/``_exit_dual_level`` calls): a retrace failing between them left the
level entered, and every later dual level in the process failed with "Nested forward mode AD is
not supported at the moment" (a ``jvp`` of a ``jvp`` given a sliced input, in the relaid check's
test, broke round 22's forward-AD test run after it in the same process).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.autograd import forward_ad


@contextlib.contextmanager
def transform_levels_kept() -> Iterator[None]:
    """Run the block with functorch's dynamic layer stack and the thread's dispatch key sets
    restored to what they were when it started, however it ends."""
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    included, excluded = torch._C._dispatch_tls_local_include_set(), torch._C._dispatch_tls_local_exclude_set()
    outside_dual_level = forward_ad._current_level < 0  # entered through forward_ad's API, if at all
    try:
        with torch._C._ForceDispatchKeyGuard(included, excluded):
            yield
    except BaseException:
        if outside_dual_level:  # torch allows one dual level: the block's, if it left it entered
            with contextlib.suppress(RuntimeError):  # none left entered
                torch._C._exit_dual_level(level=0)
        raise
    finally:
        if torch._C._functorch.get_dynamic_layer_stack_depth() > depth:
            torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)
