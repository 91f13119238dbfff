"""Declarative suites: YAML files whose axes (models, runtimes, planners, threads, memory flags,
devices, batch sizes) span a sweep of cases, each compared with eager by the pytest plugin.

A suite file looks like this (every axis but ``models`` and ``runtimes`` may be left out; it then
takes the runtime default)::

    description: small models, srbench against eager and PyTorch's Static Runtime
    axes:
      models: {names: [mlp]}            # or providers: [...], families: [...], all: true; exclude: [...]
      runtimes: [eager, srbench, static_runtime]
      planners: [greedy_by_size, linear_scan]     # read by srbench only
      threads: [1, 2]
      cleanup_activations: [true, false]          # read by srbench only
      enable_out_variant: [true]                  # read by srbench only
      manage_output_tensors: [false]              # read by srbench only
      devices: [cpu]                              # cpu, cuda
      batch: [null, 8]                            # null: the model's default batch size
    tolerance: {rtol: 1.0e-4, atol: 1.0e-5}       # default: each model's own
    tolerance_rules:                              # per-case tolerance, by rule (later rules win)
      - {runtime: torchscript, family: vision, atol: 1.0e-3}
    repetitions: 20                               # timed rounds per case under --benchmark
    slow: false                                   # mark every case slow
    exclude:                                      # drop cases matching every key of a rule
      - {runtime: srbench, planner: linear_scan, threads: 2}
    expected_failures:                            # known differences from eager: xfail, with the reason
      - {runtime: torchscript, family: vision, device: cuda, reason: "freeze folds batch norm; TF32"}
"""

from srbench.suites.loader import load_suite
from srbench.suites.spec import CaseSpec, Suite, SuiteError

__all__ = ["CaseSpec", "Suite", "SuiteError", "load_suite"]
