"""The peer runtime plugins (eager, TorchScript, PyTorch's C++ Static Runtime, torch.compile, ONNX
Runtime) on models from outside the zoo, each case run as a suite case runs it.

For each model of ``benchmarks/outside_models.py`` named (a sample: see ``SAMPLE``), and each
runtime, it does what ``srbench.pytest_plugin.run.run_case`` does: eager's answers to both calls,
the runtime prepared on the first, the equivalence protocol (first shape, second shape, first
again). The outcome is what pytest would show for that case:

- ``pass``; ``skip`` (``RuntimeUnavailable``) and ``xfail`` (``UnsupportedRuntime`` or
  ``CaptureError``), each with its reason;
- ``wrong``: the protocol found a difference (a failing case with the difference named);
- ``crash``: any other exception, at preparing or at a call (pytest shows its traceback only);
- ``hang``: the case ran past its time limit.

Each model runs in its own process (one intra-op thread) under a time limit per case, so a hang
or a crash of the process is recorded and the sweep goes on::

    .venv/bin/python benchmarks/outside_peers.py     # SAMPLE x eager, torchscript, static_runtime, onnxruntime
    .venv/bin/python benchmarks/outside_peers.py --runtimes compile --only mha_masks,hf_llama
    .venv/bin/python benchmarks/outside_peers.py --json results/outside_peers.json

Exit status 0 when no case is wrong, crashed or hung.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

RUNTIMES = ("eager", "torchscript", "static_runtime", "onnxruntime")
SAMPLE = (
    # stock torch.nn pieces
    "transformer_decoder", "mha_masks", "gru_bilstm", "conv1d_audio", "unet_small", "separable_shuffle",
    "resampling", "packed_gru", "conv_variants", "norms_pools", "stock_pieces", "rnn_cells",
    "embedding_bag_offsets",
    # hand-written semantics: calls, outputs, writes, control flow
    "mixed_outputs", "call_styles", "inplace_ops", "call_containers", "output_aliases",
    "writes_inputs_and_state", "torch_cond", "scalar_kwargs", "nested_none", "zero_dim_inputs", "int_shapes",
    "writes_strided_inputs", "pytree_calls", "varargs_structseq", "str_bool_branches", "empty_then_length",
    "inputs_swapped", "call_forms",
    # dtypes
    "float64_int64", "bfloat16_convnet", "float16_convnet", "uint8_bitwise", "complex_spectral", "int8_arithmetic",
    "dtype_promotion", "channels_last_convnet", "nan_inf",
    # transformers
    "hf_roberta", "hf_llama", "hf_gpt2_padded", "hf_deit", "hf_bert_all_outputs", "hf_t5_seq2seq", "hf_wav2vec2",
    "hf_distilbert_loss",
)  # fmt: skip


class _TimeLimit(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _TimeLimit


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:240]


def run_one(case: Any, runtime_name: str, seconds: int) -> dict[str, str]:
    """One suite case: the model ``case`` under ``runtime_name``, classified as pytest shows it."""
    import torch

    from srbench.graph import CaptureError
    from srbench.measure.equivalence import EquivalenceError, check_equivalence, eager_answer
    from srbench.runtimes import RuntimeOptions, RuntimeUnavailable, UnsupportedRuntime, eager_mode_of, get_runtime

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    stage = "build"
    try:
        torch.manual_seed(0)
        model = case.build().eval()
        calls = [case.make_inputs(0), case.make_inputs(1)]
        runtime_class = get_runtime(runtime_name)
        expected = [eager_answer(model, call, eager_mode_of(runtime_class)) for call in calls]
        stage = "prepare"
        try:
            runtime = runtime_class(model, calls[0], RuntimeOptions(threads=1))
        except RuntimeUnavailable as error:
            return {"outcome": "skip", "detail": _reason(error)}
        except (UnsupportedRuntime, CaptureError) as error:
            return {"outcome": "xfail", "detail": _reason(error)}
        stage = "run"
        try:
            check_equivalence(runtime, calls[0], calls[1], expected[0], expected[1], rtol=case.rtol, atol=case.atol)
        except UnsupportedRuntime as error:  # refused at a later call: run_case's expected failure too
            return {"outcome": "xfail", "detail": f"at a later call: {_reason(error)}"}
    except _TimeLimit:
        return {"outcome": "hang", "detail": f"over {seconds} s at {stage}"}
    except EquivalenceError as error:
        return {"outcome": "wrong", "detail": _reason(error)}
    except Exception as error:  # what pytest would show as a traceback
        outcome = "unavailable" if stage == "build" else "crash"
        return {"outcome": outcome, "detail": f"at {stage}: {_reason(error)}"}
    finally:
        signal.alarm(0)
    return {"outcome": "pass", "detail": ""}


def _worker(name: str, runtimes: list[str], seconds: int) -> None:
    """Run one model under each runtime, one JSON line per case on stdout."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import torch

    from benchmarks.outside_models import outside_models

    torch.set_num_threads(1)
    case = next(case for case in outside_models() if case.name == name)
    for runtime in runtimes:
        start = time.process_time()
        result = run_one(case, runtime, seconds)
        result.update(model=name, runtime=runtime, cpu_s=f"{time.process_time() - start:.1f}")
        print(json.dumps(result), flush=True)


def _sweep(name: str, runtimes: list[str], seconds: int) -> list[dict[str, str]]:
    """The worker's results; a case it did not report (the process died or hung in C++) is a
    crash or hang of that case."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", name, "--runtimes", ",".join(runtimes)]
    command += ["--seconds", str(seconds)]
    environment = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * len(runtimes) + 60,
                              env=environment)  # fmt: skip
        output, error, status = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        error, status = "timed out", None
    results = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    seen = {result["runtime"] for result in results}
    for runtime in runtimes:
        if runtime not in seen:
            last = (error or "").strip().splitlines()[-1:] or [""]
            outcome = "hang" if status is None else "crash"
            results.append({"model": name, "runtime": runtime, "outcome": outcome,
                            "detail": f"the process ended (status {status}): {last[0][:200]}"})  # fmt: skip
            break
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated model names (default: SAMPLE)")
    parser.add_argument("--runtimes", default=",".join(RUNTIMES), help="comma-separated runtime names")
    parser.add_argument("--seconds", type=int, default=180, help="time limit per case")
    parser.add_argument("--json", metavar="FILE", help="also write every case as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    runtimes = options.runtimes.split(",")
    if options.worker:
        _worker(options.worker, runtimes, options.seconds)
        return 0
    names = options.only.split(",") if options.only else list(SAMPLE)
    results = []
    for name in names:
        for result in _sweep(name, runtimes, options.seconds):
            results.append(result)
            print(f"{name:<26} {result['runtime']:<15} {result['outcome']:<6} {result['detail']}", flush=True)
    counts = Counter((result["runtime"], result["outcome"]) for result in results)
    for runtime in runtimes:
        print(runtime, dict(sorted((outcome, n) for (r, outcome), n in counts.items() if r == runtime)))
    if options.json:
        with open(options.json, "w") as file:
            json.dump(results, file, indent=1)
    return 1 if any(result["outcome"] in ("wrong", "crash", "hang") for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
