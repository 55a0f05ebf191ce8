"""The document as a Word file, built by walking markdown-it's tokens with python-docx: real
Heading 1..6 styles, List Bullet / List Number paragraphs (nested up to three levels), quotes,
code, tables, and bold / italic / struck / code runs. A cited document's References entries are
bookmarked and each marker's numbers are internal hyperlinks to them."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from docx.shared import RGBColor
from markdown_it.token import Token

from gen.export.references import References, find_references, split_markers
from gen.text.markdown import parser

_CODE_FONT = "Courier New"


def docx_bytes(markdown: str, title: str, lang: str) -> bytes:
    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.language = lang
    tokens = parser().parse(markdown)
    refs = find_references(tokens)
    if refs.entries:
        link = document.styles.add_style("Hyperlink", WD_STYLE_TYPE.CHARACTER)
        link.font.color.rgb, link.font.underline = RGBColor(0x05, 0x63, 0xC1), True
    _Writer(document, refs).write(tokens)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


class _Writer:
    """One pass over the block tokens; `paragraph` is where the next inline token goes."""

    def __init__(self, document: Any, refs: References) -> None:
        self.document = document
        self.refs = refs
        self.entry: int | None = None  # the References entry being written
        self.lists: list[str] = []  # "Bullet" or "Number", outermost first
        self.item_started = False  # the current list item has its first paragraph
        self.quotes = 0
        self.paragraph: Any = None
        self.rows: list[list[tuple[bool, Token]]] = []  # the table being read: (header?, cell)

    def write(self, tokens: Sequence[Token]) -> None:
        cell: bool | None = None  # inside a table cell: whether it is a header cell
        entries = {at: number for number, at in self.refs.entries.items()}
        for at, token in enumerate(tokens):
            kind = token.type
            known = self.refs.entries if at < self.refs.body else {}
            if kind == "heading_open":
                self.paragraph = self.document.add_paragraph(style=f"Heading {token.tag[1]}")
            elif kind == "paragraph_open":
                self.paragraph = self.document.add_paragraph(style=self._paragraph_style())
                self.entry = entries.get(at)
                if self.entry is not None:
                    self.paragraph._p.append(_bookmark("w:bookmarkStart", self.entry))
            elif kind == "paragraph_close" and self.entry is not None:
                self.paragraph._p.append(_bookmark("w:bookmarkEnd", self.entry))
                self.entry = None
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
                _add_runs(self.paragraph, token.children or [], known)
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
                _add_runs(cell.paragraphs[0], token.children or [], self.refs.entries, bold=header)
        self.rows = []


def _add_runs(
    paragraph: Any, children: Sequence[Token], known: dict[int, int], *, bold: bool = False
) -> None:
    """The inline tokens as runs; nested emphasis is counted, links keep only their text, and
    a marker whose numbers are all in `known` links each to its entry's bookmark."""
    depth = {"strong": int(bold), "em": 0, "s": 0, "link": 0}
    for child in children:
        kind = child.type
        if kind.endswith("_open") and kind[:-5] in depth:
            depth[kind[:-5]] += 1
        elif kind.endswith("_close") and kind[:-6] in depth:
            depth[kind[:-6]] -= 1
        elif kind in ("text", "code_inline", "softbreak", "image"):
            text = " " if kind == "softbreak" else child.content
            linkable = kind == "text" and not depth["link"]
            for piece in split_markers(text, known) if linkable else [text]:
                if isinstance(piece, str):
                    _run(paragraph, piece, depth, code=kind == "code_inline")
                    continue
                _run(paragraph, "[", depth)
                for i, number in enumerate(piece):
                    if i:
                        _run(paragraph, ", ", depth)
                    link = OxmlElement("w:hyperlink")
                    link.set(qn("w:anchor"), _bookmark_name(number))
                    link.append(_run(paragraph, str(number), depth, style="Hyperlink")._r)
                    paragraph._p.append(link)
                _run(paragraph, "]", depth)
        elif kind == "hardbreak":
            paragraph.add_run().add_break()


def _run(
    paragraph: Any,
    text: str,
    depth: dict[str, int],
    *,
    code: bool = False,
    style: str | None = None,
) -> Any:
    if not text:
        return None
    run = paragraph.add_run(text, style)
    run.bold = depth["strong"] > 0 or None
    run.italic = depth["em"] > 0 or None
    run.font.strike = depth["s"] > 0 or None
    if code:
        run.font.name = _CODE_FONT
    return run


def _bookmark(tag: str, number: int) -> Any:
    """A References entry's bookmarkStart (named) or bookmarkEnd, its id the entry's number."""
    mark = OxmlElement(tag)
    mark.set(qn("w:id"), str(number))
    if tag == "w:bookmarkStart":
        mark.set(qn("w:name"), _bookmark_name(number))
    return mark


def _bookmark_name(number: int) -> str:
    return f"ref_{number}"
