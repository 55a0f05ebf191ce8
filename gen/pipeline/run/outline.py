"""Outlines that always parse. A `parse: list` section is held, token by token, to a Lark
grammar: numbered single-line titles, `min_items` to `max_items` of them, none of the titles
the pipeline writes itself (`exclude:`) and none refused before. While the list streams, the
ItemGuard refuses an item that repeats an earlier one (the same words, a plural or a
misspelling aside, or most of the words that are not the prompt's) or only echoes the
prompt; the section runner cuts it away and samples that item again."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gen.pipeline.run.lines import finished_lines
from gen.text.function_words import DETERMINERS, FUNCTION_WORDS
from gen.text.listparse import is_twin, line_item, singular, title_key

TITLE_CHARS = 60  # the longest title an item may have
# an item that shares this share of its words (other than the prompt's) with an earlier one
# says the same thing ("Bridges in ancient cultures" after "Bridges in ancient times")
SAME_WORDS = 2 / 3
STEM = 6  # words compared by their first letters: "history", "historical"
# an item whose first two words ("the" aside) open this many earlier ones is one more of a
# refrain ("The history of construction", "The history of the first ...", ...)
LEAD_SAME = 2
# a title: words with a little punctuation (no sentence ends, list markers, emphasis,
# quotes or brackets), no digit or mark at its start, nothing dangling at its end but the
# colon small models write after a title (the list's parser drops it). (Classes by what
# they leave out: Unicode's letter classes cost llguidance's lexer too much.)
_NOT_WORDS = r"\n.!?。！？;；#*_`|<>\[\]{}\"“”«»"
_FIRST = rf"[^\s{_NOT_WORDS}a-z0-9:：,，\-–—+•()'’\/\\]"  # (not a sentence's next line)
_WORDS = rf"[^{_NOT_WORDS}\\]"
_DANGLES = r"([\s,，(\-–—'’\/&]|[\s:：][:：])"  # what a title may not end on
_TITLE = rf"/{_FIRST}{_WORDS}{{1,{TITLE_CHARS - 1}}}/ & ~/{_WORDS}*{_DANGLES}/"
_PREAMBLE = r"(?i)(here (is|are)|outline|the outline|sure)( [^\n]*)?"  # "Here is the outline:"
# the guard's: a title is not a sentence, and does not end on "of the" (in the grammar,
# patterns like these make llguidance's lexer build too many states)
VERBS = frozenset(("is", "are", "was", "were", "can", "will", "has", "have", "provide", "provides",
                   "include", "includes", "occur", "occurs"))  # fmt: skip
_CUT = re.compile(r"[,，]\S{1,2}$")  # "A self-balancing bike,R": the length limit's mark
DANGLING = FUNCTION_WORDS - {"it", "they", "we", "you", "i", "he", "she"}
_META = "&-~#/"  # besides re's own: what Lark's /.../ and llguidance's regex also treat as syntax


def list_grammar(
    min_items: int,
    max_items: int,
    *,
    exclude: Iterable[str] = (),
    refused: Iterable[str] = (),
    fresh_from: int = 1,
) -> str:
    """The Lark grammar of a numbered list of `min_items`..`max_items` titles ("1. Title\\n"
    each). Items from `fresh_from` on may not be (or start with) an `exclude` title nor be a
    `refused` one (case and a plural -s aside); earlier items are already written."""
    if not 1 <= min_items <= max_items:
        raise ValueError(f"need 1 <= min_items <= max_items, got {min_items}, {max_items}")
    # banned as a title's start (after "the"), so the first token that commits to one is
    # masked; the guard refuses the pipeline's own titles anywhere in a title
    banned = [rf"((the|a|an) )?{_literal(t)}[^\n]*" for t in [*exclude, *refused] if t.strip()]
    fresh = "TITLE"
    if banned:
        fresh += f" & ~/(?i)({'|'.join(banned)})/"
    lines = [f"start: {_items(1, min_items, max_items)}"]
    for k in range(1, max_items + 1):
        title = "FRESH" if k >= fresh_from else "TITLE"
        lines.append(f'i{k}: "{k}. " {title} "\\n"')
    lines.append(f"TITLE: {_TITLE} & ~/{_PREAMBLE}/")
    lines.append(f"FRESH: {fresh}")
    return "\n".join(lines) + "\n"


def json_list_schema(min_items: int, max_items: int) -> str:
    """`parse: json`'s default schema: an array of parts, each a title, a word budget and a
    few key points (a fan-out reads them as item.title, item.words, item.points)."""
    part = {
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 3, "maxLength": TITLE_CHARS},
            "words": {"type": "integer", "minimum": 50, "maximum": 5000},
            "points": {
                "type": "array",
                "items": {"type": "string", "minLength": 3, "maxLength": 120},
                "maxItems": 4,
            },
        },
        "required": ["title", "words", "points"],
        "additionalProperties": False,
    }
    schema = {"type": "array", "items": part, "minItems": min_items, "maxItems": max_items}
    return json.dumps(schema)


def _items(k: int, least: int, most: int) -> str:
    """Items k..most, the first `least` of them required: "i1 i2 (i3 (i4)?)?"."""
    if k > most:
        return ""
    rest = _items(k + 1, least, most)
    here = f"i{k} {rest}".strip()
    return here if k <= least else f"({here})?"


def _lead(words: list[str]) -> tuple[str, ...]:
    """A title's first two words after a determiner; () when that is the whole title."""
    if words and words[0] in DETERMINERS:
        words = words[1:]
    return tuple(words[:2]) if len(words) > 2 else ()


