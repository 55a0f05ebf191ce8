"""Chatter: sentences about the writing instead of its subject. An assistant's talk ("Sure,
here is…", "I hope this helps!", "As an AI…"), sentences about the text itself (its word
count, what "the article will" do, what the writer is going to do), and sentences that say
the prompt's own instructions again. English and Chinese; dialogue in quotes is story, not
chatter. Pure text, torch-free."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Literal

from gen.text.quality import ngrams, tokens

Rule = Literal["assistant", "writing", "instructions"]

# a text's sentences and lines: a sentence end with its closers (a colon that ends a line
# too: "Here is the plan:"), a CJK one, or a line break
_UNIT_END = re.compile(
    r"(?<!\d)[.!?…:：][\"'”’)\]」』》）*_]*(?=[ \t]*\n)|(?<!\d)[.!?…][\"'”’)\]」』》）*_]*(?=\s)"
    r"|[。！？；][”’」』》）*_]*|\n"
)
# markers and emphasis around a sentence ("1. ", "- ", "## ", "**"; "1000 words" keeps its
# number)
_MARKUP = re.compile(r"^[\s>#*_`~\-+•]*(?:\d+[.)]\s+)?|[*_`~]+")
# a quote opened in a sentence: dialogue, or a title quoted; what is in it is the story's
_QUOTES = re.compile(r"[\"“”«»「」『』]")

_WORK = (
    r"(?:article|essay|post|blog post|piece|text|section|paragraph|story|response|answer|"
    r"report|guide|plan|draft|version|outline|list|summary|content|passage|write-up|poem|"
    r"introduction|conclusion)s?"
)
# what a text calls itself ("the report has three findings" is a report's own sentence)
_SELF = r"(?:article|essay|blog post|post|response|answer|write-up)"
# what an assistant says around its answer, not in it
_ASSISTANT = re.compile(
    r"^(?:sure|certainly|absolutely|of course|okay|ok|alright|great|no problem|"
    r"great question|good question)[\s!.,:]*$"
    r"|^(?:sure|certainly|absolutely|of course|okay|ok|alright|great)[!.,]?\s+"
    r"(?:here|i|i'm|i'll|i'd|let|below|this is|that's)\b"
    r"|^(?:here(?:'s| is| are)|below (?:is|are)|the following (?:is|are))\b.*\b" + _WORK + r"\b"
    r"|\b(?:i hope (?:this|that|it|you)|hope (?:this|that|it) helps|let me know if|"
    r"feel free to (?:ask|reach|let)|if you (?:have|need) any (?:other |more |further )?"
    r"(?:questions|help|changes)|happy to help|glad to help|(?:i'd|i would|i'm|i am) "
    r"(?:be )?(?:happy|glad) to|as an ai\b|as a language model|as an assistant|"
    r"i'm an ai|i am an ai|is there anything else|(?:i'm|i am) here to help)",
    re.IGNORECASE,
)
# sentences about the text itself: its length, what it will do, the writer's next step
_WRITING = re.compile(
    r"\b(?:(?:this|the|my|our) " + _SELF + r"|(?:my|our) " + _WORK + r")"
    r" (?:also )?(?:will|should|must|is going to|has|contains|consists of|includes|"
    r"is written|needs to|aims to|is divided|is structured|is organi[sz]ed|is about|ends|"
    r"begins|continues)\b"
    r"|\b(?:part|parts|rest|end|beginning|section|sections) of (?:the|this|my) " + _SELF + r"\b"
    r"|^(?:the )?" + _SELF + r" (?:ends|begins|continues)\b"
    r"|\bin (?:this|the) " + _SELF + r"\b"
    r"|\b(?:each|every) (?:paragraph|section|sentence)\b"
    r"|\bparagraphs? (?:contains?|has|have|will|should|must)\b"
    r"|\bword count\b|\b\d[\d,]*[- ]words?\b|\bwords? (?:long|in length)\b"
    r"|\bin this " + _SELF + r",? (?:i|we) (?:have|will|'ll|'ve|am going to|are going to)\b"
    r"|\bin (?:my|the|this) (?:next|following|last|previous) (?:paragraph|section|part)\b"
    r"|\b(?:the )?rest of (?:the|this|my) " + _WORK + r"\b"
    r"|\b(?:the )?next (?:part|section|paragraph|chapter) (?:will|is going to)\b",
    re.IGNORECASE,
)
# what the writer is going to do next: chatter in a text, but a speaker's own words in a
# speech ("I'd like to talk to you tonight about …", "接下来，我们来看……")
_INTENT = re.compile(
    r"\b(?:i am|i'm) going to (?:give|write|tell|help|provide|share|continue|start|begin)\b"
    r"|\blet me (?:help|write|continue|give|provide|start|begin|share|finish)\b"
    r"|\b(?:i'd|i would) like to (?:delve|discuss|write|explore|share|explain|talk)\b"
    r"|\b(?:i will|i'll|i shall) (?:now )?(?:write|continue|provide|give|help|start|begin|"
    r"share|finish|expand)\b",
    re.IGNORECASE,
)
# a prompt that asks for words to be spoken
_SPOKEN = re.compile(
    r"\b(?:speech|talk|address|toast|presentation|sermon|lecture|eulogy|script|remarks)\b"
    r"|演讲|致辞|讲话|发言|主持|台词|脚本|串词",
    re.IGNORECASE,
)
_ASSISTANT_ZH = re.compile(
    r"^(?:好的|当然|没问题|当然可以|可以|好)[！!，,。.：:]*$"
    # ("当然，" alone opens an essay's own concession: "当然，坚持不等于蛮干。")
    r"|^(?:好的|没问题|当然可以)[！!，,。.]|^当然[！!。.]|^当然[，,](?:以下|下面|这是|我|可以|没问题)"
    r"|^(?:以下是|下面是|这是|这里是|如下是).*(?:文章|短文|故事|计划|内容|回答|报告|大纲|范文|"
    r"段落|作文|介绍|说明)"
    r"|希望(?:这篇|这些|这个|以上|本文|我的|对你|对您|能|你|您).{0,12}(?:帮助|有用|喜欢|满意)"
    r"|如果(?:你|您)(?:还)?(?:有|需要)(?:任何|其他|更多)?(?:问题|需要|帮助|修改)"
    r"|作为(?:一个|一名)?(?:AI|人工智能|语言模型|AI助手|助手)"
)
_WRITING_ZH = re.compile(
    r"字数|约?\d+\s*字[）)]?$|(?:本文|这篇文章|这篇|本篇|文章)(?:将|会|共|一共|有|包括|分为)"
    r"|我(?:将|会|来|要)(?:为你|为您|继续)?(?:写|撰写|续写|继续写|提供)"
    r"|(?:接下来|下面)(?:我|我们)?(?:将|会|来)?(?:继续写|续写|撰写)"
)

# an echo of the prompt: at least ECHO_GRAMS word 4-grams, ECHO_SHARE of them the prompt's
# requests' (its sentences or clauses that ask for something; the material it gives, such
# as figures and names to use, is the text's to copy)
ECHO_N, ECHO_GRAMS, ECHO_SHARE = 4, 3, 0.6
_CLAUSE = re.compile(r"(?<=[.!?;:。！？；：，\n])")
_REQUEST = re.compile(
    r"\b(?:write|compose|draft|create|make|produce|prepare|give|describe|explain|include|"
    r"use|quote|cover|discuss|list|outline|summari[sz]e|help|please|should|must|need|want|"
    r"words?|paragraphs?|essay|article|report|story|speech|plan|guide|about)\b"
    r"|请|写|要求|包含|必须|需要|使用|围绕|\d+\s*字|字数|篇",
    re.IGNORECASE,
)
# a speaker's label opens a line of dialogue ("ALEX: I'll finish first.", "甲：我来吧。")
_SPEAKER = re.compile(r"^(?:[A-Z][A-Z .'-]{1,24}|[A-Z][a-z]{1,15}|[\u4e00-\u9fff]{1,3})[:：]\s*\S")


def units(text: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """The (start, end) of each complete sentence or line in text[start:]; a last one that
    has not ended yet is not given."""
    begin = start
    for match in _UNIT_END.finditer(text, start):
        end = match.end()
        if text[begin:end].strip():
            yield begin, end
        begin = end


def bare(sentence: str) -> str:
    """The sentence without list or heading markers, emphasis and space around it."""
    return _MARKUP.sub("", sentence.strip()).strip()


class Chatter:
    """Tells chatter from a text's own sentences; `prompt`: the instructions the text was
    written to (their sentences said again are chatter too), `subjects`: what the prompt
    quotes as its subject (a topic, a title, a plan's items), which the text may say."""

    def __init__(self, prompt: str = "", subjects: Iterable[str] = ()) -> None:
        quoted = {g for s in subjects for g in ngrams(tokens(s), ECHO_N)}
        requests = [c for c in _CLAUSE.split(prompt) if _REQUEST.search(c)]
        asked = {g for c in requests for g in ngrams(tokens(c), ECHO_N)}
        self._prompt = frozenset(asked - quoted)
        self._spoken = bool(_SPOKEN.search(prompt))

    def rule(self, sentence: str) -> Rule | None:
        """Which kind of chatter the sentence is, or None for a sentence of the text's own."""
        said = bare(sentence)
        if not any(c.isalnum() for c in said) or _QUOTES.search(said) or _SPEAKER.match(said):
            return None
        if _ASSISTANT.search(said) or _ASSISTANT_ZH.search(said):
            return "assistant"
        if _WRITING.search(said) or _WRITING_ZH.search(said):
            return "writing"
        if not self._spoken and _INTENT.search(said):
            return "writing"
        if self._prompt:
            grams = ngrams(tokens(said), ECHO_N)
            said_again = sum(g in self._prompt for g in grams)
            if len(grams) >= ECHO_GRAMS and said_again >= ECHO_SHARE * len(grams):
                return "instructions"
        return None
