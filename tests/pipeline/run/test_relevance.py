"""The drift check in the section runner: each paragraph, once complete, is scored against
the section's prompt and a neutral one; one far off topic is cut where it began and
retried like a loop, and the section records its relevance. A scripted backend whose
scorer knows the topic's words; the deltas always add up to the section's text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gen.backends.base import Message
from gen.pipeline.run.relevance import MIN_WORDS, NEUTRAL, paragraphs
from tests.pipeline.fake_backend import FakeBackend, Reply

from .test_reader import cuts, run_on

PROMPT_EN = "Write an essay about lighthouses and their keepers."
PROMPT_ZH = "请写一篇关于中国茶文化的文章。"
TOPIC = ("lighthouse", "keeper", "lamp", "lens", "茶")
ON_EN = (
    "The lighthouse keeper rose before dawn to put out the lamp and draw the curtains "
    "across the lens, so that the sun would not crack the glass or scorch the brass."
)
ON_EN_2 = (
    "Then came the log book of the lighthouse: the wind, the weather and the ships that "
    "had passed in the night, written in the keeper's careful hand by the lamp."
)
QUIZ = (
    "Which of the following islands are volcanic? A) are located in Hawaii B) are found "
    "in the Arctic C) were formed by glaciers D) none of the above. Answer: A."
)
ON_ZH = "茶起源于中国，已有数千年的历史。人们最早把茶叶当作药材使用，后来才逐渐成为日常饮品。"
ON_ZH_2 = (
    "泡功夫茶先要温壶烫杯，再放入乌龙茶叶。第一泡的茶汤用来洗茶，随即倒掉，第二泡起才细细品尝。"
)
STOCKS_ZH = (
    "今天股市大幅下跌，科技股领跌，投资者担心利率继续上升。美元对欧元和日元走强，黄金价格小幅回落。"
)


BEFORE: list[str] = []  # the paragraphs the scorer was given as coming before


def topic_scorer(contexts: list[list[Message]], text: str) -> list[list[float]]:
    """A text naming a topic word gains 0.3 a token from the topical context (the first),
    any other loses 0.3; the neutral context must be the neutral prompt."""
    topical, neutral = contexts
    assert neutral[-1]["content"] in NEUTRAL.values()
    assert topical[-1]["content"] != neutral[-1]["content"]
    if topical[-1]["role"] == "assistant":  # the paragraph before, on the topical side
        assert topical[-1]["content"].endswith("\n\n") and topical[-2]["role"] == "user"
        BEFORE.append(topical[-1]["content"])
    n = max(len(text.split()), 1)
    gain = 0.3 if any(word in text.lower() for word in TOPIC) else -0.3
    return [[-2.0 + gain] * n, [-2.0] * n]


def drift_run(
    tmp_path: Path, prompt: str, replies: list[Reply], strategy: str = "kv"
) -> tuple[dict[str, Any], str, FakeBackend]:
    backend = FakeBackend({"s": replies}, chunk=3, scorer=topic_scorer)
    sec, text, _ = run_on(tmp_path, prompt, backend, strategy)
    return sec, text, backend


def test_paragraphs_are_complete_after_a_blank_line_or_at_the_end() -> None:
    text = "One.\n\nTwo lines\nof it.\n \n\nThree"
    assert paragraphs(text, final=False) == [(0, 4), (6, 22)]
    assert paragraphs(text, final=True) == [(0, 4), (6, 22), (26, 31)]
    assert paragraphs(text, final=False, begin=4) == [(6, 22)]


@pytest.mark.parametrize(
    "reply",
    [
        ON_EN + "\n\n" + ON_EN_2,
        # a list, dialogue, a refrain, code, figures
        "- Trim the lamp wicks at sunset\n- Wind the clockwork of the lens every four hours\n"
        "- Polish the brass\n- Record the weather in the lighthouse log\n- Sleep by day",
        '"Is the lamp lit?" the inspector asked.\n"Since six o\'clock, sir," said the '
        'keeper of the lighthouse. "And the fog bell is wound, and the log is written up."',
        "The light must burn. The lamp must burn through storm and calm. The lamp must burn "
        "when no ship passes. The lamp must burn, the old keeper said, because one will.",
        "```\nlens = Fresnel(order=1, prisms=1008)\nlens.rotate(seconds=7.5)\n```\n"
        "The first-order lens at Cape Hatteras stood 12 feet tall, weighed 6 tons and turned "
        "once every 7.5 seconds.",
    ],
)
def test_on_topic_paragraphs_pass(tmp_path: Path, reply: str) -> None:
    sec, text, backend = drift_run(tmp_path, PROMPT_EN, [(reply, "stop")])
    assert text == reply
    assert len(backend.calls) == 1 and cuts(sec) == [None]
    assert sec["relevance"] == pytest.approx(0.3)
    assert "drift" not in sec["reasons"] and not sec["degenerate"]
    assert backend.scored == [p for p in reply.split("\n\n")]


@pytest.mark.parametrize("strategy", ["kv", "prefix", "chat"])
def test_an_off_topic_paragraph_is_cut_where_it_began_and_retried(
    tmp_path: Path, strategy: str
) -> None:
    replies: list[Reply] = [(ON_EN + "\n\n" + QUIZ + "\n\nMore.", "stop"), (ON_EN_2, "stop")]
    sec, text, backend = drift_run(tmp_path, PROMPT_EN, replies, strategy)
    assert cuts(sec) == ["drift", None]
    assert sec["rounds"][0]["repetition"]["detail"].startswith("gain -0.30 from the topic: Which")
    assert QUIZ not in text and "More." not in text
    assert text.startswith(ON_EN) and text.endswith(ON_EN_2)
    assert sec["reasons"] == ["drift"] and not sec["degenerate"]
    assert sec["relevance"] == pytest.approx(0.3)  # the quiz was cut: not counted
    assert ON_EN + "\n\n" in BEFORE  # the quiz was judged as going on from it
    retry = backend.calls[1]
    assert ON_EN in "".join(m["content"] for m in retry.messages)


def test_a_chinese_paragraph_off_topic_is_cut(tmp_path: Path) -> None:
    replies: list[Reply] = [(ON_ZH + "\n\n" + STOCKS_ZH, "stop"), (ON_ZH_2, "stop")]
    sec, text, backend = drift_run(tmp_path, PROMPT_ZH, replies)
    assert cuts(sec) == ["drift", None]
    assert STOCKS_ZH not in text and text.startswith(ON_ZH) and text.endswith(ON_ZH_2)
    assert backend.scored[:2] == [ON_ZH, STOCKS_ZH]
    assert sec["relevance"] == pytest.approx(0.3)


def test_the_first_paragraph_is_judged_and_a_section_that_keeps_drifting_ends_degenerate(
    tmp_path: Path,
) -> None:
    replies: list[Reply] = [(QUIZ, "stop")] * 3
    sec, text, backend = drift_run(tmp_path, PROMPT_EN, replies)
    assert len(backend.calls) == 3  # the first try and loop_retries (2) retries
    assert cuts(sec) == ["drift"] * 3
    assert text == "" and sec["degenerate"] and sec["reasons"] == ["drift"]
    assert sec["relevance"] is None  # no paragraph kept


def test_the_same_cut_whatever_the_rounds(tmp_path: Path) -> None:
    """A paragraph is judged when it completes, not when a round ends: a kv round that
    stops inside the quiz leaves it to the next round, and the cut is the same."""
    whole = ON_EN + "\n\n" + QUIZ + "\n\n" + ON_EN_2
    one, _, _ = drift_run(tmp_path / "one", PROMPT_EN, [(whole, "stop"), (ON_EN_2, "stop")])
    split = len(ON_EN) + 30
    replies: list[Reply] = [(whole[:split], "length"), (whole[split:], "stop"), (ON_EN_2, "stop")]
    two, _, backend = drift_run(tmp_path / "two", PROMPT_EN, replies)
    assert cuts(one) == ["drift", None] and cuts(two) == [None, "drift", None]
    assert backend.scored[:2] == [ON_EN, QUIZ]  # no half paragraph scored at the round's end


def test_short_paragraphs_are_not_judged(tmp_path: Path) -> None:
    short = "Answer: A) Hawaii."
    assert len(short.split()) < MIN_WORDS
    sec, text, backend = drift_run(tmp_path, PROMPT_EN, [(ON_EN + "\n\n" + short, "stop")])
    assert text == ON_EN + "\n\n" + short and cuts(sec) == [None]
    assert backend.scored == [ON_EN]


def test_a_backend_that_cannot_score_leaves_relevance_null(tmp_path: Path) -> None:
    backend = FakeBackend({"s": [(ON_EN + "\n\n" + QUIZ, "stop")]}, chunk=3)
    sec, text, _ = run_on(tmp_path, PROMPT_EN, backend)
    assert text == ON_EN + "\n\n" + QUIZ and cuts(sec) == [None]
    assert sec["relevance"] is None


def test_a_json_section_is_not_judged(tmp_path: Path) -> None:
    reply: Reply = (f'["{QUIZ}", "{ON_EN}"]', "stop")
    backend = FakeBackend({"s": [reply]}, scorer=topic_scorer)
    sec, _, _ = run_on(tmp_path, PROMPT_EN, backend, shown=False, parse="json")
    assert sec["relevance"] is None and backend.scored == []
