"""Live bytes over the node sequence, as a PNG: eager observed, srbench observed, eager estimated,
srbench's plan (its slab), and the lower bound with the profile of planned intermediates it is
the peak of. matplotlib draws off-screen (Agg, per figure: no global state changes)."""

from __future__ import annotations

import io
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from srbench.observe.sidebyside import SideBySide

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_MIB = 1024 * 1024


def _plain_text() -> AbstractContextManager[None]:
    """Model names are text, never TeX: read when text is made and when it is drawn."""
    from matplotlib import rc_context

    return rc_context({"text.parse_math": False, "text.usetex": False})


def _carried(values: list[int | None]) -> list[float]:
    """A node srbench did not run (a view made once) holds the previous node's figure."""
    carried, last = [], 0.0
    for value in values:
        last = float(value) if value is not None else last
        carried.append(last / _MIB)
    return carried


def live_bytes_png(sbs: SideBySide) -> bytes:
    with _plain_text():
        buffer = io.BytesIO()
        live_bytes_figure(sbs).savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def live_bytes_figure(sbs: SideBySide) -> Figure:
    """The picture as a matplotlib figure (one line per series, labelled as in its legend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    steps = list(range(len(sbs.rows)))
    with _plain_text():
        figure = Figure(figsize=(11, 4.5))
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        if sbs.eager is not None:
            axes.plot(
                steps, _carried([r.eager.live_bytes if r.eager else None for r in sbs.rows]), label="eager observed"
            )
        if sbs.srbench is not None:
            srbench_live = [r.srbench.live_bytes if r.srbench else None for r in sbs.rows]
            axes.plot(steps, _carried(srbench_live), label="srbench observed")
        axes.plot(
            steps,
            _carried([r.estimated_live for r in sbs.rows]),
            linestyle="--",
            label="eager estimated (fake tensors)",
        )
        axes.plot(
            steps,
            _carried([r.lower_bound_live for r in sbs.rows]),
            linewidth=0.8,
            label="planned intermediates alive",
        )
        axes.axhline(sbs.slab_bytes / _MIB, color="black", linestyle="-.", linewidth=1, label="srbench plan (slab)")
        axes.axhline(sbs.lower_bound / _MIB, color="grey", linestyle=":", linewidth=1.5, label="lower bound")
        axes.set_xlabel("node (graph order)")
        axes.set_ylabel("MiB alive")
        axes.set_title(f"{sbs.model}: live bytes over the node sequence")
        axes.set_ylim(bottom=0)
        axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    return figure
