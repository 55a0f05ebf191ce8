"""Markdown, parsed by markdown-it (CommonMark and tables) so that a `#` inside a code fence is
no heading: each top-level block (paragraph, list, table, fence, quote) is kept as its source
lines, under the path of headings above it."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.token import Token

from gen.sources.document import Block, Location
from gen.sources.formats.decode import decode

_PARSER = MarkdownIt("commonmark").enable("table")


def blocks(data: bytes) -> list[Block]:
    text = decode(data)
    lines = text.split("\n")
    tokens = _PARSER.parse(text)
    path: list[tuple[int, str]] = []  # (level, title) of the headings above
    out: list[Block] = []
    for i, token in enumerate(tokens):
        if token.level != 0 or token.nesting < 0 or token.map is None:
            continue
        if token.type == "heading_open":
            level = int(token.tag[1:])
            while path and path[-1][0] >= level:
                path.pop()
            title = _plain(tokens[i + 1])
            if title:
                path.append((level, title))
            continue
        start, end = token.map
        body = "\n".join(lines[start:end]).rstrip()
        if body.strip():
            heading = tuple(title for _, title in path)
            last = start + 1 + body.count("\n")
            out.append(
                Block(body, Location(heading=heading, unit="line", first=start + 1, last=last))
            )
    return out


def _plain(inline: Token) -> str:
    """A heading's words without their markup (`Pricing **tiers**` -> `Pricing tiers`)."""
    parts = [
        " " if c.type in ("softbreak", "hardbreak") else c.content
        for c in inline.children or []
        if c.type in ("text", "code_inline", "softbreak", "hardbreak")
    ]
    return " ".join("".join(parts).split())
