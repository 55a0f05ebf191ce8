"""The document as a Word file, built by walking markdown-it's tokens with python-docx: real
Heading 1..6 styles, List Bullet / List Number paragraphs (nested up to three levels), quotes,
code, tables, and bold / italic / struck / code runs."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import docx
from markdown_it.token import Token

from gen.text.markdown import parser

_CODE_FONT = "Courier New"


def docx_bytes(markdown: str, title: str, lang: str) -> bytes:
    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.language = lang
    _Writer(document).write(parser().parse(markdown))
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


class _Writer:
    """One pass over the block tokens; `paragraph` is where the next inline token goes."""

    def __init__(self, document: Any) -> None:
        self.document = document
        self.lists: list[str] = []  # "Bullet" or "Number", outermost first
        self.item_started = False  # the current list item has its first paragraph
        self.quotes = 0
        self.paragraph: Any = None
        self.rows: list[list[tuple[bool, Token]]] = []  # the table being read: (header?, cell)

    def write(self, tokens: Sequence[Token]) -> None:
        cell: bool | None = None  # inside a table cell: whether it is a header cell
        for token in tokens:
            kind = token.type
            if kind == "heading_open":
                self.paragraph = self.document.add_paragraph(style=f"Heading {token.tag[1]}")
            elif kind == "paragraph_open":
                self.paragraph = self.document.add_paragraph(style=self._paragraph_style())
            elif kind in ("bullet_list_open", "ordered_list_open"):
                self.lists.append("Bullet" if kind == "bullet_list_open" else "Number")
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "list_item_open":
                self.item_started = False
            elif kind == "blockquote_open":
                self.quotes += 1
            elif kind == "blockquote_close":
                self.quotes -= 1
            elif kind in ("fence", "code_block"):
                self._code(token.content)
            elif kind == "tr_open":
                self.rows.append([])
            elif kind in ("th_open", "td_open"):
                cell = kind == "th_open"
            elif kind in ("th_close", "td_close"):
                cell = None
            elif kind == "inline" and cell is not None:
                self.rows[-1].append((cell, token))
            elif kind == "inline":
                _add_runs(self.paragraph, token.children or [])
            elif kind == "table_close":
                self._table()

    def _paragraph_style(self) -> str | None:
        if self.lists:
            depth = len(self.lists)
            suffix = f" {min(depth, 3)}" if depth > 1 else ""
            kind = f"List {self.lists[-1]}" if not self.item_started else "List Continue"
            self.item_started = True
            return kind + suffix
        return "Quote" if self.quotes else None

    def _code(self, text: str) -> None:
        run = self.document.add_paragraph(style="No Spacing").add_run(text.rstrip("\n"))
        run.font.name = _CODE_FONT  # the run's text setter turns "\n" into line breaks

    def _table(self) -> None:
        width = max((len(row) for row in self.rows), default=0)
        table = self.document.add_table(rows=len(self.rows), cols=width, style="Table Grid")
        for cells, row in zip(table.rows, self.rows, strict=True):
            for cell, (header, token) in zip(cells.cells, row, strict=False):
                _add_runs(cell.paragraphs[0], token.children or [], bold=header)
        self.rows = []


def _add_runs(paragraph: Any, children: Sequence[Token], *, bold: bool = False) -> None:
    """The inline tokens as runs; nested emphasis is counted, links keep only their text."""
    depth = {"strong": int(bold), "em": 0, "s": 0}
    for child in children:
        kind = child.type
        if kind.endswith("_open") and kind[:-5] in depth:
            depth[kind[:-5]] += 1
        elif kind.endswith("_close") and kind[:-6] in depth:
            depth[kind[:-6]] -= 1
        elif kind in ("text", "code_inline", "softbreak", "image"):
            text = " " if kind == "softbreak" else child.content
            if not text:
                continue
            run = paragraph.add_run(text)
            run.bold = depth["strong"] > 0 or None
            run.italic = depth["em"] > 0 or None
            run.font.strike = depth["s"] > 0 or None
            if kind == "code_inline":
                run.font.name = _CODE_FONT
        elif kind == "hardbreak":
            paragraph.add_run().add_break()
