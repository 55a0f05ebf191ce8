"""A document's title from its topic. A topic may be a whole request ("Please write a
1200-word research report on the discrimination against Asian Americans in admissions,
using these figures: …", "请写一篇关于比亚迪新能源汽车的研究报告，字数约2000字。"): its title is
the subject the request names, its first clause, whole words only. Pure text, torch-free."""

from __future__ import annotations

import re

from gen.text.function_words import FUNCTION_WORDS
from gen.text.words import CJK_CHAR, count_words, prefix_with_words

# a topic this short (in words; a CJK character is one) is its own title
TITLE_WORDS = 12
TITLE_CJK = 24
# a request's opening, up to the word that names its subject ("... report on", "关于")
_OPENER = (
    r"^(?:please\s+|can you\s+|could you\s+|i need you to\s+)?"
    r"(?:write|compose|draft|create|produce|prepare|generate|give me|make)\b"
)
# a request's opening, up to the word that names its subject ("... report on"), or without
# one up to its kind of work ("Write a travel guide to Hong Kong")
_REQUEST = re.compile(
    _OPENER + r"(?:.*?\b(?:about|on|regarding|concerning|discussing|exploring|covering)\s+"
    r"(?!\d)|\s+(?:me\s+)?(?:an?|the|some)?\s*(?:\d[\d,]*[- ](?:word|character|page)\s+)?)",
    re.IGNORECASE,
)
_REQUEST_ZH = re.compile(
    r"^(?:请你|请|帮我|麻烦)?(?:帮我)?(?:写|撰写|创作|起草|生成|编写)(?:一下)?"
    r"(?:一篇|一份|一个|一首|一封|篇|份)?(?:约?\d+字(?:左右)?的?)?(?:关于|有关|以)?"
)
# where the subject ends: a clause or sentence break
_CLAUSE = re.compile(r"[,;:.!?()\[\]\n，；：。！？（）]")
# what a topic says after its subject about the writing: a length
_LENGTH = re.compile(
    r"\d[\d,]*\s*(?:words?|characters?|pages?|字)|\b(?:approximately|around|about)\s+\d",
    re.IGNORECASE,
)
_FRAMES = ("the ", "a ", "an ")
# where a long subject's own name ends: a clause that says more about it
_MORE = re.compile(r"\s(?:that|which|who|using|including|so that|with the following)\s")
# a title the request quotes ("以“我的母亲”为题", "titled 'The Keeper'")
_TITLED = re.compile(
    r"以[“\"「『]([^”\"」』]{1,40})[”\"」』]为题|\btitled\s+[\"“']([^\"”']{1,80})[\"”']"
)


def headline(topic: str) -> str:
    """The topic when it is a short title; else the subject its request names, up to its
    first clause break, cut to whole words (TITLE_WORDS, TITLE_CJK characters), nothing
    dangling at its end."""
    text = " ".join(str(topic).split())
    titled = _TITLED.search(text)
    if titled:
        return titled.group(1) or titled.group(2)
    cjk = bool(CJK_CHAR.search(text))
    request = (_REQUEST_ZH if cjk else _REQUEST).match(text)
    if not request and _short(text, cjk) and not _LENGTH.search(text):
        return text
    subject = text[request.end() :] if request else text
    subject = _CLAUSE.split(subject, maxsplit=1)[0].strip() or text
    if not cjk:
        for frame in _FRAMES:
            if subject.lower().startswith(frame):
                subject = subject[len(frame) :]
                break
    subject = _MORE.split(subject, maxsplit=1)[0]
    if not _short(subject, cjk):
        subject = prefix_with_words(subject, TITLE_CJK if cjk else TITLE_WORDS).strip()
        words = subject.split()
        while len(words) > 1 and words[-1].lower().strip(",'’") in FUNCTION_WORDS:
            words.pop()
        subject = " ".join(words)
    return subject[:1].upper() + subject[1:]


def _short(text: str, cjk: bool) -> bool:
    return count_words(text) <= (TITLE_CJK if cjk else TITLE_WORDS)
