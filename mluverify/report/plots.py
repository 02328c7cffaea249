"""Report figures as PNG bytes (matplotlib's object API with the Agg canvas: no pyplot state,
no display needed). Each function draws what it is given and computes nothing; where a value
cannot sit on a log axis (zero, infinite, missing) it is drawn in a labelled lane instead of
being left out."""
from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Ratios below this are drawn at it: a log axis cannot show exact (zero-error) results.
RATIO_FLOOR = 1e-4
# Ratios above this are drawn at it (the axis still says where the bound is).
RATIO_CEILING = 1e4
DPI = 96
FONT_SIZE = 10
# How each status is drawn: (marker, filled, size). Failures are large crosses, statuses that
# were not judged as a device result are hollow.
STATUS_MARKERS = {
    "passed": ("o", True, 14),
    "failed": ("X", True, 60),
    "errored": ("X", True, 60),
    "waived": ("D", False, 30),
    "not_on_device": ("s", False, 30),
    "not_fused": ("^", False, 34),
    "nondeterministic": ("v", False, 34),
}


def _figure(width: float, height: float) -> "Figure":
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    figure.set_dpi(DPI)
    return figure


def _png(figure: "Figure") -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _rc():
    """Readable labels for every figure (a context, not a change to matplotlib's globals)."""
    import matplotlib

    return matplotlib.rc_context({"font.size": FONT_SIZE, "axes.titlesize": FONT_SIZE + 1})


def error_vs_bound_png(points: "pd.DataFrame") -> bytes:
    """Judged metric / bound per comparison: one panel per target, one row per op, one colour
    per dtype, one marker per status (``STATUS_MARKERS``); the bound is the dashed line at 1.
    Ratios with no place on the log axis get lanes on the right: ``inf`` (a zero bound
    broken) and ``no value`` (errored or not run). ``points`` as from ``tables.error_points``."""
    import numpy as np
    from matplotlib.lines import Line2D

    targets, ops = sorted(points["target"].unique()), sorted(points["op"].unique())
    dtypes = sorted(points["dtype"].unique())
    colors = {dtype: f"C{i % 10}" for i, dtype in enumerate(dtypes)}
    lanes = {"inf": RATIO_CEILING * 1e2, "no value": RATIO_CEILING * 1e4}
    with _rc():
        figure = _figure(max(8.0, 1.8 + 3.4 * len(targets)), 2.0 + 0.3 * len(ops) * max(1.0, len(dtypes) / 2.5))
        axes_row = figure.subplots(1, len(targets), sharey=True, squeeze=False)[0]
        jitter = np.random.default_rng(0)  # fixed: the same records always draw the same picture
        row_of = {op: row for row, op in enumerate(ops)}
        band = 0.8 / len(dtypes)
        for axes, target in zip(axes_row, targets):
            mine = points[points["target"] == target]
            for (dtype, status), group in mine.groupby(["dtype", "status"]):
                ratio = group["ratio"].to_numpy(dtype=float)
                x = np.where(np.isnan(ratio), lanes["no value"],
                             np.where(np.isinf(ratio), lanes["inf"], np.clip(ratio, RATIO_FLOOR, RATIO_CEILING)))
                centre = group["op"].map(row_of).to_numpy() + (dtypes.index(dtype) - (len(dtypes) - 1) / 2) * band
                y = centre + jitter.uniform(-0.35, 0.35, len(group)) * band
                marker, filled, size = STATUS_MARKERS.get(status, ("P", False, 30))
                axes.scatter(x, y, s=size, marker=marker, linewidths=1.0, alpha=0.8 if filled else 1.0,
                             facecolors=colors[dtype] if filled else "none", edgecolors=colors[dtype])
            _bound_axes(axes, lanes, target)
        axes_row[0].set_yticks(range(len(ops)), ops)
        axes_row[0].set_ylim(len(ops) - 0.5, -0.5)
        handles = [Line2D([], [], marker="o", linestyle="", color=colors[d], label=d) for d in dtypes]
        handles += [Line2D([], [], marker=m, linestyle="", markerfacecolor="grey" if filled else "none",
                           markeredgecolor="grey", label=status)
                    for status, (m, filled, _) in STATUS_MARKERS.items() if status in set(points["status"])]
        handles.append(Line2D([], [], color="tab:red", linestyle="--", label="bound"))
        figure.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), frameon=False)
        figure.suptitle("Judged metric / bound per op, by target (colour: dtype, marker: status)")
        return _png(figure)


