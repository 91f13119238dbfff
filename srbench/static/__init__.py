"""srbench's static runtime: captured graphs run with out variants in one planned slab.

``StaticModule(model, example_inputs, StaticOptions(...))`` prepares a model once (shared,
read-only) for one example call (:class:`srbench.inputs.Inputs`, or a tuple of positional
arguments); ``module.runtime()`` gives a per-thread :class:`StaticRuntime` called as the model is,
``runtime(*args, **kwargs)``, returning what the model returns. :class:`RuntimePool` hands one
runtime per thread.
"""

from srbench.options import StaticOptions
from srbench.static.errors import (
    AmbientAutocastError,
    ConcurrentUseError,
    InferenceOnlyError,
    InputSignatureError,
    OutVariantWarning,
    UnsupportedOpError,
)
from srbench.static.module import StaticModule
from srbench.static.out_variants import OUT_VARIANTS, OutVariantRegistry, register_out_variant
from srbench.static.pool import RuntimePool
from srbench.static.profile import OpProfile
from srbench.static.runtime import StaticRuntime

__all__ = [
    "OUT_VARIANTS",
    "AmbientAutocastError",
    "ConcurrentUseError",
    "InferenceOnlyError",
    "InputSignatureError",
    "OpProfile",
    "OutVariantRegistry",
    "OutVariantWarning",
    "RuntimePool",
    "StaticModule",
    "StaticOptions",
    "StaticRuntime",
    "UnsupportedOpError",
    "register_out_variant",
]