def _literal(text: str) -> str:
    """`text` as a regex that matches it literally, inside Lark's /.../."""
    out = []
    for ch in text.strip():
        out.append("\\" + ch if ch in r"\.+*?()|[]{}^$" or ch in _META else ch)
    return "".join(out)


def tidy_title(title: str) -> str:
    """A title that ran to its end badly (accepted once only repeats were refused) tidied:
    what dangles at its end goes ("... building and the" -> "... building"; "bike,R" ->
    "bike"); one that ran to the length limit loses its last word, which the limit may have
    cut in two ("... against Asian America" of "Americans"). A title that would be left
    empty stays as it is."""
    words = title.strip().split()
    if len(title.strip()) >= TITLE_CHARS - 1 and len(words) > 1:
        words.pop()
    while words:
        last = words[-1]
        cut = re.sub(r"[,，][^,，]{0,2}$", "", last).rstrip(",，:：;-–—(/&'’")
        if cut != last:
            words[-1] = cut
            if not cut:
                words.pop()
            continue
        if len(words) > 1 and title_key(last) in DANGLING:
            words.pop()
            continue
        break
    return " ".join(words) or title.strip()


@dataclass(frozen=True, slots=True)
class Refusal:
    start: int  # where the refused item's line begins in the text
    title: str
    reason: str


class ItemGuard:
    """Feed it the list's text as it grows; it checks each finished line's item against the
    earlier ones and returns the first it refuses."""

    def __init__(
        self, prompt: str, exclude: Sequence[str] = (), text: str = "", title: str = ""
    ) -> None:
        """`exclude`: titles the pipeline writes itself (refused anywhere in an item);
        `title`: the document's (refused as an item of its own, misspelt or not)."""
        words = title_key(prompt).split()
        # "silk road" in the prompt: "silkroad" is its word too
        pairs = [a + b for a, b in itertools.pairwise(words)]
        self.prompt_words = {singular(w) for w in [*words, *pairs]}
        self.exclude = [k for k in (singular(title_key(e)) for e in exclude) if k]
        self.title = singular(title_key(title))
        self.items: list[tuple[int, int, str]] = []  # (where its line starts, ends; title)
        # lenient: only a repeat or the pipeline's own title is refused (the style rules
        # have been tried long enough)
        self.lenient = False
        self._scan = 0
        self.feed(text, final=True)  # the items already written (a round that goes on)

    def feed(self, text: str, final: bool = False) -> Refusal | None:
        """Check the lines of `text` finished since the last call (with `final`, the last
        line too); a refused item is not kept."""
        if self._scan > len(text):  # the text was cut back: the items it still holds stay
            self.items = [item for item in self.items if item[1] <= len(text)]
            self._scan = self.items[-1][1] + 1 if self.items else 0
        for start, end in finished_lines(text, self._scan, final):
            self._scan = end + 1
            title = line_item(text[start:end])
            if title is None:
                continue
            reason = self.judge(title)
            if reason is not None:
                self._scan = start
                return Refusal(start, title, reason)
            self.items.append((start, end, title))
            self.lenient = False  # leniency was for the item just accepted, not the rest
        return None

    def judge(self, title: str) -> str | None:
        """Why `title` may not follow the items so far; None when it may."""
        key = singular(title_key(title))
        if not key:
            return "an empty title"
        for e in self.exclude:
            if is_twin(key, e) or f" {e} " in f" {key} ":
                return "a title the pipeline writes itself"
        if self.title and is_twin(key, self.title):
            return "the document's own title"
        for _, _, earlier in self.items:
            if is_twin(key, singular(title_key(earlier))):
                return f"the same as {earlier!r}"
        if self.lenient:
            return None
        if len(title) >= TITLE_CHARS - 1 or _CUT.search(title):
            return "cut off (it ran to the length limit)"
        words = title_key(title).split()
        if VERBS.intersection(words):
            return "a sentence, not a title"
        if words[-1] in DANGLING:
            return f"it ends on {words[-1]!r}"
        lead = _lead(words)
        same = [e for _, _, e in self.items if lead and _lead(title_key(e).split()) == lead]
        if len(same) >= LEAD_SAME:
            return f"it opens like {same[0]!r} and {same[1]!r}"
        own = self._words(key)
        if not own:
            return "only the prompt's words"
        for _, _, earlier in self.items:
            theirs = self._words(singular(title_key(earlier)))
            shared = len(own & theirs)
            if theirs and shared >= SAME_WORDS * max(len(own), len(theirs)):
                return f"most of its words are in {earlier!r}"
            if min(len(own), len(theirs)) >= 2 and shared == min(len(own), len(theirs)):
                return f"it holds {earlier!r} or is held in it"
        return None

    def _words(self, key: str) -> set[str]:
        """The title's own words (not the prompt's), by stem: "history" and "historical"
        count as one."""
        words = [w for w in key.split() if w not in FUNCTION_WORDS and w not in self.prompt_words]
        return {w[:STEM] for w in words}
