"""Renderers shared by every report page (run report, diff, audit, dump-diff): the number
format, markdown tables, and one HTML skeleton with interactive tables, a detail view, code
blocks with a copy button, facts lists and embedded images.

Renderers format what they are given and compute nothing. A page is one self-contained file:
its style, its script and its images are inline, nothing is fetched when it is viewed.
Interactive tables carry their rows as JSON (display text only, already formatted here) and
are drawn by the page's script, so 10,000 rows sort and filter in the browser in milliseconds.
"""
from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    import pandas as pd

# Row and chip colours per status-like value: bad (red), warn (amber), muted (grey), good (green).
TONES: dict[str, str] = {
    **dict.fromkeys(("errored", "failed", "new failure", "worsened", "missing", "still failing",
                     "too tight", "failing", "breaks bound", "fails tolerance", "expired waiver", "empty run",
                     "waived but worsened"), "bad"),
    **dict.fromkeys(("nondeterministic", "not_on_device", "not_fused", "too loose"), "warn"),
    **dict.fromkeys(("waived", "added", "unchanged", "not judged", "no data"), "muted"),
    **dict.fromkeys(("passed", "fixed", "improved", "ok", "exact", "within bound"), "good"),
}
# Outside this range of magnitudes numbers are written in scientific notation.
_PLAIN_RANGE = (0.01, 1000.0)


def format_number(value: float) -> str:
    """A number in three significant digits, compact scientific outside 0.01..1,000:
    ``0.00041839`` -> ``4.18e-4``, ``0.0213`` -> ``0.0213``, ``2.0`` -> ``2``, NaN -> ``""``;
    up to nine digits where three would round a fraction onto another whole number (a cosine of
    ``0.99999993`` is not ``1``; ``111.207`` is ``111``)."""
    if value != value:
        return ""
    magnitude = abs(value)
    if _PLAIN_RANGE[0] <= magnitude < _PLAIN_RANGE[1]:
        text = f"{value:.3g}"
        crossed = "." not in text and float(text) != math.trunc(value)
        return f"{value:.9g}" if crossed else text
    if magnitude == math.inf:
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def format_cell(value: Any) -> str:
    """One table cell as text: numbers by ``format_number``, missing values empty."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, float):  # numpy's float64 too
        return format_number(value)
    if hasattr(value, "item"):  # numpy integer and bool scalars
        value = value.item()
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def format_column(column: "pd.Series") -> list[str]:
    """Every cell of ``column`` as ``format_cell`` writes it (one loop per column, not per cell)."""
    values = column.tolist()
    if column.dtype.kind == "f":
        return [format_number(v) for v in values]
    if column.dtype.kind in "iu":
        return [str(v) for v in values]
    return [format_cell(v) for v in values]


def markdown_table(frame: "pd.DataFrame") -> str:
    """``frame`` as a GitHub markdown table (``|`` in cells escaped, newlines flattened)."""
    def cell(value: Any) -> str:
        return format_cell(value).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows]) + "\n"


def markdown_page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """A markdown document: ``sections`` are ``(heading, markdown body)``."""
    parts = [f"# {title}\n"] + [f"## {heading}\n\n{content}" for heading, content in sections]
    return "\n".join(parts)


@dataclass(frozen=True)
class TableSpec:
    """How an interactive table shows a frame.

    ``shown``: the columns of the table (all when empty); the others appear only in the detail
    view. ``long``: columns folded to this many ``em`` (click a cell to unfold). ``tone``: the
    column whose value colours the row (``TONES``). ``detail``: ``(heading, columns)`` sections
    of the detail view a row opens (no detail view when empty). ``code``: columns shown as a
    code block with a copy button; ``links``: columns holding relative links. ``hide``: a
    column whose "yes" rows are hidden until the switch labelled ``hide_label`` is on.
    ``page``: rows drawn at first (and per "show more"); ``order``: the tone column's values in
    the order its filter chips list them.
    """

    shown: Sequence[str] = ()
    long: Mapping[str, int] = field(default_factory=dict)
    tone: str = ""
    detail: Sequence[tuple[str, Sequence[str]]] = ()
    code: Sequence[str] = ()
    links: Sequence[str] = ()
    hide: str = ""
    hide_label: str = ""
    page: int = 100
    order: Sequence[str] = ()


def html_table(frame: "pd.DataFrame", table_id: str, spec: TableSpec = TableSpec()) -> str:
    """``frame`` as an interactive table: sort by any column (click its header), filter by
    text and by the tone column's values, rows coloured by tone, long text folded."""
    columns = [str(c) for c in frame.columns]
    shown = list(spec.shown) or columns
    numeric = {str(c) for c in frame.columns if frame[c].dtype.kind in "fiu"}
    data = {
        "columns": columns,
        "shown": [columns.index(c) for c in shown],
        "numeric": [c in numeric for c in columns],
        "long": {str(columns.index(c)): width for c, width in spec.long.items() if c in columns},
        "tone": columns.index(spec.tone) if spec.tone in columns else -1,
        "tones": TONES,
        "order": list(spec.order),
        "detail": [[heading, [columns.index(c) for c in names if c in columns]] for heading, names in spec.detail],
        "code": [columns.index(c) for c in spec.code if c in columns],
        "links": [columns.index(c) for c in spec.links if c in columns],
        "hide": columns.index(spec.hide) if spec.hide in columns else -1,
        "hideLabel": spec.hide_label,
        "page": spec.page,
        "rows": [list(row) for row in zip(*(format_column(frame[c]) for c in frame.columns))] if len(frame) else [],
    }
    # no "<" inside the script element at all: neither "</script>" nor "<!--" can end or hide it
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    return (f'<div class="mv-table" id="{html.escape(table_id)}">'
            f'<script type="application/json" class="mv-data">{payload}</script></div>')


