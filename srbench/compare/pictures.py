"""Pictures a person reads at a glance: a plan's memory layout, and each zoo's ratio chart.

matplotlib draws off-screen (the Agg backend, chosen per figure, so importing this module changes
no global state) and every picture comes back as PNG bytes, ready for a file or a data: URI.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from srbench.compare.run import PlanRow
from srbench.memory.records import TensorUsageRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_MIB = 1024 * 1024

P = ParamSpec("P")
T = TypeVar("T")


def _plain_text(draw: Callable[P, T]) -> Callable[P, T]:
    """Run ``draw`` with names as text, never TeX: a model or file called ``$x_1$`` must neither
    turn into maths nor, when unbalanced, make matplotlib's mathtext parser fail. matplotlib reads
    the setting as each text is made, and tick labels are made as late as saving: so it is set
    around drawing and saving both, and only there (no global state changes)."""

    @functools.wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
            return draw(*args, **kwargs)

    return wrapper


@_plain_text
def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    return figure


@_plain_text
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


# The ratio chart's scale is linear, so that 1.02 and 1.10 look different. Ratios above CLIP_RATIO
# (a naive plan can be 15x the bound) are cut off there and carry their value in text; bars start
# at BASELINE, below 1.0, so that a plan at the lower bound still shows as a short bar.
CLIP_RATIO = 1.5
BASELINE = 0.98


def ratio_axis_top(ratios: Sequence[float]) -> float:
    """The top of the ratio chart's y axis: a little above the highest ratio, or above
    :data:`CLIP_RATIO` (room for the values written on cut-off bars); never below 1.05."""
    highest = max(ratios, default=1.0)
    if highest > CLIP_RATIO:
        return CLIP_RATIO + 0.1 * (CLIP_RATIO - BASELINE)
    return max(1.05, highest + 0.08 * (highest - BASELINE))


@_plain_text
def ratio_chart(zoo: str, rows: Sequence[PlanRow], planners: Sequence[str]) -> Figure:
    """Ratio to the lower bound per model, one bar per planner, for the models of one zoo."""
    import numpy as np
    from matplotlib.ticker import MaxNLocator, StrMethodFormatter

    sources = list(dict.fromkeys(row.source for row in rows))
    planners = [p for p in planners if any(row.planner == p for row in rows)]
    ratio = {(row.source, row.planner): row.ratio for row in rows}
    figure = _figure(max(6.0, 0.6 * len(sources) * max(1, len(planners)) ** 0.5 + 2), 4.5)
    axes = figure.add_subplot()
    width = 0.8 / max(len(planners), 1)
    positions = np.arange(len(sources))
    clipped = []
    for index, planner in enumerate(planners):
        values = [ratio.get((source, planner), np.nan) for source in sources]
        shown = [min(value, CLIP_RATIO) - BASELINE for value in values]
        left = positions + (index - (len(planners) - 1) / 2) * width
        bars = axes.bar(left, shown, width, bottom=BASELINE, label=planner)
        clipped += [(bar, value) for bar, value in zip(bars, values) if value > CLIP_RATIO]
    axes.legend(fontsize="x-small", ncol=2)  # before the hatching, which is per bar, not per planner
    for bar, value in clipped:
        bar.set_hatch("//")
        x = bar.get_x() + bar.get_width() / 2
        axes.text(x, CLIP_RATIO, f"{value:.3g}x", rotation=90, ha="center", va="bottom", fontsize="x-small")
    axes.axhline(1.0, color="crimson", linestyle="--", linewidth=1)
    axes.set_ylim(BASELINE, ratio_axis_top(list(ratio.values())))
    axes.yaxis.set_major_locator(MaxNLocator(nbins=10, steps=[1, 2, 2.5, 5, 10]))
    axes.yaxis.set_major_formatter(StrMethodFormatter("{x:.2f}"))
    axes.grid(axis="y", linewidth=0.4, alpha=0.6)
    axes.set_axisbelow(True)
    axes.set_xticks(positions)
    axes.set_xticklabels(sources, rotation=30, ha="right", fontsize="small")
    axes.set_ylabel(f"total / lower bound (cut off at {CLIP_RATIO})")
    axes.set_title(f"{zoo}: ratio to the lower bound by planner")
    return figure


def ratio_chart_png(zoo: str, rows: Sequence[PlanRow], planners: Sequence[str]) -> bytes:
    return _png(ratio_chart(zoo, rows, planners))
