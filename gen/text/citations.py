"""Citation markers in a section's text: found ([3], [3, 5], [3][5], [3-5], 【3】, ［3］),
kept when they point at a passage the section was shown and dropped (counted, the text
mended) when not, renumbered across the document in order of first citation, and listed
as References. Pure text: passages come in as ids, paths, locations and text."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gen.text.chatter import bare
from gen.text.claims import claim, code_regions, inside, sentence_at, sentence_spans
from gen.text.words import prefix_with_words

Span = tuple[int, int]
QUOTE_WORDS = 25  # a reference's quote at most (a CJK character counts as a word)

# one bracket of numbers: "3", "3, 5", "3-5", full-width digits and marks as well
_ITEM = r"[0-9０-９]+(?:\s*[-–—~～－]\s*[0-9０-９]+)?"
_BRACKET = re.compile(rf"[\[【［]\s*({_ITEM}(?:\s*[,，、;；]\s*{_ITEM})*)\s*[\]】］]")
_RANGE = re.compile(r"\s*[-–—~～－]\s*")
_GAP = re.compile(r"[ \t]*[,，、;；]?[ \t]*")  # what may stand between brackets of one marker
_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:", re.M)
_HORIZONTAL_SPACE = " \t\u3000"
_CLOSING = ".,;:!?)]}。，、；：！？）」』》…"


class ShownPassage(Protocol):
    """A passage as a section's prompt showed it: `id` is the caller's opaque key
    ("handbook.md#3"); `path` and `location` are what References print."""

    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def location(self) -> str: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Marker:
    """Brackets written together (`[3][5]`, `[3], [5]`) as one marker: text[start:end].
    `numbers` are those in 1..n, ascending, once each; `dropped` counts what pointed
    elsewhere (a number, or the part of a range, outside 1..n)."""

    start: int
    end: int
    numbers: tuple[int, ...]
    dropped: int


@dataclass(frozen=True, slots=True)
class Citation:
    """A kept marker in the checked text: text[start:end] is `[a, b]` in the section's own
    numbers; `passages` the ids it points at, in that order."""

    start: int
    end: int
    passages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SectionCitations:
    text: str  # the section with markers normalised to `[a, b]` and bad ones removed
    citations: tuple[Citation, ...]
    dropped: int
    shown: tuple[ShownPassage, ...]  # the passages the prompt numbered, [1] first

    @property
    def cited(self) -> int:
        """How many passage references the kept markers make (`[1, 3]` makes two)."""
        return sum(len(c.passages) for c in self.citations)


@dataclass(frozen=True, slots=True)
class Reference:
    number: int
    passage: str  # the passage's id
    path: str
    location: str
    quote: str  # at most QUOTE_WORDS words, cut on a word with "…"


def find_markers(text: str, count: int) -> list[Marker]:
    """Every marker outside code, link targets and link definitions, for a section shown
    `count` passages; a bracket that is a link's text (`[3](url)`, `[text][3]`) is none."""
    skip = code_regions(text) + [m.span() for m in _LINK_DEFINITION.finditer(text)]
    markers: list[Marker] = []
    for match in _BRACKET.finditer(text):
        start, end = match.span()
        link = text.startswith(("(", "["), end) and not _BRACKET.match(text, end)
        if link or inside(skip, start):
            continue
        joined = bool(markers) and _GAP.fullmatch(text, markers[-1].end, start) is not None
        if start > 0 and text[start - 1] == "]" and not joined:
            continue  # `[text][3]`: a reference link's label
        numbers, dropped = _numbers(match.group(1), count)
        if joined:
            last = markers.pop()
            numbers, dropped = [*last.numbers, *numbers], last.dropped + dropped
            start = last.start
        markers.append(Marker(start, end, tuple(sorted(set(numbers))), dropped))
    return markers


def check_section(text: str, shown: Sequence[ShownPassage]) -> SectionCitations:
    """Keep the markers that point at a passage in `shown` ([1] is shown[0]), written as
    `[a, b]`; remove the rest without leaving double spaces, a space before a stop or an
    empty `()`; count what was dropped."""
    markers = find_markers(text, len(shown))
    mended, spans = _splice(text, [(m.start, m.end, _written(m.numbers)) for m in markers])
    citations: list[Citation] = []
    dropped = 0
    for marker, span in zip(markers, spans, strict=True):
        dropped += marker.dropped
        if span is not None:
            ids = tuple(dict.fromkeys(shown[n - 1].id for n in marker.numbers))
            citations.append(Citation(span[0], span[1], ids))
    return SectionCitations(mended, tuple(citations), dropped, tuple(shown))


