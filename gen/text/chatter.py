"""Chatter: sentences about the writing instead of its subject. An assistant's talk ("Sure,
here is…", "I hope this helps!", "As an AI…"), sentences about the text itself (its word
count, what "the article will" do, what the writer is going to do), and sentences that say
the prompt's own instructions again. English and Chinese; what is in quotes (dialogue, a
title) is the story's, not chatter. Pure text, torch-free."""

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
# quotes (dialogue, a title quoted): what is in them is the story's; a straight quote opens
# after a space, a bracket or a dash (or at the start), else it closes
_QUOTE_PAIRS = {"“": "”", "「": "」", "『": "』", "«": "»"}
_QUOTE_CLOSES = frozenset(_QUOTE_PAIRS.values())
_STRAIGHT_OPENS_AFTER = frozenset(" \t\n([{—–-")

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
# the kinds of work a prompt asks for ("Write a travel guide to …": the text calls itself
# "the guide", "this travel guide"; "请写一份…指南": "这份指南"), with the words before one;
# a kind in a quoted title ('Write part 3, "The 2023 Report"') is another work
_KINDS = (
    r"article|essay|post|report|guide|guidebook|paper|story|speech|plan|proposal|review|"
    r"letter|memo|briefing|manual|handbook|overview|analysis|case study|summary|newsletter|"
    r"profile|recipe|tutorial|column|editorial|script|piece|document|primer|explainer|"
    r"brochure|leaflet|white paper|faq"
)
_ASKED_KIND = re.compile(
    r"\b(?:write|compose|draft|create|produce|prepare|generate|craft|give me)\b"
    r"((?:\s+[^\s.;:!?\"“”]+){0,6}?)\s+(" + _KINDS + r")s?\b",
    re.IGNORECASE,
)
_KINDS_ZH = (
    r"文章|报告|指南|论文|演讲稿|发言稿|讲稿|致辞|计划|方案|攻略|综述|教程|手册|作文|议论文|散文|"
    r"小说|故事|剧本|书评|影评|评论|随笔|稿"
)
_ASKED_KIND_ZH = re.compile(
    r"(?:写|撰写|起草|创作)[^，。；：！？\n“「《]{0,24}?(" + _KINDS_ZH + ")"
)
# words that may stand between "the" and what the text calls itself ("this short essay"),
# besides those before the kind in the prompt ("a 1,000-word travel guide"); and words there
# that are not one
_SELF_MODIFIERS = ("present", "current", "entire", "whole", "short", "brief", "detailed")
_NOT_MODIFIERS = frozenset(
    ("a", "an", "the", "me", "us", "my", "our", "one", "about", "of", "for", "on", "in", "to")
)
# a verb of the text describing itself ("this guide explores", "the article concludes
# that"), or one of having what a text has ("provides a detailed analysis", "includes a
# breakdown"); "the report by the ministry found" and "a report" are other works
_TELLS = (
    r"(?:(?:also|then|first|further|briefly|mainly|primarily|finally|will|shall|aims to|"
    r"seeks to|attempts to|tries to|is going to|sets out to)\s+)*"
    r"(?:highlights?|explores?|delves?|sheds? light|concludes?|focus(?:es)?|analy[sz]es?|"
    r"summari[sz]es?|outlines?|examines?|discusses?|looks? (?:at|into)|serves? (?:as|to)|"
    r"aims?|seeks?|is (?:designed|intended|meant) to|emphasi[sz]es?|underscores?|"
    r"investigates?|presents?|touches (?:on|upon)|walks? (?:you |readers )?through|dives? into|"
    r"takes? (?:a|an) (?:\w+ )?look|(?:provides?|offers?|gives?|includes?|contains?|has|"
    r"covers?|describes?|features?|lists?)\s+(?:(?:you|readers|the reader) (?:with )?)?"
    r"(?:(?:a|an|the|some|several|many|a few|\d+|two|three|four|five)\s+)?"
    r"(?:(?:detailed|comprehensive|brief|thorough|in-depth|clear|complete|step-by-step|short|"
    r"quick|concise|practical|useful|helpful|full|broad|general|valuable|key|closer|deeper|"
    r"critical|balanced|simple|overall|essential|main|important)(?:,|\s+and)?\s+)*"
    r"(?:analys[ie]s|overview|breakdown|summary|introduction|look|discussion|description|"
    r"explanation|insights?|information|tips|details|examples|sections|chapters|paragraphs|"
    r"guidance|advice|exploration|account|outline|background|context|perspectives?|"
    r"understanding|picture|glimpse|evaluation|assessment|examination))\b"
)
_TELLS_ZH = (
    r"(?:主要|首先|将|会|还|也|进一步|简要|重点|详细|系统地?|全面地?|最后|先|再|深入)*"
    r"(?:探讨|分析|介绍|讨论|阐述|概述|总结|聚焦|梳理|围绕|旨在|试图|力图|提供|揭示|剖析|论述|"
    r"回顾|考察|着眼|致力)"
)
# "this" in Chinese: "本报告" is this text whatever the prompt asks for ("本" inside a word
# or after a number, as in "日本", "这本书", is not "this"), "这份报告" where it asks for one
_THIS_ZH = r"(?:(?<!\w)|(?<=[在从对据于将由和与是为即如照按经]))本"
_THESE_ZH = r"(?:这篇|这份|此篇|此份)"


