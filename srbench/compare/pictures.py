"""Pictures a person reads at a glance: a plan's memory layout, and each zoo's ratio chart.

matplotlib draws off-screen (the Agg backend, chosen per figure, so importing this module changes
no global state) and every picture comes back as PNG bytes, ready for a file or a data: URI.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

from srbench.compare.run import PlanRow
from srbench.memory.records import TensorUsageRecord

_MIB = 1024 * 1024


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


def layout_png(
    records: Sequence[TensorUsageRecord],
    offsets: Mapping[str, int],
    lower_bound: int,
    title: str,
) -> bytes:
    """Time (steps) on x, offset (MiB) on y, one rectangle per tensor; the lower bound and the
    slab total as horizontal lines, so wasted space shows as the band between them."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    figure = _figure(10, 4.5)
    axes = figure.add_subplot()
    placed = [r for r in records if r.size]
    patches = [Rectangle((r.first - 0.5, offsets[r.id] / _MIB), r.last - r.first + 1, r.size / _MIB) for r in placed]
    colours = [index % 20 for index in range(len(placed))]  # tensors made one after another differ
    collection = PatchCollection(patches, cmap="tab20", edgecolor="black", linewidth=0.2, alpha=0.85)
    collection.set_array(colours)
    collection.set_clim(0, 19)
    axes.add_collection(collection)
    total = max((offsets[r.id] + r.size for r in placed), default=0)
    axes.axhline(
        lower_bound / _MIB,
        color="crimson",
        linestyle="--",
        linewidth=1.2,
        label=f"lower bound {lower_bound / _MIB:.3g} MiB",
    )
    axes.axhline(total / _MIB, color="black", linewidth=0.8, label=f"total {total / _MIB:.3g} MiB")
    first = min((r.first for r in placed), default=0)
    last = max((r.last for r in placed), default=1)
    axes.set_xlim(first - 1, last + 1)
    axes.set_ylim(0, max(total, lower_bound, 1) / _MIB * 1.05)
    axes.set_xlabel("step")
    axes.set_ylabel("offset (MiB)")
    axes.set_title(title)
    axes.legend(loc="upper right", fontsize="small")
    return _png(figure)


def ratio_chart_png(zoo: str, rows: Sequence[PlanRow], planners: Sequence[str]) -> bytes:
    """Ratio to the lower bound per model, one bar per planner, for the models of one zoo."""
    import numpy as np

    sources = list(dict.fromkeys(row.source for row in rows))
    planners = [p for p in planners if any(row.planner == p for row in rows)]
    ratio = {(row.source, row.planner): row.ratio for row in rows}
    figure = _figure(max(6.0, 0.6 * len(sources) * max(1, len(planners)) ** 0.5 + 2), 4.5)
    axes = figure.add_subplot()
    width = 0.8 / max(len(planners), 1)
    positions = np.arange(len(sources))
    for index, planner in enumerate(planners):
        heights = [ratio.get((source, planner), np.nan) for source in sources]
        axes.bar(positions + (index - (len(planners) - 1) / 2) * width, heights, width, label=planner)
    axes.axhline(1.0, color="crimson", linestyle="--", linewidth=1)
    highest = max(ratio.values(), default=1.0)
    if highest > 3:  # naive planners can be tens of times off: keep the close ones readable
        axes.set_yscale("log")
    axes.set_ylim(0.95, highest * 1.05 + 0.01)
    axes.set_xticks(positions)
    axes.set_xticklabels(sources, rotation=30, ha="right", fontsize="small")
    axes.set_ylabel("total / lower bound")
    axes.set_title(f"{zoo}: ratio to the lower bound by planner")
    axes.legend(fontsize="x-small", ncol=2)
    return _png(figure)
