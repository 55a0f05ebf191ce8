"""What a sentence claims, as terms that can be looked up in a passage: the text's sentences
(English and Chinese), their content words (stemmed; numbers kept; CJK as character bigrams),
figures and names. Pure text, for citations and their support."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from gen.text.chatter import bare
from gen.text.function_words import CJK_FUNCTION, STOPWORDS
from gen.text.words import CJK

# a fence line opens or closes a code block; a backtick run opens an inline span that the
# same run closes
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.M)
_INLINE_CODE = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
# a line that starts a block of its own: blank, heading, list item, quote, table row
_BLOCK_START = re.compile(r"[ \t]*(?:$|#{1,6}\s|[-*+•]\s|\d{1,9}[.)]\s|>|\|)")
_LIST_MARKER = re.compile(r"[ \t]*(?:[-*+•]|\d{1,9}[.)])[ \t]+")
_BLOCK_LINE = re.compile(r"[ \t]*(?:#{1,6}\s|\|)")  # a heading or a table row ends at its line
# a sentence end: 。！？ always; . ! ? … before a space; with closing quotes and brackets,
# and the citation markers written after it ("minutes. [3]")
_CLOSERS = "\"'”’)\\]」』》）*_"
_MARKERS_AFTER = r"(?:[ \t]*(?:\[\d+(?:,\s*\d+)*\]|【\d+(?:[,，、]\s*\d+)*】))*"
_END = re.compile(
    rf"(?:[。！？]|[.!?…](?=[{_CLOSERS}]*(?:\s|$|\[\d|【)))[{_CLOSERS}]*{_MARKERS_AFTER}"
)
# "Dr. Ng", "e.g. the", "U.S. data", "J. Smith": a stop after these ends no sentence
ABBREVIATIONS = frozenset({
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "no", "nos", "fig", "figs", "vol",
    "p", "pp", "ca", "approx", "cf", "al", "inc", "ltd", "co", "corp", "dept", "est", "jan",
    "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
})  # fmt: skip
_LOOK = 40  # characters looked at around a stop (an abbreviation is shorter)
_WORD_BEFORE = re.compile(r"([^\W\d_]+(?:\.[^\W\d_]+)*)$")

_TERM = re.compile(
    r"(?P<code>[A-Za-z]+\d[A-Za-z0-9]*)(?![^\W_])"  # "T1", "A320", "BM25": a figure too
    rf"|(?P<number>\d+(?:[.,]\d+)*)(?:(?:st|nd|rd|th)(?![^\W\d_]))?"
    rf"|(?P<cjk>[{CJK}]+)"
    rf"|(?P<word>(?:(?![{CJK}])[^\W\d_])+(?:['’](?:(?![{CJK}])[^\W\d_])+)*)"
)
_THOUSANDS = re.compile(r",(?=\d{3}(?!\d))")
NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Claim:
    """A sentence as terms: `terms` its content words and numbers (the support measure's
    units), `numbers` its figures (numbers and codes such as "T1"), `names` its capitalised
    words past the first (both as written)."""

    terms: frozenset[str]
    numbers: tuple[str, ...]
    names: tuple[str, ...]


def fenced_blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of every fenced code block, fence lines included; an unclosed one runs
    to the end."""
    blocks: list[tuple[int, int]] = []
    opened: re.Match[str] | None = None
    for fence in _FENCE.finditer(text):
        if opened is None:
            opened = fence
        elif fence.group(1)[0] == opened.group(1)[0] and len(fence.group(1)) >= len(
            opened.group(1)
        ):
            blocks.append((opened.start(), _line_end(text, fence.end())))
            opened = None
    if opened is not None:
        blocks.append((opened.start(), len(text)))
    return blocks


def code_regions(text: str) -> list[tuple[int, int]]:
    """(start, end) of every fenced block and every inline code span outside them."""
    blocks = fenced_blocks(text)
    spans, at = [], 0
    for start, end in [*blocks, (len(text), len(text))]:
        spans += [m.span() for m in _INLINE_CODE.finditer(text, at, start)]
        at = end
    return sorted(blocks + spans)


