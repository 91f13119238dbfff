"""``srbench estimate``: memory and FLOPs of a zoo model, node by node, without running it.

The model is built and captured on fake tensors (nothing real is allocated, so any batch size
costs the same), on the CPU or on a device that is not present (``--device cuda``). Prints a
per-node table and totals: eager's peak on the device's allocator, the lower bound, and each
planner's slab; ``--json`` prints the whole estimate. A model that cannot be traced to the end is
estimated as far as it goes, with the node where it stopped and why; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import json

from srbench.cli._args import ExitStatus, add_planning_options, comma_separated, planner_options, print_error


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "estimate",
        help="memory and FLOPs of a model per node, estimated on fake tensors without running it",
        description="Build and capture a zoo model on fake tensors (any batch size, any device, present or "
        "not) and estimate per node: output bytes, temporaries, FLOPs, bytes alive in eager mode; in total: "
        "eager's peak on the device's allocator, the lower bound and each planner's slab.",
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="a zoo model (see `srbench models`)")
    parser.add_argument(
        "--device", default="cpu", metavar="DEVICE", help="cpu or cuda; need not be present (default cpu)"
    )
    parser.add_argument(
        "--planners",
        type=comma_separated,
        metavar="A,B",
        help="comma-separated planners (default: every registered planner)",
    )
    parser.add_argument("--totals", action="store_true", help="print the totals only, not the per-node table")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")
    add_planning_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from srbench.estimate import estimate_case
    from srbench.estimate.report import format_estimate, to_json
    from srbench.memory.sources import _silenced
    from srbench.planners import get_planner, planner_names
    from srbench.registry import UnknownPluginError, unknown_name_message
    from srbench.zoo import ExampleInputsError, ProviderUnavailable, load_zoo

    if _device_type(args.device) not in ("cpu", "cuda"):
        print_error("estimate", f"--device must be cpu or cuda (cuda:N for one of several), got {args.device!r}")
        return ExitStatus.UNUSABLE
    names = args.planners or planner_names()
    for name in names:
        if name not in planner_names():
            print_error("estimate", unknown_name_message("planner", name, planner_names()))
            return ExitStatus.UNUSABLE
    try:
        case = load_zoo().get(args.model)
    except (UnknownPluginError, ProviderUnavailable) as error:
        print_error("estimate", str(error))
        return ExitStatus.UNUSABLE
    try:
        with _silenced(not args.verbose):
            estimate = estimate_case(
                case,
                batch=args.batch,
                device=args.device,
                planners=names,
                planner_options=planner_options({name: get_planner(name) for name in names}, args.time_limit),
                alignment=args.alignment,
                decompose=args.decompose,
            )
    except ExampleInputsError as error:  # a batch even fake tensors cannot hold: sizes past int64
        print_error("estimate", str(error))
        return ExitStatus.UNUSABLE
    if args.json:
        print(json.dumps(to_json(estimate), indent=2))
    else:
        print(format_estimate(estimate, nodes=not args.totals))
    for problem in estimate.problems if not estimate.complete else ():
        print_error("estimate", f"{args.model}: node {problem.node}: {problem.reason}")
    return ExitStatus.DONE if estimate.complete else ExitStatus.SOME_FAILED


def _device_type(text: str) -> str | None:
    """The type of the device ``text`` names, as torch reads it; None where torch reads none
    (``cuda:abc``, ``cuda:-1``: a traceback from deep in the estimate, where ``tpu`` was refused)."""
    import torch

    try:
        return torch.device(text).type
    except RuntimeError:
        return None
