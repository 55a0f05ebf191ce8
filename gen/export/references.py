"""A cited document's markers and References (gen.text.citations writes them: `[1]`, `[2, 5]` in
the text, and a last section of `[n] path, location: "quote"` paragraphs) found in markdown-it's
tokens, so each export can link a marker's numbers to their entries."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it.token import Token

_ENTRY = re.compile(r"\[([0-9]+)\] ")
_MARKER = re.compile(r"\[([0-9]+(?:, [0-9]+)*)\]")


@dataclass(frozen=True, slots=True)
class References:
    """`body` tokens come before the References heading (markers are linked there only);
    `entries` maps each entry's number to its paragraph_open token's index."""

    body: int
    entries: dict[int, int]


def find_references(tokens: Sequence[Token]) -> References:
    """The document's last section when every block in it is an entry paragraph (`[n] ` at
    its start), whatever its heading says ("References", "参考文献"); else no entries."""
    heads = [i for i, t in enumerate(tokens) if t.type == "heading_open"]
    none = References(len(tokens), {})
    if not heads:
        return none
    start = heads[-1]
    after = tokens[start + 3 :]  # heading_open, inline, heading_close
    if not after or len(after) % 3:
        return none
    entries: dict[int, int] = {}
    for at in range(0, len(after), 3):
        opening, inline, closing = after[at : at + 3]
        found = _ENTRY.match(inline.content) if inline.type == "inline" else None
        if opening.type != "paragraph_open" or closing.type != "paragraph_close" or not found:
            return none
        entries.setdefault(int(found.group(1)), start + 3 + at)
    return References(start, entries)


def split_markers(text: str, known: dict[int, int]) -> list[str | tuple[int, ...]]:
    """`text` as plain pieces and markers (their numbers), in order; a marker is one whose
    every number is an entry in `known`, anything else stays text."""
    pieces: list[str | tuple[int, ...]] = []
    at = 0
    for match in _MARKER.finditer(text):
        numbers = tuple(int(n) for n in match.group(1).split(", "))
        if not all(n in known for n in numbers):
            continue
        if match.start() > at:
            pieces.append(text[at : match.start()])
        pieces.append(numbers)
        at = match.end()
    if at < len(text):
        pieces.append(text[at:])
    return pieces


def anchor(number: int) -> str:
    """The id of entry `number` in the HTML (and the PDF printed from it)."""
    return f"ref-{number}"
