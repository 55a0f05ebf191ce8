"""Text quality figures (distinct n-grams, repeated sentences, overlap) and the one scanner
that splits text into gen's words and sentences for them; pure text, no model."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gen.text.words import CJK_CHAR

TERMINATORS = frozenset(".!?…。！？")
CLOSERS = "\"'”’)]」』》）*_"  # may follow a terminator: `end."`, `**Done.**`, `。」`
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
MIN_SENTENCE_TOKENS = 4
MIN_SENTENCE_CJK = 6

_CJK_END = re.compile(rf"[。！？][{re.escape(CLOSERS)}]*")
_QUOTE = re.compile(r">+")
_HEADING = re.compile(r"#{1,6}")
_NUMBERED = re.compile(r"\d{1,9}[.)]")
_BULLETS = frozenset("-*+")
_FENCES = ("```", "~~~")

Region = Literal["text", "table", "code"]
UnitKind = Literal["text", "heading", "table", "code"]
Role = Literal["marker", "number", "content"]


@dataclass(frozen=True, slots=True)
class Token:
    norm: str  # lower-cased, punctuation stripped from both ends; a CJK character as is
    start: int
    end: int
    region: Region


@dataclass(frozen=True, slots=True)
class Unit:
    """A sentence, or the part of a line up to a line break: text[start:end], with its
    tokens (list and heading markers left out). A "code" unit is a closing fence line."""

    start: int
    end: int
    tokens: tuple[str, ...]
    cjk: int  # how many of the tokens are CJK characters
    kind: UnitKind


class Scanner:
    """Tokens and units of text fed in pieces split anywhere; each is reported once it is
    complete, with the same offsets whatever the split. Tokens are count_words' words:
    whitespace-separated runs, and each CJK character on its own."""

    def __init__(self) -> None:
        self.offset = 0  # characters fed so far
        self._chunk: list[str] = []
        self._chunk_start = 0
        self._line_start = True  # no content yet on this line: markers may still come
        self._line: UnitKind = "text"
        self._in_code = False
        self._unit_start = -1
        self._unit_end = -1
        self._unit_tokens: list[str] = []
        self._unit_cjk = 0

    def feed(self, piece: str) -> list[Token | Unit]:
        out: list[Token | Unit] = []
        k = self.offset
        for ch in piece:
            if ch.isspace():
                if self._chunk:
                    self._close_chunk(out)
                if ch in LINE_BREAKS:
                    self._end_unit(out)
                    self._line_start, self._line = True, "text"
            elif CJK_CHAR.match(ch):
                if self._chunk:
                    self._close_chunk(out)
                self._chunk_start, self._chunk = k, [ch]
                self._close_chunk(out)
            else:
                if not self._chunk:
                    self._chunk_start = k
                self._chunk.append(ch)
            k += 1
        self.offset = k
        return out

    @property
    def open_word(self) -> tuple[int, int]:
        """Where the word still being written starts, and how many characters it has."""
        return (self._chunk_start, len(self._chunk)) if self._chunk else (self.offset, 0)

    def finish(self) -> list[Token | Unit]:
        """What the end of the text completes: the last token and unit."""
        out: list[Token | Unit] = []
        if self._chunk:
            self._close_chunk(out)
        self._end_unit(out)
        return out

    def _close_chunk(self, out: list[Token | Unit]) -> None:
        chunk, start = "".join(self._chunk), self._chunk_start
        self._chunk = []
        # `。1949年`: 。！？ end a sentence inside a chunk, unless that would split a word
        cuts = [m.end() for m in _CJK_END.finditer(chunk) if m.end() < len(chunk)]
        parts = [chunk[i:j] for i, j in zip([0, *cuts], [*cuts, len(chunk)], strict=True)]
        if sum(_has_word(part) for part in parts) > 1:
            parts = [chunk]
        for part in parts:
            self._take(part, start, out)
            start += len(part)

    def _take(self, chunk: str, start: int, out: list[Token | Unit]) -> None:
        end = start + len(chunk)
        role = self._classify_line(chunk, start, end) if self._line_start else "content"
        if role == "marker":  # `>`, `##`, `-`
            return
        cjk = len(chunk) == 1 and CJK_CHAR.match(chunk) is not None
        norm = chunk if cjk else _core(chunk)
        line = self._line
        if norm:
            region: Region = "code" if line == "code" else "table" if line == "table" else "text"
            out.append(Token(norm, start, end, region))
        if line == "code" or role == "number":  # `1.` is a word but not the sentence's
            return
        if self._unit_start < 0:
            self._unit_start = start
        self._unit_end = end
        if norm:
            self._unit_tokens.append(norm)
            self._unit_cjk += cjk
        if chunk.rstrip(CLOSERS)[-1:] in TERMINATORS:
            self._end_unit(out)

    def _classify_line(self, chunk: str, start: int, end: int) -> Role:
        """Set the line's kind from its first chunk, and say what that chunk is."""
        self._line_start = False
        if chunk.startswith(_FENCES):
            self._in_code = not self._in_code
            self._line = "code"
            if not self._in_code:  # a closing fence: its line end is a sound place to stop
                self._unit_start, self._unit_end = start, end
        elif self._in_code:
            self._line = "code"
        elif _QUOTE.fullmatch(chunk):
            self._line_start = True
            return "marker"
        elif _HEADING.fullmatch(chunk):
            self._line = "heading"
            return "marker"
        elif chunk in _BULLETS:
            return "marker"
        elif _NUMBERED.fullmatch(chunk):
            return "number"
        elif chunk.startswith("|"):
            self._line = "table"
        return "content"

    def _end_unit(self, out: list[Token | Unit]) -> None:
        if self._unit_start >= 0:
            tokens = tuple(self._unit_tokens)
            out.append(Unit(self._unit_start, self._unit_end, tokens, self._unit_cjk, self._line))
        self._unit_start, self._unit_end = -1, -1
        self._unit_tokens, self._unit_cjk = [], 0


