"""HTML, parsed by lxml: scripts, styles, navigation and forms dropped; every paragraph,
list item, table row or loose run of text a block under the path of headings above it."""

from __future__ import annotations

import codecs
import re

import lxml.etree
import lxml.html

from gen.sources.document import Block, Location, Unreadable
from gen.sources.formats.decode import decode

DROP = frozenset(
    {"script", "style", "nav", "noscript", "template", "svg", "head", "form", "button"}
)
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCKS = frozenset({"p", "li", "pre", "blockquote", "tr", "dt", "dd", "figcaption", "caption"})
CONTAINERS = frozenset({
    "html", "body", "main", "article", "section", "div", "header", "footer", "aside", "ul", "ol",
    "dl", "table", "thead", "tbody", "tfoot", "figure", "details", "summary", "address",
})  # fmt: skip
STRUCTURE = HEADINGS | BLOCKS | CONTAINERS
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def blocks(data: bytes) -> list[Block]:
    text = _XML_DECLARATION.sub("", _text(data))
    if not text.strip():
        return []
    try:
        root = lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise Unreadable(f"cannot read HTML: {exc}") from None
    walker = _Walker()
    walker.walk(root)
    return walker.out


def _text(data: bytes) -> str:
    """UTF-8 unless a <meta charset> near the top names another encoding gen knows."""
    declared = _CHARSET.search(data[:4096])
    if declared is not None and b"\0" not in data:
        try:
            encoding = codecs.lookup(declared.group(1).decode("ascii")).name
        except (LookupError, UnicodeDecodeError):
            encoding = "utf-8"
        if encoding != "utf-8":
            return data.decode(encoding, errors="replace")
    return decode(data)


class _Walker:
    def __init__(self) -> None:
        self.out: list[Block] = []
        self.path: list[tuple[int, str]] = []

    def walk(self, element: lxml.html.HtmlElement) -> None:
        loose = [element.text or ""]
        for child in element:
            tag = child.tag.lower() if isinstance(child.tag, str) else ""  # "": a comment
            if tag in DROP:
                pass
            elif tag in HEADINGS:
                self.emit(loose)
                self.heading(int(tag[1]), _words(child))
            elif tag in BLOCKS and not _has_structure(child):
                self.emit(loose)
                self.emit([_row(child) if tag == "tr" else _words(child)])
            elif tag in STRUCTURE or _has_structure(child):
                self.emit(loose)
                self.walk(child)
            elif tag:
                loose.append(_words(child))  # inline: <b>, <a>, <span>
            loose.append(child.tail or "")
        self.emit(loose)

    def heading(self, level: int, title: str) -> None:
        while self.path and self.path[-1][0] >= level:
            self.path.pop()
        if title:
            self.path.append((level, title))

    def emit(self, parts: list[str]) -> None:
        """One block of the parts' words, if any; `parts` is emptied for the next run."""
        text = " ".join(" ".join(parts).split())
        parts.clear()
        if text:
            heading = tuple(title for _, title in self.path)
            self.out.append(Block(text, Location(heading=heading)))


def _has_structure(element: lxml.html.HtmlElement) -> bool:
    return any(
        isinstance(e.tag, str) and e.tag.lower() in STRUCTURE for e in element.iterdescendants()
    )


def _words(element: lxml.html.HtmlElement) -> str:
    """The element's text, dropped elements left out, a <br> a space."""
    parts = [element.text or ""]
    for child in element:
        tag = child.tag.lower() if isinstance(child.tag, str) else ""
        if tag == "br":
            parts.append(" ")
        elif tag and tag not in DROP:
            parts.append(_words(child))
        parts.append(child.tail or "")
    return " ".join("".join(parts).split())


def _row(row: lxml.html.HtmlElement) -> str:
    cells = [_words(c) for c in row if isinstance(c.tag, str) and c.tag.lower() in ("td", "th")]
    return " | ".join(cells)
