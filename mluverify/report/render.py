"""Renderers shared by every report: one markdown table, one HTML table, one HTML page.

Renderers format what they are given and compute nothing.
"""
from __future__ import annotations

import base64
import html
import math
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import pandas as pd

PAGE_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #f0f0f0; } td.text { text-align: left; }
img.plot { display: block; max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
p.note { color: #555; }
"""


def format_cell(value: Any) -> str:
    """One table cell as text: floats to 4 significant digits, missing values empty."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def markdown_table(frame: "pd.DataFrame") -> str:
    """``frame`` as a GitHub markdown table (``|`` in cells escaped, newlines flattened)."""
    def cell(value: Any) -> str:
        return format_cell(value).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows]) + "\n"


def html_table(frame: "pd.DataFrame") -> str:
    """``frame`` as an escaped HTML table; text columns left-aligned."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    text_columns = [frame[c].dtype.kind not in "fiub" for c in frame.columns]
    body = []
    for row in frame.itertuples(index=False):
        cells = "".join(
            f'<td class="text">{html.escape(format_cell(v))}</td>' if is_text else f"<td>{html.escape(format_cell(v))}</td>"
            for v, is_text in zip(row, text_columns)
        )
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_image(png: bytes, alt: str, image_id: str) -> str:
    """A PNG embedded as a base64 data URI, so the page stays one self-contained file."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="plot" id="{html.escape(image_id)}" alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def html_paragraph(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def html_page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """One self-contained HTML page (no scripts, no external resources): ``sections`` are
    ``(heading, html body)`` pairs."""
    body = "\n".join(f"<section><h2>{html.escape(heading)}</h2>\n{content}\n</section>" for heading, content in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{PAGE_STYLE}</style></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


def markdown_page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """The markdown counterpart of ``html_page``: ``sections`` are ``(heading, markdown body)``."""
    parts = [f"# {title}\n"] + [f"## {heading}\n\n{content}" for heading, content in sections]
    return "\n".join(parts)
