"""Report figures as PNG bytes (matplotlib's object API with the Agg canvas: no pyplot state,
no display needed). Each function draws what it is given and computes nothing."""
from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

# Ratios below this are drawn at it: a log axis cannot show exact (zero-error) results.
RATIO_FLOOR = 1e-4
DPI = 80


def _png(figure: "Figure") -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def error_distribution_png(ratios: "pd.DataFrame") -> bytes:
    """Per op (one row each), every comparison's judged metric as a fraction of its bound, on a
    log axis with the bound at 1; failures in red. ``ratios`` as from ``tables.bound_ratios``."""
    import numpy as np
    from matplotlib.figure import Figure

    ops = sorted(ratios["op"].unique())
    figure = Figure(figsize=(9, 1.5 + 0.35 * len(ops)))
    axes = figure.add_subplot()
    by_op = dict(tuple(ratios.groupby("op")))
    jitter = np.random.default_rng(0)  # fixed: the same records always draw the same picture
    for row, op in enumerate(ops):
        values = by_op[op]["ratio"].clip(lower=RATIO_FLOOR).to_numpy()
        failed = ~by_op[op]["passed"].fillna(False).astype(bool).to_numpy()
        axes.boxplot(values, positions=[row], orientation="horizontal", widths=0.6, showfliers=False)
        y = row + jitter.uniform(-0.2, 0.2, len(values))
        axes.scatter(values[~failed], y[~failed], s=6, color="tab:blue", alpha=0.5)
        axes.scatter(values[failed], y[failed], s=10, color="tab:red")
    axes.axvline(1.0, color="tab:red", linestyle="--", label="bound")
    axes.set_xscale("log")
    axes.set_yticks(range(len(ops)), ops)
    axes.set_xlabel(f"judged metric / bound (values below {RATIO_FLOOR:g} drawn at it)")
    axes.legend(loc="lower right")
    axes.set_title("Error distribution per op against its bound")
    return _png(figure)


def pass_heatmap_png(matrix: "pd.DataFrame") -> bytes:
    """Pass rate per op (rows) x target (columns), red 0 to green 1, grey where no case ran.
    ``matrix`` as from ``tables.pass_matrix``."""
    import matplotlib
    import numpy as np
    from matplotlib.figure import Figure

    figure = Figure(figsize=(2.5 + 1.2 * matrix.shape[1], 1.5 + 0.35 * matrix.shape[0]))
    axes = figure.add_subplot()
    colors = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
    image = axes.imshow(np.ma.masked_invalid(matrix.to_numpy(dtype=float)), cmap=colors, vmin=0, vmax=1, aspect="auto")
    axes.set_xticks(range(matrix.shape[1]), matrix.columns, rotation=30, ha="right")
    axes.set_yticks(range(matrix.shape[0]), matrix.index)
    if matrix.size <= 400:  # beyond that the labels overlap and only add noise
        for (row, column), rate in np.ndenumerate(matrix.to_numpy(dtype=float)):
            if rate == rate:
                axes.text(column, row, f"{rate:.0%}", ha="center", va="center", fontsize=8)
    figure.colorbar(image, ax=axes, label="pass rate")
    axes.set_title("Pass rate, op x target")
    return _png(figure)
