"""Whether a document holds together: how much of a section says again what earlier
sections said (overlap of word 5-grams), and whether the body follows its outline (every
item a heading, in order, and no heading twice)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gen.text.listparse import title_key
from gen.text.markdown import headings, parser
from gen.text.quality import overlap

OVERLAP_N = 5  # word n-grams compared across sections
# "2. ", "Part 2: ", "Chapter 2 -": what may number a heading before its title
_NUMBERING = re.compile(r"^\s*(?:(?:part|chapter|section)\s*)?\d+\s*[.:)\-–—]?\s*", re.I)


def section_overlap(text: str, earlier: Sequence[str]) -> float:
    """The share of `text`'s word 5-grams that earlier sections already hold."""
    return overlap(text, "\n\n".join(earlier), n=OVERLAP_N)


@dataclass(frozen=True, slots=True)
class OutlineCheck:
    followed: bool  # every item a heading, in order, and no heading twice
    missing: list[str] = field(default_factory=list)  # items with no heading (in order)
    repeated: list[str] = field(default_factory=list)  # headings that appear twice


def check_outline(markdown: str, items: Sequence[str]) -> OutlineCheck:
    """The document's headings against the outline's items: each item must be a heading
    (numbering and case aside) after the previous item's, and no heading may repeat."""
    found = [h.text for h in headings(parser().parse(markdown))]
    keys = [_heading_key(h) for h in found]
    seen: set[str] = set()
    repeated: list[str] = []
    for text, key in zip(found, keys, strict=True):
        if key and key in seen and text not in repeated:
            repeated.append(text)
        seen.add(key)
    missing: list[str] = []
    at = 0
    for item in items:
        key = _heading_key(item)
        where = next((i for i in range(at, len(keys)) if keys[i] == key), None)
        if where is None:
            missing.append(item)
        else:
            at = where + 1
    return OutlineCheck(not missing and not repeated, missing, repeated)


def _heading_key(text: str) -> str:
    return title_key(_NUMBERING.sub("", text))
