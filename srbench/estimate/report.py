"""An estimate for a person (an aligned table and totals) or for a program (JSON-ready dicts)."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from srbench.estimate.graph import GraphEstimate, NodeEstimate, NodeKind
from srbench.estimate.kernels import TemporarySource
from srbench.estimate.sizes import Bound, ByteCount
from srbench.formatting import aligned_table, format_bytes

# Nodes that never hold memory of their own: left out of the per-node table, summed in the totals.
_NOT_LISTED = (NodeKind.INPUT, NodeKind.PARAMETER, NodeKind.OUTPUT, NodeKind.NO_TENSOR)
_SOURCE_MARK = {TemporarySource.NONE: "", TemporarySource.DECOMPOSITION: " d", TemporarySource.OBSERVED: " o"}


def to_json(estimate: GraphEstimate) -> dict[str, Any]:
    """The estimate as plain data: enums by value, every field kept."""

    def plain(value: Any) -> Any:
        if isinstance(value, enum.Enum):
            return value.value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [plain(item) for item in value]
        return value

    document = plain(estimate)
    document["eager"].pop("step_peaks", None)  # per node as live_bytes already
    return document


def format_count(value: int) -> str:
    """``81.8 T``: a count in decimal units, three significant digits."""
    for unit, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return str(value)


def _bytes(count: ByteCount) -> str:
    if count.bound is Bound.UNKNOWN:
        return "?"
    return ("<= " if count.bound is Bound.UPPER else "") + format_bytes(count.nbytes)


def _short(op: str) -> str:
    return op.removeprefix("aten.").removesuffix(".default")


def _row(node: NodeEstimate, cuda: bool) -> tuple[str, ...]:
    temporary = _bytes(node.temporary) + _SOURCE_MARK[node.temporary_source] if node.temporary.nbytes else ""
    cells = [
        str(node.step),
        node.name,
        _short(node.op),
        node.kind.value,
        node.shape,
        _bytes(node.output) if node.output.nbytes or node.output.bound is not Bound.EXACT else "",
    ]
    if cuda:
        cells.append(format_bytes(node.block_bytes) if node.block_bytes else "")
    cells += [temporary, format_count(node.flops) if node.flops else "", format_bytes(node.live_bytes)]
    return tuple(cells)


def node_table(estimate: GraphEstimate) -> str:
    cuda = estimate.device.startswith("cuda")
    header = ["STEP", "NODE", "OP", "KIND", "SHAPE", "OUTPUT"] + (["BLOCK"] if cuda else [])
    header += ["TEMPORARY", "FLOPS", "LIVE"]
    rows = [_row(node, cuda) for node in estimate.nodes if node.kind not in _NOT_LISTED]
    numbers = {0, *range(5, len(header))}
    return aligned_table(header, rows, right_aligned=numbers)


def totals(estimate: GraphEstimate) -> str:
    cuda = estimate.device.startswith("cuda")
    where = (
        estimate.device
        if estimate.traced_on == estimate.device
        else f"{estimate.device} (traced on {estimate.traced_on})"
    )
    listed = sum(1 for node in estimate.nodes if node.kind not in _NOT_LISTED)
    lines = [f"{estimate.name} on {where}: {listed} op nodes" + ("" if estimate.complete else " (partial: see below)")]
    upper = "<= " if estimate.bound is not Bound.EXACT else ""
    rows = [
        ("FLOPs", format_count(estimate.flops), ""),
        ("parameters and buffers", format_bytes(estimate.parameter_bytes), ""),
        ("inputs", format_bytes(estimate.input_bytes), ""),
        ("outputs", format_bytes(estimate.output_bytes), "live to the end"),
        (
            "eager peak, requested",
            upper + format_bytes(estimate.eager.peak_requested),
            "frees at last use, temporaries",
        ),
    ]
    if cuda:
        rows += [
            (
                "eager peak, allocated",
                upper + format_bytes(estimate.eager.peak_allocated),
                "caching allocator's blocks",
            ),
            ("eager peak, reserved", upper + format_bytes(estimate.eager.peak_reserved), "its segments"),
        ]
    rows.append(
        ("lower bound", upper + format_bytes(estimate.lower_bound), f"intermediates, aligned to {estimate.alignment}")
    )
    lines.append(aligned_table(("TOTAL", "BYTES", ""), rows, right_aligned=(1,)))
    if estimate.plans:
        header = ("PLANNER", "SLAB", "RESERVED" if cuda else "", "RATIO", "")
        plan_rows = [
            (
                plan.planner,
                format_bytes(plan.slab_bytes) if plan.slab_bytes is not None else "-",
                format_bytes(plan.reserved_bytes) if cuda and plan.reserved_bytes is not None else "",
                f"{plan.ratio_to_lower_bound:.3f}" + ("*" if plan.proven_optimal else "")
                if plan.ratio_to_lower_bound is not None
                else "-",
                plan.error or "",
            )
            for plan in estimate.plans
        ]
        lines.append(aligned_table(header, plan_rows, right_aligned=(1, 2, 3)))
    if any(node.temporary.nbytes for node in estimate.nodes):
        lines.append("temporaries: d = from the op's decomposition, o = observed rule (srbench.estimate.kernels)")
    lines += [f"note: {note}" for note in estimate.notes]
    lines += [
        f"node {p.node} ({_short(p.op)}): {p.reason}" if p.op else f"{p.node}: {p.reason}" for p in estimate.problems
    ]
    return "\n".join(lines)


def format_estimate(estimate: GraphEstimate, *, nodes: bool = True) -> str:
    return (node_table(estimate) + "\n\n" if nodes else "") + totals(estimate)
