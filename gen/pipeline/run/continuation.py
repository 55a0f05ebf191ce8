"""Helpers for continuation rounds and length targets: seams between rounds of the `chat`
strategy, and where a section that is long enough may stop."""

from __future__ import annotations

import re

from gen.pipeline.words import count_words, prefix_with_words

CONTINUE_PROMPT = (
    "Continue exactly where you left off. Do not repeat anything you already wrote "
    "and do not start over; write only the continuation."
)
MORE_PROMPT = (
    "Continue the text above with more detail, picking up right after its last sentence. "
    "Do not repeat anything already written."
)
MIN_OVERLAP_BYTES = 6  # shorter repeats ("the ", one CJK character) are too likely by chance

_SENTENCE_END = re.compile(r"[.!?。！？…](?:[\"'”’)\]]*)(?=\s|$)|\n")


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
    """When a section has written enough: target_words reached at a paragraph boundary,
    or max_words reached (cut after the last full sentence)."""

    def __init__(self, target: int | None, min_words: int | None, max_words: int | None) -> None:
        self.target = target
        self.min_words = min_words if min_words is not None else target
        self.max_words = max_words

    def short(self, text: str) -> bool:
        return self.min_words is not None and count_words(text) < self.min_words

    def cut(self, before: str, delta: str) -> str | None:
        """If the text before + delta should end inside `delta`, the full text to keep."""
        text = before + delta
        if self.max_words is not None and count_words(text) > self.max_words:
            kept = self._last_sentence(text)
            # text already streamed cannot be taken back: never cut into `before`
            return kept if len(kept) >= len(before) else prefix_with_words(text, self.max_words)
        if self.target is None:
            return None
        start = max(0, len(before) - 1)  # a "\n\n" may straddle the seam
        idx = text.find("\n\n", start)
        while idx != -1:
            if count_words(text[:idx]) >= self.target:
                return text[:idx]
            idx = text.find("\n\n", idx + 2)
        return None

    def _last_sentence(self, text: str) -> str:
        """Text cut before it passes max_words, after the last sentence end (if any)."""
        head = prefix_with_words(text, self.max_words or 0)
        ends = [m.end() for m in _SENTENCE_END.finditer(head)]
        return head[: ends[-1]].rstrip() if ends else head.rstrip()
