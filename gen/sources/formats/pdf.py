"""PDF, read by pypdf: one block per page that has text, located by its page number (1 is the
first page). A damaged or encrypted file is Unreadable with pypdf's reason, never a traceback."""

from __future__ import annotations

import io
import re
import warnings

import pypdf

from gen.sources.document import Block, Location, Unreadable

FULL_LINE = 0.75  # a line at least this share of the page's longest runs on to the next
_HYPHEN_BREAK = re.compile(r"(\w)-\n(?=[a-z])")  # a word broken at a line's end


def blocks(data: bytes) -> list[Block]:
    if b"%PDF-" not in data[:1024]:
        raise Unreadable("not a PDF (no %PDF header)")
    with warnings.catch_warnings():  # pypdf warns about what it repairs; the text is what counts
        warnings.simplefilter("ignore")
        pages = _pages(data)
    out = [
        Block(text, Location(page=number))
        for number, text in enumerate(pages, start=1)
        if text.strip()
    ]
    if not out:
        raise Unreadable("no text in it (a scanned PDF needs OCR first)")
    return out


def _pages(data: bytes) -> list[str]:
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("cannot read PDF: it is encrypted with a password")
        return [_tidy(page.extract_text()) for page in reader.pages]
    except Unreadable:
        raise
    except Exception as exc:  # pypdf raises many kinds (PdfReadError, KeyError, ...) on damage
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Unreadable(f"cannot read PDF: {reason[:200]}") from None


def _tidy(text: str) -> str:
    """Page text with its visual lines joined into paragraphs: a line shorter than most ends
    one (a heading, a paragraph's last line, a table row), a blank line too; a word broken
    by a hyphen at a line's end is made whole."""
    lines = [line.strip() for line in _HYPHEN_BREAK.sub(r"\1", text).split("\n")]
    width = max(map(len, lines), default=0)
    paragraphs: list[str] = []
    current: list[str] = []
    for line in lines:
        if line:
            current.append(line)
        if current and len(line) < FULL_LINE * width:
            paragraphs.append(" ".join(current))
            current = []
    return "\n".join([*paragraphs, " ".join(current)]).strip()
