"""Estimated, planned and observed bytes per node as a table, the totals, the hidden workspaces,
and all of it as JSON-ready data."""

from __future__ import annotations

import dataclasses
from typing import Any

from srbench.formatting import aligned_table, format_bytes
from srbench.observe.observation import NodeObservation, Observation, Workspace
from srbench.observe.sidebyside import SideBySide


def _bytes(value: int | None) -> str:
    return "-" if value is None else (format_bytes(value) if value else "0")


def _observed(observation: NodeObservation | None) -> tuple[str, str, str]:
    if observation is None:
        return "-", "-", "-"
    return _bytes(observation.output_bytes), _bytes(observation.temporary_bytes), _bytes(observation.live_bytes)


def node_table(sbs: SideBySide) -> str:
    header = ["STEP", "NODE", "OP", "EST OUT", "EST TEMP", "EST LIVE", "PLANNED"]
    header += ["EAGER OUT", "EAGER TEMP", "EAGER LIVE", "SRBENCH", "SR OUT", "SR TEMP", "SR LIVE"]
    rows = []
    for row in sbs.rows:
        rows.append(
            (
                str(row.step),
                row.node,
                row.op.removeprefix("aten.").removesuffix(".default"),
                _bytes(row.estimated_output),
                _bytes(row.estimated_temporary),
                _bytes(row.estimated_live),
                _bytes(row.planned_bytes),
                *_observed(row.eager),
                row.srbench_how or "-",
                *_observed(row.srbench),
            )
        )
    return aligned_table(header, rows, right_aligned={0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13})


def workspaces(observation: Observation) -> list[tuple[str, int, int, int]]:
    """Ops that allocate for themselves, by the innermost ATen op that did: (op, how many
    allocations, largest, total bytes), largest first."""
    by_op: dict[str, list[Workspace]] = {}
    for workspace in observation.workspaces:
        by_op.setdefault(workspace.op, []).append(workspace)
    listed = [
        (op, len(found), max(w.nbytes for w in found), sum(w.nbytes for w in found)) for op, found in by_op.items()
    ]
    return sorted(listed, key=lambda item: -item[2])


def totals(sbs: SideBySide) -> str:
    cuda = sbs.estimate.device.startswith("cuda")
    lines = [f"{sbs.model} on {sbs.estimate.device}: {len(sbs.rows)} op nodes"]
    blocks = " (caching allocator's blocks)" if cuda else ""
    rows = [("eager peak, estimated", format_bytes(sbs.estimate.eager.peak_allocated), "fake tensors, no run" + blocks)]
    if cuda:
        rows.append(
            ("eager reserved, estimated", format_bytes(sbs.estimate.eager.peak_reserved), "from an empty cache")
        )
    for observation in (sbs.eager, sbs.srbench):
        if observation is None:
            continue
        rows.append(
            (
                f"{observation.runtime} peak, observed",
                format_bytes(observation.peak_bytes),
                f"{observation.allocations} allocations, {format_bytes(observation.allocated_bytes)} in one run; "
                f"{observation.between_nodes} outside every node ({format_bytes(observation.between_nodes_bytes)})",
            )
        )
        if cuda:
            rows.append(
                (
                    f"{observation.runtime} reserved, observed",
                    format_bytes(observation.reserved_bytes),
                    "segments the allocator opened during the run (after a warm-up)",
                )
            )
    rows.append(("srbench plan (slab)", format_bytes(sbs.slab_bytes), ""))
    if sbs.hosted_bytes:
        rows.append(("hosted in outputs", format_bytes(sbs.hosted_bytes), "intermediates planned into outputs' bytes"))
    rows.append(("lower bound", format_bytes(sbs.lower_bound), "planned intermediates"))
    lines.append(aligned_table(("PEAK", "BYTES", ""), rows, right_aligned=(1,)))
    for observation in (sbs.eager, sbs.srbench):
        if observation is None:
            continue
        found = workspaces(observation)
        if found:
            lines.append(f"hidden workspaces ({observation.runtime}): ops that allocate for themselves")
            lines.append(
                aligned_table(
                    ("  OP", "COUNT", "LARGEST", "TOTAL"),
                    [
                        (f"  {op}", str(count), format_bytes(largest), format_bytes(total))
                        for op, count, largest, total in found
                    ],
                    right_aligned=(1, 2, 3),
                )
            )
    return "\n".join(lines)


def to_json(sbs: SideBySide) -> dict[str, Any]:
    def observation(value: Observation | None) -> dict[str, Any] | None:
        if value is None:
            return None
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.name not in ("nodes", "run")}
        fields["workspaces"] = [
            {"op": op, "count": count, "largest_bytes": largest, "total_bytes": total}
            for op, count, largest, total in workspaces(value)
        ]
        return fields

    def node(value: NodeObservation | None) -> dict[str, Any] | None:
        if value is None:
            return None
        data = dataclasses.asdict(value)
        data["workspaces"] = [{"ops": list(w.ops), "nbytes": w.nbytes} for w in value.workspaces]
        return data

    return {
        "model": sbs.model,
        "device": sbs.estimate.device,
        "estimated_eager_peak_bytes": sbs.estimate.eager.peak_allocated,
        "estimated_eager_reserved_bytes": sbs.estimate.eager.peak_reserved,
        "eager": observation(sbs.eager),
        "srbench": observation(sbs.srbench),
        "slab_bytes": sbs.slab_bytes,
        "hosted_bytes": sbs.hosted_bytes,
        "lower_bound": sbs.lower_bound,
        "nodes": [
            {
                **{f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name not in ("eager", "srbench")},
                "eager": node(row.eager),
                "srbench": node(row.srbench),
            }
            for row in sbs.rows
        ],
    }
