"""Word counts and LongWriter's length score; each CJK character counts as one word."""

from __future__ import annotations

import re
import unicodedata

# the characters counted as a word each (kana and CJK ideographs; Hangul is spaced)
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
_TOKEN = re.compile(rf"[{CJK}]|[^\s{CJK}]+")
CJK_CHAR = re.compile(rf"[{CJK}]")


def count_words(text: str) -> int:
    """Whitespace-separated words with a letter or digit, plus one per CJK character."""
    count = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if CJK_CHAR.fullmatch(token) or any(ch.isalnum() for ch in token):
            count += 1
    return count


def length_score(target: int, produced: int) -> float:
    """LongWriter's S_l in [0, 100]: 100 on target, falling off faster when too short."""
    if target <= 0:
        raise ValueError(f"target must be > 0, got {target}")
    if produced <= 0:
        return 0.0
    if produced > target:
        return 100 * max(0.0, 1 - (produced / target - 1) / 3)
    return 100 * max(0.0, 1 - (target / produced - 1) / 2)


def slugify(text: str) -> str:
    """Lower-case words joined by '-'; letters outside ASCII (CJK included) are kept."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    return re.sub(r"[^\w]+|_+", "-", text).strip("-")


def prefix_with_words(text: str, n: int) -> str:
    """The longest prefix of text that holds at most n words (cut before word n + 1)."""
    count = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if CJK_CHAR.fullmatch(token) or any(ch.isalnum() for ch in token):
            count += 1
            if count > n:
                return text[: match.start()]
    return text


def last_words(text: str, n: int) -> str:
    """The end of text holding at most n words, from a sentence start where one is near."""
    starts = [m.start() for m in _TOKEN.finditer(text) if _is_word(m.group())]
    if len(starts) <= n:
        return text.strip()
    tail = text[starts[-n] :]
    sentence = re.search(r"(?<=[.!?。！？])\s+|\n", tail)
    if sentence is not None and sentence.end() < len(tail) // 2:
        tail = tail[sentence.end() :]
    return tail.strip()


def _is_word(token: str) -> bool:
    return bool(CJK_CHAR.fullmatch(token)) or any(ch.isalnum() for ch in token)