def _self_talk(prompt: str) -> re.Pattern[str]:
    """Sentences in which the text describes itself, called by what a text calls itself or
    by the kind of work the prompt asks for."""
    kinds, modifiers, kinds_zh = [_SELF], set(_SELF_MODIFIERS), {"文章"}
    for match in _ASKED_KIND.finditer(prompt):
        kinds.append(re.escape(match[2].lower()))
        words = match[1].lower().split()
        modifiers.update(w for w in words if w.isalpha() and w not in _NOT_MODIFIERS)
    kinds_zh.update(match[1] for match in _ASKED_KIND_ZH.finditer(prompt))
    modifier = "|".join(re.escape(m) for m in sorted(modifiers))
    kind, kind_zh = "|".join(kinds), "|".join(sorted(kinds_zh))
    itself = rf"(?:the|this|my|our)\s+(?:(?:{modifier})\s+){{0,3}}(?:{kind})"
    this_zh = rf"{_THIS_ZH}(?:文|篇|\w{{0,4}}?(?:{_KINDS_ZH}))"
    itself_zh = rf"(?:{this_zh}|{_THESE_ZH}\w{{0,4}}?(?:{kind_zh})|这篇)"
    return re.compile(
        rf"\b{itself},?\s+{_TELLS}|^in {itself},?\s+(?:you|we|i|readers?|the reader)\b"
        rf"|{itself_zh}{_TELLS_ZH}|在{itself_zh}(?:中|里)",
        re.IGNORECASE,
    )


# what the writer is going to do next: chatter in a text, but a speaker's own words in a
# speech ("I'd like to talk to you tonight about …", "接下来，我们来看……")
_INTENT = re.compile(
    r"\b(?:i am|i'm) going to (?:give|write|tell|help|provide|share|continue|start|begin)\b"
    r"|\blet me (?:help|write|continue|give|provide|start|begin|share|finish|walk you)\b"
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
    r"字数|约?\d+\s*字[）)]?$|(?:本文|这篇文章|这篇|本篇)(?:将|会|共|一共|有|包括|分为)"
    # ("文章" alone may be one in the world: "好文章有时要读好几遍。")
    r"|^文章(?:将|会|共|一共|包括|分为)"
    r"|我(?:将|会|来|要)(?:为你|为您|继续)?(?:写|撰写|续写|继续写|提供)"
    r"|(?:接下来|下面)(?:我|我们)?(?:将|会|来)?(?:继续写|续写|撰写)"
)

