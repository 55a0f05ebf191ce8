"""Markdown as tokens, for every export: one markdown-it parser (CommonMark with tables; raw
HTML is text, never markup) and the document's headings with unique, Unicode-safe anchors."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token


def parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table").enable("strikethrough")


@dataclass(frozen=True, slots=True)
class Heading:
    level: int  # 1 for `#`, 6 for `######`
    text: str  # the heading as plain text (markup dropped)
    anchor: str  # the id its HTML element carries


def inline_text(token: Token) -> str:
    """The plain text of an inline token: what a reader sees, without the markup."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(inline_text(child))
    return "".join(parts)


def headings(tokens: Sequence[Token]) -> list[Heading]:
    """Every heading in document order, each with an anchor no other heading has."""
    found: list[Heading] = []
    used: set[str] = {"contents"}  # the table of contents' own id
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = inline_text(tokens[i + 1]).strip()
            found.append(Heading(int(token.tag[1]), text, _unique(slug(text), used)))
    return found


def slug(text: str) -> str:
    """An anchor from a heading: letters, digits and combining marks of any script are kept
    (so Chinese, Thai and accented words survive), lowercased; anything else becomes `-`."""
    kept = "".join(
        ch if unicodedata.category(ch)[0] in "LNM" else "-"
        for ch in unicodedata.normalize("NFC", text).lower()
    )
    return re.sub(r"-+", "-", kept).strip("-") or "section"


def _unique(anchor: str, used: set[str]) -> str:
    candidate, n = anchor, 1
    while candidate in used:
        candidate, n = f"{anchor}-{n}", n + 1
    used.add(candidate)
    return candidate
