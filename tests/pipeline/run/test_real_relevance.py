"""The drift measure on the bundled SmolLM2: paragraphs on the section's topic gain in
log-probability from its prompt, clearly off-topic ones lose, in English and Chinese (the
calibration's samples; relevance.py has its figures)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gen.backends.local import LocalBackend
from gen.pipeline.run.reader import own_prompt
from gen.pipeline.run.relevance import DRIFT_GAIN, Relevance, judge_for
from gen.pipeline.spec import Pipeline
from gen.pipeline.templates.render import render_system
from tests.pipeline.fake_backend import pipeline_from

pytestmark = pytest.mark.real_model


def judge_of(backend: LocalBackend, pipeline: Pipeline, wanted: Any) -> Relevance:
    """The judge of the pipeline's first section, as the section runner makes it."""
    section = pipeline.sections[0]
    system = render_system(pipeline, section, {})
    return judge_for(backend, own_prompt(pipeline, section, {}), system, wanted)


EN = """
name: lighthouses
sections:
  - id: keepers
    prompt: 'You are writing a document titled "Lighthouses". Write the section "The keepers'' daily life" in several paragraphs.'
"""  # noqa: E501
ZH = """
name: tea
defaults:
  system: 你是一位作家。请只用中文写作。
sections:
  - id: history
    prompt: 你正在写一篇题为《茶文化》的文章。请写其中的一节：“中国茶的历史”，分几段。
"""
ON_EN = [
    "The keeper rose before dawn to put out the lamp and draw the curtains across the lens, "
    "so the sun would not crack the glass. Then came the log book: the wind, the weather, "
    "the ships that had passed in the night.",
    '"Is the light lit?" the inspector asked.\n"Since six o\'clock, sir," said the keeper. '
    '"And the fog bell is wound."',
]
OFF_EN = [
    "Which of the following islands are volcanic? A) are located in Hawaii B) are found in "
    "the Arctic C) were formed by glaciers D) none of the above. Answer: A. Question 2: What "
    "is the capital of France?",
    "Dear brothers and sisters, let us pray that the Lord gives us strength. Jesus said, "
    "love your neighbour as yourself. Let us open our hearts to His grace and walk in His "
    "ways every day of our lives. Amen.",
]
ON_ZH = [
    "茶起源于中国，已有数千年的历史。人们最早把茶叶当作药材使用，后来才逐渐成为日常饮品。"
    "唐代陆羽写成《茶经》，系统地记述了茶的种植、采摘和煮饮方法。",
    "“这茶是哪里来的？”客人问。\n“是今年春天的西湖龙井，”主人笑着说，“您尝尝，是不是有一股豆香？”",
]
OFF_ZH = [
    "亲爱的弟兄姊妹们，让我们一同祷告，感谢主的恩典。耶稣说：你们要彼此相爱。"
    "愿主的平安与你们同在，阿们。",
    "今天股市大幅下跌，科技股领跌，投资者担心利率继续上升。美元对欧元和日元走强，黄金价格小幅回落。",
]


# a paragraph that goes on from the one before it without naming the topic (the model's
# own, cut as drift when it was judged alone): judged after it, it keeps to the topic
BEFORE = (
    "The life of a lighthouse keeper was a life of challenges. They faced the challenges "
    "of the sea, and beyond. They faced storms, as well as their own struggles. They "
    "worked tirelessly, day and night."
)
AFTER = (
    "Despite their strength, they were also resilient. They could withstand the most "
    "extreme conditions, and they persevered. They kept the light burning through every "
    "storm, and they never gave up on the sailors who depended on them."
)


@pytest.fixture(scope="module")
def backend(real_model_blocks: Any) -> Iterator[LocalBackend]:
    local = LocalBackend(real_model_blocks, max_slots=2)
    yield local
    asyncio.run(local.aclose())


@pytest.mark.parametrize(
    ("yaml", "wanted", "on", "off"),
    [(EN, "latin", ON_EN, OFF_EN), (ZH, "cjk", ON_ZH, OFF_ZH)],
    ids=["en", "zh"],
)
def test_on_topic_paragraphs_gain_and_off_topic_ones_lose(
    backend: LocalBackend, yaml: str, wanted: Any, on: list[str], off: list[str]
) -> None:
    pipeline = pipeline_from(yaml)
    judge = judge_of(backend, pipeline, wanted)

    async def gains(texts: list[str]) -> list[float]:
        return [g for t in texts if (g := await judge.gain(t)) is not None]

    started = time.perf_counter()
    on_gains, off_gains = asyncio.run(gains(on)), asyncio.run(gains(off))
    each = (time.perf_counter() - started) / (len(on) + len(off))
    print(f"gains on {on_gains} off {off_gains}; {each * 1000:.0f} ms a paragraph")
    assert min(on_gains) > DRIFT_GAIN + 0.05
    assert max(off_gains) < DRIFT_GAIN


def test_a_paragraph_is_judged_as_going_on_from_the_one_before(backend: LocalBackend) -> None:
    pipeline = pipeline_from(EN)
    judge = judge_of(backend, pipeline, "latin")
    after = asyncio.run(judge.gain(AFTER, "Intro.\n\n" + BEFORE + "\n\n"))
    quiz = asyncio.run(judge.gain(OFF_EN[0], BEFORE + "\n\n"))
    assert after is not None and after > DRIFT_GAIN + 0.1
    assert quiz is not None and quiz < DRIFT_GAIN