def inside(regions: Iterable[tuple[int, int]], position: int) -> bool:
    return any(start <= position < end for start, end in regions)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, stripped of space. A blank line, a heading, a list
    item, a quote or a table row starts a new one; a line break inside a paragraph does not
    (sources are often wrapped). Code blocks hold no sentences; citation markers after a
    stop belong to the sentence before."""
    code = fenced_blocks(text)
    spans: list[tuple[int, int]] = []
    for begin, end in _blocks(text, code):
        start = begin
        item = _LIST_MARKER.match(text, begin, end)  # "1. " is no sentence of its own
        for match in _END.finditer(text, item.end() if item else begin, end):
            if match.group()[0] == "." and _abbreviation(text, match.start(), end):
                continue
            spans.append((start, match.end()))
            start = match.end()
        spans.append((start, end))
    stripped = [strip_span(text, span) for span in spans]
    return [(start, end) for start, end in stripped if start < end]


def sentence_at(spans: list[tuple[int, int]], position: int) -> tuple[int, int] | None:
    """The span that holds position (a marker's start), or None when it is in none."""
    return next(((s, e) for s, e in spans if s <= position < e), None)


def claim(sentence: str) -> Claim:
    """The terms, figures and names of one sentence (markdown markers and emphasis aside)."""
    said = bare(unicodedata.normalize("NFKC", sentence))
    terms: set[str] = set()
    numbers: list[str] = []
    names: list[str] = []
    for i, (kind, raw) in enumerate(_raw_terms(said)):
        if kind == "word" and raw.lower() in NUMBER_WORDS:
            kind, raw = "number", NUMBER_WORDS[raw.lower()]
        if kind in ("number", "code"):
            terms.add(raw.lower())
            numbers.append(raw)
        elif kind == "cjk":
            terms.update(_bigrams(raw))
        elif raw.lower() not in STOPWORDS and len(raw) > 1:
            terms.add(stem(raw))
            if i > 0 and raw[0].isupper():
                names.append(raw)
    return Claim(frozenset(terms), tuple(dict.fromkeys(numbers)), tuple(dict.fromkeys(names)))


def terms(text: str) -> frozenset[str]:
    """Every content term of a text (a passage): what claims are looked up in."""
    return frozenset().union(*(claim(text[s:e]).terms for s, e in sentence_spans(text)))


def stem(word: str) -> str:
    """One form for a word's plural, -ing and -ed forms ("trams", "tram"; "opened",
    "opening", "opens", "open"; "carried", "carries", "carry"): a key, not a word."""
    w = word.lower().replace("’", "'").removesuffix("'s")
    if len(w) > 4 and w.endswith(("ies", "ied")):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes", "zes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    elif len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 3 and w.endswith("ed"):
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]  # "running" -> "runn" -> "run"
    return w[:-1] if len(w) > 2 and w.endswith("e") else w


def _raw_terms(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for m in _TERM.finditer(text):
        kind = m.lastgroup or "word"
        raw = _THOUSANDS.sub("", m.group(kind)) if kind == "number" else m.group(kind)
        found.append((kind, raw))
    return found


def _bigrams(run: str) -> set[str]:
    """A CJK run as character bigrams, cut at particles ("上海的电车": 上海, 电车); a character
    left alone between particles ("就是这样": 样) is grammar more often than content."""
    grams: set[str] = set()
    for piece in re.split(f"[{''.join(CJK_FUNCTION)}]+", run):
        grams.update(piece[i : i + 2] for i in range(len(piece) - 1))
    return grams


def _blocks(text: str, code: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(start, end) of each paragraph, heading, list item, quote or table row outside code."""
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    at = 0
    for line in text.splitlines(keepends=True):
        line_start, at = at, at + len(line)
        if inside(code, line_start):
            if start is not None:
                blocks.append((start, line_start))
            start = None
            continue
        if start is not None and _BLOCK_START.match(line):
            blocks.append((start, line_start))
            start = None
        if start is None and line.strip():
            start = line_start
        if start is not None and _BLOCK_LINE.match(line):
            blocks.append((start, at))
            start = None
    if start is not None:
        blocks.append((start, len(text)))
    return blocks


def _abbreviation(text: str, stop: int, end: int) -> bool:
    """The '.' at stop ends an abbreviation or an initial, or the next word is lower case."""
    after = text[stop + 1 : min(end, stop + _LOOK)].lstrip(_CLOSERS + " \t\n")
    if after[:1].islower():
        return True
    word = _WORD_BEFORE.search(text, max(0, stop - _LOOK), stop)
    if word is None:
        return False
    said = word.group(1)
    return "." in said or said.lower() in ABBREVIATIONS or (len(said) == 1 and said.isupper())


def strip_span(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """The span with the white space at either end of text[span] left out."""
    start, end = span
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _line_end(text: str, position: int) -> int:
    newline = text.find("\n", position)
    return len(text) if newline < 0 else newline + 1