def number_document(sections: Sequence[SectionCitations]) -> tuple[list[str], list[Reference]]:
    """The sections' texts with their own numbers made the document's, and the References:
    the first passage cited anywhere is [1], in document order, and a passage two sections
    cite has one number. Each quote is the passage's sentence that shares most content
    words with the sentences citing it (the first sentence when none shares any), so a
    reader sees the part of the passage the claim rests on."""
    numbers: dict[str, int] = {}
    passages: dict[str, ShownPassage] = {}
    claims: dict[str, list[str]] = {}
    texts: list[str] = []
    for section in sections:
        by_id = {p.id: p for p in section.shown}
        spans = sentence_spans(section.text)
        edits = []
        for citation in section.citations:
            where = sentence_at(spans, citation.start) or (citation.start, citation.end)
            for passage in citation.passages:
                if passage not in numbers:
                    numbers[passage] = len(numbers) + 1
                    passages[passage] = by_id[passage]
                claims.setdefault(passage, []).append(section.text[where[0] : where[1]])
            written = sorted({numbers[p] for p in citation.passages})
            edits.append((citation.start, citation.end, _written(tuple(written))))
        texts.append(_splice(section.text, edits)[0])
    references = [
        Reference(n, pid, passages[pid].path, passages[pid].location,
                  quote(passages[pid].text, claims[pid]))
        for pid, n in numbers.items()
    ]  # fmt: skip
    return texts, references


def quote(passage: str, claims: Sequence[str], words: int = QUOTE_WORDS) -> str:
    """The passage's sentence (cut to `words`) that shares most content terms with claims;
    ties go to the earlier sentence."""
    wanted = frozenset().union(*(claim(c).terms for c in claims))
    best, best_shared = "", -1
    for start, end in sentence_spans(passage):
        candidate = _cut(bare(" ".join(passage[start:end].split())), words)
        shared = len(claim(candidate).terms & wanted)
        if shared > best_shared:
            best, best_shared = candidate, shared
    return best


def references_markdown(references: Sequence[Reference], heading: str = "References") -> str:
    """`## References` and one paragraph per entry: `[n] path, location: "quote"` (DESIGN
    §12); a heading such as "参考文献" for a Chinese document. Empty when nothing is cited."""
    if not references:
        return ""
    lines = [f"## {heading}"]
    for ref in references:
        place = f"{ref.path}, {ref.location}" if ref.location else ref.path
        said = ref.quote.replace('"', "'")
        lines.append(f'[{ref.number}] {place}: "{said}"' if said else f"[{ref.number}] {place}")
    return "\n\n".join(lines) + "\n"


def _numbers(body: str, count: int) -> tuple[list[int], int]:
    kept: list[int] = []
    dropped = 0
    for item in re.split(r"\s*[,，、;；]\s*", unicodedata.normalize("NFKC", body).strip()):
        ends = [int(x) for x in _RANGE.split(item)]
        low, high = ends[0], ends[-1]
        if low > high or low < 1 or low > count:
            dropped += 1
            continue
        if high > count:
            dropped += 1
        kept += range(low, min(high, count) + 1)
    return kept, dropped


def _written(numbers: tuple[int, ...]) -> str:
    return f"[{', '.join(map(str, numbers))}]" if numbers else ""


def _splice(text: str, edits: list[tuple[int, int, str]]) -> tuple[str, list[Span | None]]:
    """text with each (start, end) replaced, in order, and where each replacement landed
    (None for a removal). A removal takes the space before it when a stop, a closing
    bracket or the line's end follows, the space after it at a line's start, and `()` left
    empty."""
    out: list[str] = []
    spans: list[Span | None] = []
    at, length = 0, 0
    for start, end, new in edits:
        if not new:
            start, end = _mend(text, at, start, end)
        out.append(text[at:start])
        length += start - at
        spans.append((length, length + len(new)) if new else None)
        out.append(new)
        length += len(new)
        at = end
    out.append(text[at:])
    return "".join(out), spans


def _mend(text: str, at: int, start: int, end: int) -> tuple[int, int]:
    """The span to remove for a dropped marker text[start:end], not reaching back past at."""
    if start - 1 >= at and text[start - 1] == "(" and text.startswith(")", end):
        start, end = start - 1, end + 1  # "trams ([9])."
    before = start
    while before > at and text[before - 1] in _HORIZONTAL_SPACE:
        before -= 1
    following = text[end : end + 1]
    if before < start and (not following or following.isspace() or following in _CLOSING):
        return before, end  # "trams [9]." and "trams [9]\n"
    if before == 0 or text[before - 1] == "\n":
        while end < len(text) and text[end] in _HORIZONTAL_SPACE:
            end += 1  # "[9] Trams" at a line's start
        if text.startswith("\n", end) and before > 0:
            end += 1  # a line that held only the marker goes, so no paragraph break is made
    return start, end


def _cut(sentence: str, words: int) -> str:
    head = prefix_with_words(sentence, words)
    if len(head) == len(sentence):
        return sentence
    return head.rstrip(" \t,;:，、；：-–—") + "…"
