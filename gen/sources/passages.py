"""Passages: a document's blocks cut and packed into pieces of about PASSAGE_WORDS words (a CJK
character counts as a word), cut at paragraphs, then sentences, then lines, and between words
only when nothing else serves. Each passage keeps its place: file, page or heading path,
first and last line or row. Neighbours share a passage only when they share a place."""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gen.sources.document import Block, Document, Location
from gen.sources.limits import PASSAGE_WORDS
from gen.text.claims import strip_span
from gen.text.words import count_words, prefix_with_words

RECORD_KINDS = frozenset({"csv", "jsonl"})  # a block is a record: neighbours joined by a line end

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# a sentence ends at . ! ? before a space and no lower-case letter (`e.g. the` goes on), or at
# 。！？ with or without a space; closing quotes and brackets stay with their sentence
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*\s+(?![a-z])|[。！？][」』”’）\"]*\s*")
_LINE_END = re.compile(r"\n\s*")

Span = tuple[int, int]  # [start, end) of a block's text


@dataclass(frozen=True, slots=True)
class Passage:
    id: str  # "notes/q3.md#4": the document's path and the passage's number in it, from 1
    path: str  # the document's path, relative to the pipeline's folder
    location: Location
    text: str
    sha256: str  # of the text
    words: int


def passages(documents: Sequence[Document], words: int = PASSAGE_WORDS) -> list[Passage]:
    """Every document's passages, in document order."""
    return [p for document in documents for p in split(document, words)]


def split(document: Document, words: int = PASSAGE_WORDS) -> list[Passage]:
    if words < 1:
        raise ValueError(f"words must be at least 1, got {words}")
    # 1) cut every block into units of at most `words` words
    units = [
        (i, span)
        for i, block in enumerate(document.blocks)
        for span in _cut(block.text, (0, len(block.text)), words, 0)
    ]
    # 2) pack neighbouring units of one place while they fit
    groups: list[list[tuple[int, Span]]] = []
    size, last_place = 0, None
    for i, span in units:
        n = count_words(document.blocks[i].text[span[0] : span[1]])
        place = document.blocks[i].location.place()
        if not groups or size + n > words or place != last_place:
            groups.append([])
            size = 0
        groups[-1].append((i, span))
        size, last_place = size + n, place
    joiner = "\n" if document.kind in RECORD_KINDS else "\n\n"
    return [_passage(document, k, group, joiner) for k, group in enumerate(groups, start=1)]


def _passage(document: Document, k: int, group: list[tuple[int, Span]], joiner: str) -> Passage:
    pieces: dict[int, Span] = {}  # block -> the span of it the passage holds
    for i, (start, end) in group:
        first = pieces.get(i, (start, end))[0]
        pieces[i] = (first, end)
    text = joiner.join(document.blocks[i].text[s:e] for i, (s, e) in pieces.items())
    blocks = list(pieces.items())
    head, tail = blocks[0], blocks[-1]
    location = document.blocks[head[0]].location
    if location.unit is not None:
        first = _unit_at(document.blocks[head[0]], head[1][0])
        last = _unit_at(document.blocks[tail[0]], tail[1][1])
        location = Location(location.page, location.heading, location.unit, first, last)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Passage(f"{document.path}#{k}", document.path, location, text, digest, count_words(text))


def _unit_at(block: Block, offset: int) -> int:
    """The line (or row) of the file that holds the block's character at offset."""
    return block.location.first + block.text.count("\n", 0, offset)


def _cut(text: str, span: Span, words: int, level: int) -> list[Span]:
    """span, trimmed, as pieces of at most `words` words, cut at the coarsest boundary that
    serves: paragraphs, sentences, lines, words (level 0 to 3)."""
    start, end = strip_span(text, span)
    if start >= end:
        return []
    if count_words(text[start:end]) <= words:
        return [(start, end)]
    if level == len(_SPLITTERS):
        return _between_words(text, (start, end), words)
    parts = _SPLITTERS[level](text, (start, end))
    if len(parts) == 1:
        return _cut(text, (start, end), words, level + 1)
    return [piece for part in parts for piece in _cut(text, part, words, level + 1)]


def _at(pattern: re.Pattern[str]) -> Callable[[str, Span], list[Span]]:
    def parts(text: str, span: Span) -> list[Span]:
        cuts = [m.end() for m in pattern.finditer(text, span[0], span[1])]
        bounds = [span[0], *[c for c in cuts if span[0] < c < span[1]], span[1]]
        return list(itertools.pairwise(bounds))

    return parts


_SPLITTERS = [_at(_PARAGRAPH_BREAK), _at(_SENTENCE_END), _at(_LINE_END)]


def _between_words(text: str, span: Span, words: int) -> list[Span]:
    pieces = []
    start, end = span
    while start < end:
        cut = start + len(prefix_with_words(text[start:end], words))  # > start: words >= 1
        piece = strip_span(text, (start, cut))
        if piece[0] < piece[1]:
            pieces.append(piece)
        start = cut
    return pieces