def _has_word(chunk: str) -> bool:
    return any(ch.isalnum() for ch in chunk)


def _core(chunk: str) -> str:
    """chunk lower-cased without the punctuation and symbols at its ends ("" if no word)."""
    i, j = 0, len(chunk)
    while i < j and not chunk[i].isalnum():
        i += 1
    while j > i and not (chunk[j - 1].isalnum() or unicodedata.category(chunk[j - 1])[0] == "M"):
        j -= 1
    return chunk[i:j].lower()


def scan(text: str) -> list[Token | Unit]:
    scanner = Scanner()
    return scanner.feed(text) + scanner.finish()


def is_sentence(unit: Unit, min_tokens: int, min_cjk: int) -> bool:
    """A prose unit long enough to count; mostly-CJK units are measured in characters."""
    n = len(unit.tokens)
    return unit.kind == "text" and n >= (min_cjk if 2 * unit.cjk >= n else min_tokens)


def sentence_key(unit: Unit) -> str:
    """The unit normalised: lower case, whitespace and punctuation collapsed."""
    return " ".join(unit.tokens)


def tokens(text: str) -> list[str]:
    """gen's words of text (as count_words counts them), lower-cased, punctuation stripped."""
    return [event.norm for event in scan(text) if isinstance(event, Token)]


def sentences(text: str) -> list[str]:
    """Prose sentences of text (ends: . ! ? … 。！？ and line breaks), without headings, table
    rows, code or list markers; shorter than 4 tokens (6 CJK characters) they do not count."""
    return [text[unit.start : unit.end] for unit in _sentence_units(scan(text))]


def distinct_n(text: str, n: int = 4) -> float:
    """Distinct n-grams / all n-grams of text's tokens; 1.0 with fewer than n tokens."""
    return _distinct(tokens(text), n)


def repeated_sentences(text: str) -> tuple[int, int]:
    """(sentences equal to an earlier one once normalised, all sentences)."""
    return _repeats(_sentence_units(scan(text)))


def overlap(text: str, earlier: str, n: int = 8) -> float:
    """Share of text's n-grams already present in earlier; 0.0 when text has none."""
    grams = ngrams(tokens(text), n)
    if not grams:
        return 0.0
    seen = set(ngrams(tokens(earlier), n))
    return sum(gram in seen for gram in grams) / len(grams)


@dataclass(frozen=True, slots=True)
class TextQuality:
    words: int
    distinct_4: float
    repeated_sentences: int
    sentences: int
    repeated_share: float  # repeated_sentences / sentences, 0.0 without sentences


def measure(text: str) -> TextQuality:
    events = scan(text)
    words = [event.norm for event in events if isinstance(event, Token)]
    repeated, total = _repeats(_sentence_units(events))
    share = repeated / total if total else 0.0
    return TextQuality(len(words), _distinct(words, 4), repeated, total, share)


def _sentence_units(events: Sequence[Token | Unit]) -> list[Unit]:
    return [
        event
        for event in events
        if isinstance(event, Unit) and is_sentence(event, MIN_SENTENCE_TOKENS, MIN_SENTENCE_CJK)
    ]


def _repeats(units: Sequence[Unit]) -> tuple[int, int]:
    seen: set[str] = set()
    repeated = 0
    for unit in units:
        key = sentence_key(unit)
        repeated += key in seen
        seen.add(key)
    return repeated, len(units)


def ngrams(words: Sequence[str], n: int) -> list[tuple[str, ...]]:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def _distinct(words: Sequence[str], n: int) -> float:
    grams = ngrams(words, n)
    return len(set(grams)) / len(grams) if grams else 1.0
