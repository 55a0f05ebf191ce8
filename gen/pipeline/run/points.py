"""A long section written from a plan of points (LongWriter's AgentWrite, inside one
section). A model asked for more words than it writes in one answer concludes early, and
pushed on it concludes again ("In conclusion" six times); asked point by point, each point
with its share of the target, it writes new material until the plan is done.

A section is planned (`plan: auto`, the default) when it is prose with a target whose
tokens are more than ANSWER_TOKENS: first a short request for the points (kept out of the
text; the manifest's `plan`), then the points in turn, each a new answer to a request that
carries the plan, the end of the text so far and the point to write now, added to the text
after a paragraph break. A point ends at
a paragraph break past its share, or where the model ends it; the words it leaves short go
to the points after it. Pure text and arithmetic; the section runner sends the requests."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gen.pipeline.run.continuation import LengthPolicy
from gen.text.listparse import line_item, parse_list
from gen.text.words import count_words, last_words

# what an instruct model writes in one answer before it concludes, in tokens: the writer
# model (Qwen2.5-0.5B-Instruct) ends a 1,200-word report at about 800 words (1,000 tokens)
ANSWER_TOKENS = 900
POINT_TOKENS = 400  # a point's share, about: a few paragraphs
MIN_POINTS, MAX_POINTS = 3, 10
PLAN_TOKENS = 48  # the plan request's max_tokens, per point asked for
POINT_WORDS = 40  # a point longer than this (a CJK character a word) is a paragraph
TAIL_WORDS = 120  # what a point's request quotes of the text so far, from a sentence start
# a point may run past its share by this part of it (to a paragraph break) before it is cut
POINT_OVER = 0.5
# a point that ends with less than this part of its share written is asked for once more
THIN = 0.25

# what a point's request says, in the text's language: the request the whole text answers,
# the plan, the end of the text so far, the point to write (or the last), what never to write
NOTES: dict[str, dict[str, str]] = {
    "en": {
        "part": 'You write one part of a text written for this request:\n"""\n{ask}\n"""\n\n',
        "plan": "The text's plan:\n{listed}\n\n",
        "goes_on": 'The text so far ends:\n"""\n{tail}\n"""\n\n',
        "point": (
            'Now write point {n}, "{point}", in about {share} words, going on from there: '
            "new material for this point only, without repeating what is written, summing "
            "up or concluding."
        ),
        "last": (
            'Now write the last point, "{point}", in about {share} words, going on from '
            "there, and end the text with it."
        ),
        "never": (
            " Use the figures, names and quotes the request gives exactly, where they "
            "belong. Write only this part's text: no title or heading, no introduction, no "
            "point number, no word count, and do not start the text over."
        ),
    },
    "zh": {
        "part": '你在写一篇长文中的一部分。这篇长文是按这个要求写的：\n"""\n{ask}\n"""\n\n',
        "plan": "全文的提纲：\n{listed}\n\n",
        "goes_on": '已经写好的部分结尾是：\n"""\n{tail}\n"""\n\n',
        "point": (
            "现在接着往下写第{n}点“{point}”，约{share}字：只写这一点的新内容，"
            "不要重复前面写过的，不要总结，也不要结尾。"
        ),
        "last": "现在接着往下写最后一个要点（第{n}点）“{point}”，约{share}字，并用它结束全文。",
        "never": (
            "要求里给出的数字、名字和引语要原样使用。只写这一部分的正文：不要标题，不要引言，"
            "不要要点编号，不要字数，也不要从头再写一遍。"
        ),
    },
}


def wants_plan(setting: bool | str, tokens: int | None, prose: bool) -> bool:
    """Is a section with this `plan:` setting and target (in tokens; None: no target)
    written from a plan? `prose`: its output is free text (not a list, JSON or shape)."""
    if setting is False or not prose or tokens is None:
        return False
    return setting is True or tokens > ANSWER_TOKENS


def point_count(tokens: int) -> int:
    return max(MIN_POINTS, min(MAX_POINTS, round(tokens / POINT_TOKENS)))


def plan_request(prompt: str, points: int, chinese: bool) -> str:
    """The user message that asks for the plan: the section's own prompt, then the ask (in
    Chinese where the text is to be)."""
    if chinese:
        ask = (
            f"先不要写正文。请为上面的写作任务列一个提纲：按顺序列出{points}个要点，写成编号列表，"
            "每个要点一行，写明这一部分讲什么、用到要求里的哪些数字、名字或引语；"
            "最后一个要点是全文的结尾。只写这个列表。"
        )
    else:
        ask = (
            f"Do not write the text yet. First plan it: list the {points} points it will "
            "make, in order, as a numbered list, each one short line that names what that "
            "part says and the figures, names or quotes from the request it uses; the last "
            "point is how it ends. Write only the list."
        )
    return f"{prompt}\n\n{ask}"


def parse_points(text: str, points: int) -> list[str]:
    """The plan's points (at most `points`): the items of its list, each a short line. A
    reply without a list, or with fewer than two points or a paragraph for one (a model
    that wrote the text instead of its plan), is no plan."""
    if not any(line_item(line) for line in text.splitlines()):
        return []
    found = [p.strip() for p in parse_list(text) if any(c.isalnum() for c in p)][:points]
    if len(found) < 2 or any(count_words(p) > POINT_WORDS for p in found):
        return []
    return found


@dataclass(slots=True)
class Plan:
    """The points of a planned section and where its writing stands: `current` is the
    point being written (0-based), `starts` the word count each point began at."""

    points: list[str]
    target: int  # the section's target words
    most: int | None  # its max_words
    chinese: bool
    current: int = 0
    starts: list[int] = field(default_factory=list)
    prompt_tokens: int = 0  # the plan request's
    completion_tokens: int = 0

    @property
    def last(self) -> bool:
        return self.current >= len(self.points) - 1

    def share(self, words: int) -> int:
        """The current point's words: what the target still wants, over the points left."""
        left = len(self.points) - self.current
        return max(1, math.ceil((self.target - words) / left))

    def begin(self, words: int) -> LengthPolicy:
        """The current point begins with `words` written: the policy that ends it, at a
        paragraph break past its share (the last point: the section's own target)."""
        self.starts.append(words)
        if self.last:
            return LengthPolicy(self.target, 0, self.most)
        share = self.share(words)
        end = words + share
        most = end + math.ceil(share * POINT_OVER)
        if self.most is not None:
            most = min(most, self.most)
        return LengthPolicy(end, 0, most)

    def thin(self, text: str) -> bool:
        """Has the current point written less than THIN of its share so far?"""
        start = self.starts[-1] if self.starts else 0
        share = self.target - start if self.last else self.share(start)
        return count_words(text) - start < THIN * share

    def advance(self) -> bool:
        """On to the next point; False when the plan is done."""
        if self.last:
            return False
        self.current += 1
        return True

    def request(self, prompt: str, text: str) -> str:
        """The user message for the current point: the section's prompt as the request the
        whole text answers, the plan, the end of the text so far (a point is a new answer,
        added to the text after it), and the point to write with its words."""
        said = NOTES["zh" if self.chinese else "en"]
        doing = said["last"] if self.last else said["point"]
        listed = "\n".join(f"{i}. {p}" for i, p in enumerate(self.points, 1))
        share = self.share(count_words(text))
        tail = last_words(text, TAIL_WORDS)
        return (
            said["part"].format(ask=prompt)
            + said["plan"].format(listed=listed)
            + (said["goes_on"].format(tail=tail) if tail else "")
            + doing.format(n=self.current + 1, point=self.points[self.current], share=share)
            + said["never"]
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "points": list(self.points),
            "written": len(self.starts),
            "starts": list(self.starts),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
