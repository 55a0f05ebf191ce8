"""The terms BM25 matches on: lower-case words of scripts that space their words (a plural's
`s` taken off, function words left out) and numbers kept whole (`1,200`, `3.2`); in CJK text,
each character and each pair of neighbours, since nothing marks where a word ends."""

from __future__ import annotations

import re
import unicodedata

from gen.text.function_words import CJK_FUNCTION, FUNCTION_WORDS
from gen.text.words import CJK

STOPWORDS = FUNCTION_WORDS | {
    "what", "which", "who", "whom", "how", "why", "where", "not", "no", "do", "does", "did",
    "has", "have", "had", "been", "being", "will", "would", "can", "could", "should", "may",
    "about", "into", "over", "than", "each", "all", "any", "more", "most", "such", "only",
    "other", "some", "s", "t",
}  # fmt: skip
_TERM = re.compile(rf"[{CJK}]+|\d+(?:[.,:/-]\d+)*|[^\W\d_]+")
_CJK_RUN = re.compile(rf"[{CJK}]+")


def terms(text: str) -> list[str]:
    out: list[str] = []
    for match in _TERM.finditer(unicodedata.normalize("NFKC", text).casefold()):
        term = match.group()
        if _CJK_RUN.fullmatch(term):
            out += [ch for ch in term if ch not in CJK_FUNCTION]
            out += [term[i : i + 2] for i in range(len(term) - 1)]
        elif term not in STOPWORDS:
            out.append(_singular(term))
    return out


def _singular(word: str) -> str:
    """`fares` -> `fare`, `deliveries` -> `delivery`; `bus`, `class`, `analysis` kept."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word
