"""Helpers for continuation rounds and length targets: seams between rounds of the `chat`
strategy, and where a section that is long enough may stop."""

from __future__ import annotations

import math
import re
from typing import Literal

from gen.text.words import count_words, prefix_with_words

# what a round sends: the first prompt, the same sequence decoding on (kv), the prompt with
# the partial answer as an open assistant message (prefix), or a turn asking to go on
RoundMode = Literal["initial", "kv", "prefix", "chat", "more"]

CONTINUE_PROMPT = (
    "Continue exactly where you left off. Do not repeat anything you already wrote "
    "and do not start over; write only the continuation."
)
MORE_PROMPT = (
    "Continue the text above with more detail, picking up right after its last sentence. "
    "Do not repeat anything already written."
)
MIN_OVERLAP_BYTES = 6  # shorter repeats ("the ", one CJK character) are too likely by chance

# a sentence ends at its stop, or at a line end before a list item, heading, quote or table
# row; a line break inside wrapped prose ends nothing
_SENTENCE_END = re.compile(
    r"[.!?。！？…](?:[\"'”’)\]]*)(?=\s|$)|[。！？]|\n(?=[ \t]*(?:[-*+•#>|]|\d{1,3}[.)][ \t]))"
)
_PARAGRAPH = re.compile(r"\n\s*\n")


def remove_overlap(old: str, new: str) -> str:
    """`new` without the part that repeats the end of `old` (a model that restarts a
    sentence, or the whole text, when asked to continue)."""
    if not old or not new:
        return new
    candidates = [new]
    stripped = new.lstrip()
    if stripped != new:
        candidates.append(stripped)
    for cand in candidates:
        for k in range(min(len(old), len(cand)), 0, -1):
            if len(cand[:k].encode("utf-8")) < MIN_OVERLAP_BYTES:
                break
            if old.endswith(cand[:k]):
                return cand[k:]
    return new


class LengthPolicy:
    """Where a section with a length target ends. Short of `min_words` (default: the
    target) it gets more rounds; past the target it ends at the next paragraph break;
    past `SOON` x target at the next sentence end; and it never passes the ceiling
    (`max_words`, default `CEILING` x target): there it is cut after its last full
    sentence."""

    SOON = 1.1
    CEILING = 1.3  # S_l stays >= 90 up to here

    def __init__(self, target: int | None, min_words: int | None, max_words: int | None) -> None:
        self.target = target
        self.min_words = min_words if min_words is not None else target
        if max_words is None and target is not None:
            max_words = math.ceil(target * self.CEILING)
        self.max_words = max_words
        # (offset at a word boundary, words before it, the characters just before it)
        self._counted: tuple[int, int, str] = (0, 0, "")

    def short(self, text: str) -> bool:
        return self.min_words is not None and self.words(text) < self.min_words

    def words(self, text: str) -> int:
        """count_words(text), counting only what is new since the last call: `text` is
        expected to extend (or cut back) the text of the call before."""
        offset, count, seen = self._counted
        if offset > len(text) or text[max(0, offset - 16) : offset] != seen:
            offset, count = 0, 0
        cut = max(text.rfind(" ", offset), text.rfind("\n", offset))
        if cut <= offset:
            return count + count_words(text[offset:])
        count += count_words(text[offset:cut])
        self._counted = (cut, count, text[max(0, cut - 16) : cut])
        return count + count_words(text[cut:])

    def end(self, text: str, start: int) -> int | None:
        """Where `text` should end, never before `start` (what is already final); None
        while it should go on."""
        if self.max_words is None and self.target is None:
            return None
        words = self.words(text)
        ceiling = self.max_words
        if self.target is not None and words >= self.target:
            lo = max(0, start - 1)  # a "\n\n" may straddle the seam
            soon = self.target * self.SOON

            def fits(i: int, least: float) -> bool:  # i is at a word boundary near the end
                n = words - count_words(text[i:])
                return least <= n and (ceiling is None or n <= ceiling)

            for match in _PARAGRAPH.finditer(text, lo):
                if fits(match.start(), self.target):
                    return max(start, match.start())
            if words >= soon:
                for match in _SENTENCE_END.finditer(text, lo):
                    if match.end() >= start and fits(match.end(), soon):
                        return max(start, len(text[: match.end()].rstrip()))
        if ceiling is not None and words > ceiling:
            head = prefix_with_words(text, ceiling)
            ends = [m.end() for m in _SENTENCE_END.finditer(head, start)]
            return max(start, len(head[: ends[-1]].rstrip()) if ends else len(head.rstrip()))
        return None
