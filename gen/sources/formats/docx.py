"""Word documents, read by python-docx: paragraphs in body order under the path of the
headings above them (styles Title, Heading 1..9); a table one block per row, cells joined
by ` | `."""

from __future__ import annotations

import io
import re

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from gen.sources.document import Block, Location, Unreadable

_HEADING = re.compile(r"Heading (\d)$")


def blocks(data: bytes) -> list[Block]:
    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as exc:  # python-docx raises zip, XML and package errors alike
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"cannot read DOCX: {reason[:200]}") from None
    path: list[tuple[int, str]] = []
    out: list[Block] = []
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            level = _level(item)
            text = " ".join(item.text.split())
            if level is not None:
                while path and path[-1][0] >= level:
                    path.pop()
                if text:
                    path.append((level, text))
            elif text:
                out.append(Block(text, Location(heading=tuple(t for _, t in path))))
        elif isinstance(item, Table):
            heading = tuple(t for _, t in path)
            out += [Block(row, Location(heading=heading)) for row in _rows(item)]
    return out


def _level(paragraph: Paragraph) -> int | None:
    """0 for a title, n for Heading n, None for body text."""
    name = paragraph.style.name if paragraph.style is not None else ""
    if name == "Title":
        return 0
    match = _HEADING.match(name or "")
    return int(match.group(1)) if match else None


def _rows(table: Table) -> list[str]:
    rows = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if not cells or text != cells[-1]:  # a merged cell repeats in each column it spans
                cells.append(text)
        if any(cells):
            rows.append(" | ".join(cells))
    return rows