def html_facts(items: Sequence[tuple[str, Any]]) -> str:
    """``(label, value)`` pairs as a definition list; empty values left out."""
    rows = "".join(f"<dt>{html.escape(str(label))}</dt><dd>{html.escape(format_cell(value))}</dd>"
                   for label, value in items if format_cell(value) != "")
    return f'<dl class="mv-facts">{rows}</dl>'


def html_code(text: str) -> str:
    """``text`` as a code block with a copy button."""
    return (f'<div class="mv-code"><button type="button" class="mv-copy">copy</button>'
            f'<pre class="code">{html.escape(text)}</pre></div>')


def html_image(png: bytes, alt: str, image_id: str) -> str:
    """A PNG embedded as a base64 data URI, so the page stays one self-contained file."""
    data = base64.b64encode(png).decode("ascii")
    return (f'<img class="plot" id="{html.escape(image_id)}" alt="{html.escape(alt)}" '
            f'src="data:image/png;base64,{data}">')


def html_paragraph(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


@dataclass(frozen=True)
class Chip:
    """A count in the banner: ``label``, its ``count``; clicking it filters table ``table_id``
    to the rows whose tone column is ``label`` (no filter when ``table_id`` is empty)."""

    label: str
    count: int
    table_id: str = ""


def html_banner(verdict: str, tone: str, chips: Sequence[Chip], lines: Sequence[str] = ()) -> str:
    """The status banner a page opens with: the verdict, one chip per count, then ``lines``."""
    chip_html = "".join(
        f'<button type="button" class="chip {TONES.get(c.label, "muted")}" data-table="{html.escape(c.table_id)}"'
        f' data-value="{html.escape(c.label)}"{"" if c.count else " disabled"}>'
        f'{html.escape(c.label)} <b>{c.count}</b></button>'
        for c in chips)
    notes = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
    return (f'<div class="mv-banner {tone}" id="banner"><div class="mv-verdict">{html.escape(verdict)}</div>'
            f'<div class="mv-chips">{chip_html}</div>{notes}</div>')


def html_page(title: str, banner: str, sections: Sequence[tuple[str, str]]) -> str:
    """One self-contained HTML page: ``title``, the ``banner``, a contents line, then
    ``sections`` (``(heading, html body)`` pairs), with the shared style and script inline."""
    anchors = [f"s-{i}" for i in range(len(sections))]
    nav = " ".join(f'<a href="#{a}">{html.escape(h)}</a>' for a, (h, _) in zip(anchors, sections))
    body = "\n".join(f'<section id="{a}"><h2>{html.escape(h)}</h2>\n{content}\n</section>'
                     for a, (h, content) in zip(anchors, sections))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title><style>{_asset('page.css')}</style></head>\n"
        f"<body><header class=\"mv-head\"><h1>{html.escape(title)}</h1><nav>{nav}</nav></header>\n"
        f"<main>{banner}\n{body}</main>\n"
        "<dialog id=\"mv-detail\"><button type=\"button\" class=\"mv-close\" aria-label=\"close\">close</button>"
        "<div class=\"mv-detail-body\"></div></dialog>\n"
        f"<script>{_asset('page.js')}</script></body></html>\n"
    )


def _asset(name: str) -> str:
    """A file of the page skeleton (``mluverify/report/assets/``), inlined into every page."""
    return resources.files("mluverify.report").joinpath("assets", name).read_text(encoding="utf-8")
