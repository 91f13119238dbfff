"""``srbench observe``: every allocation of one run, per graph node, beside the estimate and the plan.

Runs a zoo model once (after a warm-up) in eager mode node by node and/or on srbench's static
runtime, with the profiler recording every allocation and free; attributes each to the node that
made it; and prints, per node, the estimated bytes (fake tensors), the bytes srbench's plan gives
it, and what each runtime really allocated (results, temporaries beyond them, bytes alive), then
the peaks and the ops that allocate workspaces of their own. The picture of live bytes over the
node sequence (eager observed, srbench observed, the plan, the lower bound) is written as PNG.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from srbench.cli._args import ExitStatus, positive_int, print_error
from srbench.options import StaticOptions, add_option_flags, options_from_flags

DEFAULT_PICTURES = Path("results") / "observe"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "observe",
        help="every allocation of one run attributed to its graph node, beside the estimate and the plan",
        description="Run a zoo model once in eager mode (node by node) and on srbench's static runtime, record "
        "every allocation and free with torch.profiler, attribute each to the node that made it, and set it "
        "beside the estimate on fake tensors and srbench's plan.",
    )
    parser.add_argument("--model", required=True, metavar="NAME", help="a zoo model (see `srbench models`)")
    parser.add_argument(
        "--runtime", choices=("eager", "srbench", "both"), default="both", help="what to observe (default both)"
    )
    parser.add_argument("--batch", type=positive_int, metavar="N", help="batch size (default: the model's)")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where to run (default cpu); on cuda the bytes are the caching allocator's blocks, with the bytes "
        "requested and the segments it opened from its own history",
    )
    parser.add_argument(
        "--picture",
        type=Path,
        metavar="FILE.png",
        help=f"where to write the picture (default {DEFAULT_PICTURES}/<model>.png)",
    )
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    add_option_flags(parser.add_argument_group("static runtime options"), StaticOptions)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import torch

    from srbench.fileio import atomic_path
    from srbench.graph import CaptureError
    from srbench.memory.sources import _silenced
    from srbench.observe.picture import live_bytes_png
    from srbench.observe.report import node_table, to_json, totals
    from srbench.observe.sidebyside import RUNTIMES, side_by_side
    from srbench.registry import UnknownPluginError
    from srbench.static import UnsupportedOpError
    from srbench.zoo import ExampleInputsError, ProviderUnavailable, load_zoo

    try:
        case = load_zoo().get(args.model)
        options = options_from_flags(args, StaticOptions)
    except (UnknownPluginError, ProviderUnavailable) as error:
        print_error("observe", str(error))
        return ExitStatus.UNUSABLE
    if args.device == "cuda" and not torch.cuda.is_available():
        print_error("observe", "--device cuda: no CUDA device here (`srbench estimate --device cuda` needs none)")
        return ExitStatus.UNUSABLE
    runtimes = RUNTIMES if args.runtime == "both" else (args.runtime,)
    try:
        with _silenced(True):
            sbs = side_by_side(case, runtimes=runtimes, batch=args.batch, options=options, device=args.device)
    except (CaptureError, UnsupportedOpError, UnknownPluginError, ExampleInputsError) as error:
        print_error("observe", str(error))
        return ExitStatus.UNUSABLE
    picture = args.picture or DEFAULT_PICTURES / f"{case.name}.png"
    picture.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(picture) as temporary:
        temporary.write_bytes(live_bytes_png(sbs))
    if args.json:
        print(json.dumps({**to_json(sbs), "picture": str(picture)}, indent=2))
    else:
        print(node_table(sbs) + "\n\n" + totals(sbs) + f"\npicture: {picture}")
    return ExitStatus.DONE
