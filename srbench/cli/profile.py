"""``srbench profile``: where the time of srbench's static runtime goes, node by node.

Prepares a zoo model with :class:`srbench.static.StaticModule` and runs the profiling variant
of its generated code: setup and first-iteration time, time per node and per node kind (mean,
percent, count), slab alloc/free time, out-variant nodes, managed tensors and bytes. Prints an
aligned table, or the profile as JSON with ``--json``; ``--code`` prints the generated
``forward`` function instead (every line a call runs: kernels, views, allocations, the guard).
"""

from __future__ import annotations

import argparse

from srbench.cli._args import ExitStatus, non_negative_int, positive_int, print_error
from srbench.options import MAX_THREADS, StaticOptions, add_option_flags, options_from_flags


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "profile",
        help="per-op profile of a model on srbench's static runtime",
        description="Prepare a zoo model with srbench's static runtime and time every node of the "
        "prepared graph, as PyTorch Static Runtime's benchmark_individual_ops does.",
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="a zoo model (see `srbench models`)")
    parser.add_argument("--iterations", type=positive_int, default=100, help="timed iterations (default 100)")
    parser.add_argument("--warmup", type=non_negative_int, default=10, help="untimed iterations first (default 10)")
    parser.add_argument("--batch", type=positive_int, metavar="N", help="batch size (default: the model's)")
    parser.add_argument("--threads", type=positive_int, default=1, help="intra-op threads (default 1)")
    add_option_flags(parser.add_argument_group("static runtime options"), StaticOptions)
    parser.add_argument("--top", type=positive_int, default=15, help="slowest nodes to list (default 15)")
    parser.add_argument("--json", action="store_true", help="print the profile as JSON")
    parser.add_argument(
        "--code", action="store_true", help="print the generated forward function instead (what a call runs)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> ExitStatus:
    import torch

    from srbench.graph import CaptureError
    from srbench.registry import UnknownPluginError
    from srbench.static import StaticModule, UnsupportedOpError
    from srbench.zoo import ExampleInputsError, ProviderUnavailable, load_zoo

    if args.threads > MAX_THREADS:  # torch's own refusal was an "Overflow" traceback
        print_error("profile", f"--threads {args.threads}: expected at most {MAX_THREADS:,} (torch takes a C int)")
        return ExitStatus.UNUSABLE
    torch.set_num_threads(args.threads)
    try:
        case = load_zoo().get(args.model)
        options = options_from_flags(args, StaticOptions)
        inputs = case.example_inputs(0, batch=args.batch)
        module = StaticModule(case.model(), inputs, options, name=case.name)
    except (UnknownPluginError, ProviderUnavailable, ExampleInputsError, CaptureError, UnsupportedOpError) as error:
        print_error("profile", str(error))
        return ExitStatus.UNUSABLE
    if args.code:
        print(module.prepared.program.function_source(), end="")
        return ExitStatus.DONE
    profile = module.runtime().profile(inputs, iterations=args.iterations, warmup=args.warmup)
    print(profile.to_json() if args.json else profile.table(top=args.top))
    return ExitStatus.DONE
