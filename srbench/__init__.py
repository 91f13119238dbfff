"""srbench: conformance and benchmark suites for static runtimes and memory planners of
PyTorch inference graphs.

The data flow (see README): a model is captured (``srbench.graph``), its tensors' lifetimes are
analysed (``srbench.memory.lifetimes``), a planner (``srbench.planners``) places them in one slab,
and a runtime (``srbench.runtimes``) runs the graph; suites compare every runtime with eager.
"""

__version__ = "0.1.0"