# an echo of the prompt: at least ECHO_GRAMS word 4-grams, ECHO_SHARE of them the prompt's
# requests' (its sentences or clauses that ask for something; the material it gives, such
# as figures and names to use, is the text's to copy), or its first ECHO_GRAMS where it
# opens asking for a text ("Please write a report on …, using these figures: …")
ECHO_N, ECHO_GRAMS, ECHO_SHARE = 4, 3, 0.6
_CLAUSE = re.compile(r"(?<=[.!?;:。！？；：，\n])")
# a line break inside a wrapped sentence (a template's or a YAML block's) is a space: after
# a letter or a comma, before a letter that opens no list item or heading
_WRAP = re.compile(r"(?<=[^\s.!?;:。！？；：])\n(?=[^\s\-*#>•\d])")
_REQUEST = re.compile(
    r"\b(?:write|compose|draft|create|make|produce|prepare|give|describe|explain|include|"
    r"use|quote|cover|discuss|list|outline|summari[sz]e|help|please|should|must|need|want|"
    r"words?|paragraphs?|essay|article|report|story|speech|plan|guide|about)\b"
    # ("使用" asks only for what follows: "使用以下数据", not "睡前使用手机")
    r"|请|写|要求|包含|必须|需要|使用(?:以下|下列|如下|这些)|围绕|\d+\s*字|字数|篇",
    re.IGNORECASE,
)
# what the prompt quotes (a title, a part's label, a line to use) is the text's to say
_GIVEN = re.compile(
    r"“([^”]+)”|「([^」]+)」|『([^』]+)』|《([^》]+)》|【([^】]+)】"
    r"|\"([^\"\n]+)\"|(?<!\w)'([^'\n]+)'(?!\w)"
)
# a subject's own request ("Please write a report on …, using these figures: …" as a topic):
# its clauses that ask for the text (politely, or ordering a kind of work or a length) are
# instructions, all but what they name after "on", "about" or "关于"; its other clauses
# (figures, names, a plan's items such as "Describe the data") are subject
_ASKING = re.compile(
    r"^\W*(?:please|kindly|can you|could you|would you|i want you to|i'd like you to|"
    r"help me)\b|^\W*(?:请|麻烦|帮我|要求)",
    re.IGNORECASE,
)
_ORDERING = re.compile(
    r"^\W*(?:(?:now|also|then|and)\s+)?(?:write|compose|draft|create|produce|prepare|generate|"
    r"craft|describe|explain|discuss|list|outline|summari[sz]e|give|make|use|include)\b"
    r"|^\W*(?:写|撰写)",
    re.IGNORECASE,
)
_WRITTEN = re.compile(
    r"\b(?:" + _KINDS + r"|words?|characters?|paragraphs?|sentences?)\b|\d+\s*字|篇|" + _KINDS_ZH,
    re.IGNORECASE,
)
_NAMED = re.compile(
    r"\b(?:on|about|regarding|concerning|titled|entitled|called|for)\b|关于|(?:主题|题目)[是为]",
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


def unquoted(sentence: str) -> str:
    """The sentence without what is in quotes: a quote opened before it runs to its first
    closing mark, one not closed in it to its end."""
    kept: list[str] = []
    closer: str | None = None
    for i, c in enumerate(sentence):
        if closer is not None:
            closer = None if c == closer else closer
        elif c == '"' and (i == 0 or sentence[i - 1] in _STRAIGHT_OPENS_AFTER):
            closer = c
        elif c in _QUOTE_PAIRS:
            closer = _QUOTE_PAIRS[c]
        elif c == '"' or c in _QUOTE_CLOSES:
            kept.clear()  # it closes a quote opened before the sentence
        else:
            kept.append(c)
    return "".join(kept).strip()


def _asks(clause: str) -> bool:
    """Whether the clause opens by asking for a text: politely, or ordering a kind of work
    or a length."""
    return bool(_ASKING.search(clause) or (_ORDERING.search(clause) and _WRITTEN.search(clause)))


def _subject(clause: str) -> str:
    """What a subject's clause names as the text's subject: all of it, or where it asks
    for the text, what it names after "on", "about", "关于" (up to its last "的")."""
    if not _asks(clause):
        return clause
    named = _NAMED.search(clause)
    if named is None:
        return ""
    rest = clause[named.end() :]
    return rest[: rest.rfind("的")] if named[0] == "关于" and "的" in rest else rest


class Chatter:
    """Tells chatter from a text's own sentences; `prompt`: the instructions the text was
    written to (their sentences said again are chatter too), `subjects`: what the prompt
    quotes as its subject (a topic, a title, a plan's items), which the text may say."""

    def __init__(self, prompt: str = "", subjects: Iterable[str] = ()) -> None:
        given = [g for match in _GIVEN.finditer(prompt) for g in match.groups() if g]
        clauses = [_subject(c) for s in [*subjects, *given] for c in _CLAUSE.split(s)]
        quoted = {g for c in clauses for g in ngrams(tokens(c), ECHO_N)}
        requests = [c for c in _CLAUSE.split(_WRAP.sub(" ", prompt)) if _REQUEST.search(c)]
        asked = {g for c in requests for g in ngrams(tokens(c), ECHO_N)}
        self._prompt = frozenset(asked - quoted)
        self._spoken = bool(_SPOKEN.search(prompt))
        self._itself = _self_talk(prompt)

    def rule(self, sentence: str) -> Rule | None:
        """Which kind of chatter the sentence is, or None for a sentence of the text's own."""
        said = bare(sentence)
        if _SPEAKER.match(said):
            return None
        said = unquoted(said)
        if not any(c.isalnum() for c in said):
            return None
        if _ASSISTANT.search(said) or _ASSISTANT_ZH.search(said):
            return "assistant"
        if _WRITING.search(said) or _WRITING_ZH.search(said) or self._itself.search(said):
            return "writing"
        if not self._spoken and _INTENT.search(said):
            return "writing"
        if self._prompt:
            grams = ngrams(tokens(said), ECHO_N)
            again = [g in self._prompt for g in grams]
            # the prompt's requests make up most of it, or it opens asking with them
            opens = _asks(said) and all(again[:ECHO_GRAMS])
            if len(grams) >= ECHO_GRAMS and (sum(again) >= ECHO_SHARE * len(grams) or opens):
                return "instructions"
        return None