def _bound_axes(axes: "Axes", lanes: dict[str, float], title: str) -> None:
    """Log x axis from the floor to the lanes, the bound at 1, the lanes shaded and named."""
    axes.set_xscale("log")
    axes.axvline(1.0, color="tab:red", linestyle="--", linewidth=1.2)
    for value in lanes.values():
        axes.axvspan(value / 3, value * 3, color="0.93", zorder=0)
    axes.set_xlim(RATIO_FLOOR / 3, max(lanes.values()) * 3)
    ticks = [RATIO_FLOOR, 1e-2, 1.0, 1e2, RATIO_CEILING]
    axes.set_xticks(ticks + list(lanes.values()),
                    [f"\u2264{RATIO_FLOOR:g}", "0.01", "1", "100", f"\u2265{RATIO_CEILING:g}", *lanes], fontsize=FONT_SIZE - 1)
    axes.minorticks_off()
    axes.grid(axis="y", color="0.9")
    axes.set_title(title)
    axes.set_xlabel("value / bound")


def pass_heatmap_png(matrix: "pd.DataFrame") -> bytes:
    """Pass rate per op (rows) x target and dtype (columns), red 0 to green 1, grey where no
    case ran, each cell labelled with its rate. ``matrix`` as from ``tables.pass_matrix``."""
    import matplotlib
    import numpy as np

    rates = matrix.to_numpy(dtype=float)
    with _rc():
        figure = _figure(max(6.0, 3.0 + 1.0 * matrix.shape[1]), 1.8 + 0.3 * matrix.shape[0])
        axes = figure.add_subplot()
        colors = matplotlib.colormaps["RdYlGn"].with_extremes(bad="lightgrey")
        image = axes.imshow(np.ma.masked_invalid(rates), cmap=colors, vmin=0, vmax=1, aspect="auto")
        axes.set_xticks(range(matrix.shape[1]), matrix.columns, rotation=30, ha="right")
        axes.set_yticks(range(matrix.shape[0]), matrix.index)
        for (row, column), rate in np.ndenumerate(rates):
            if rate == rate:
                axes.text(column, row, f"{rate:.0%}", ha="center", va="center", fontsize=FONT_SIZE - 1)
        figure.colorbar(image, ax=axes, label="pass rate", shrink=0.8)
        axes.set_title("Pass rate per op, by target and dtype (grey: no case)")
        return _png(figure)


def change_png(groups: "pd.DataFrame", baseline: str) -> bytes:
    """Per op x target x dtype, the largest judged metric of this run over the baseline's, on a
    log axis (1 = unchanged; right of it: worse); one colour per target. ``groups`` as
    ``diff.RunDiff.groups``; groups in only one run have no ratio and are not drawn."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    drawn = groups[np.isfinite(groups["max_ratio"].to_numpy(dtype=float)) & (groups["max_ratio"] > 0)]
    ops, targets = sorted(groups["op"].unique()), sorted(groups["target"].unique())
    with _rc():
        figure = _figure(9.0, 2.0 + 0.3 * len(ops))
        axes = figure.add_subplot()
        row_of = {op: row for row, op in enumerate(ops)}
        for index, target in enumerate(targets):
            mine = drawn[drawn["target"] == target]
            rows = mine["op"].map(row_of).astype(float)  # float also when no group of it is drawn
            axes.scatter(mine["max_ratio"], rows + (index - (len(targets) - 1) / 2) * 0.15,
                         s=24, color=f"C{index % 10}", label=target)
        axes.axvline(1.0, color="0.3", linestyle="--", linewidth=1.0)
        axes.set_xscale("log")
        axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axes.xaxis.set_minor_formatter(FuncFormatter(lambda value, _: ""))
        axes.set_yticks(range(len(ops)), ops)
        axes.set_ylim(len(ops) - 0.5, -0.5)
        axes.grid(axis="y", color="0.9")
        axes.set_xlabel(f"max of the judged metric: this run / the baseline ({baseline})")
        axes.set_title("Change since the baseline per op (right of 1: worse)")
        figure.legend(loc="outside lower center", ncols=min(len(targets), 6), frameon=False)
        return _png(figure)
