"""The reader checks in the section runner: junk never reaches the text (a row of it is cut
and retried like a loop), and text in another script than the prompt's is cut and retried;
a section that keeps failing ends degenerate, with only its sound text. Scripted backend;
the deltas always add up to the section's text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gen.errors import ConfigError
from gen.pipeline.run.continuation import LengthPolicy
from gen.pipeline.run.draft import Draft
from gen.pipeline.run.events import EventLog
from gen.pipeline.run.headings import HeadingFilter
from gen.pipeline.run.reader import Reader, line_start, sound_end
from gen.pipeline.run.siblings import Siblings
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, run

from .test_loops import deltas_of

PROMPT_EN = "Help me establish a 600 words learning plan for Swift language development."
PROMPT_ZH = "请用中文写一篇关于汽车制造商研究背景的说明，大约六百字。"
SWIFT = "Week one: learn the syntax of Swift, its types and its optionals."
EMOJI = "Adrian:\n" + "👩\n" * 150
SERMON = (  # the English answer a Chinese prompt got (no sentence in it repeats)
    "You are a God. A God of the Almighty, who made the heavens and the earth and "
    "everything in them. Praise him every day of your life, for he is good. Walk in his "
    "light and keep his word, and your house will stand when the storms come at night."
)
CARS = "汽车制造商的研究背景包括市场、技术和政策三个方面。电动化改变了整个行业。"
TEA_ZH = "茶起源于中国，已有数千年的历史。人们最早把茶叶当作药材使用，后来才逐渐成为日常饮品。"


def run_section(
    tmp_path: Path, prompt: str, replies: list[Reply], strategy: str = "kv", **fields: Any
) -> tuple[dict[str, Any], str, FakeBackend, Path]:
    """One section with `prompt`; returns (its manifest entry, its text, the backend, the
    run folder). The document holds exactly the section's text."""
    backend = FakeBackend({"s": replies}, chunk=3)
    sec, text, folder = run_on(tmp_path, prompt, backend, strategy, **fields)
    return sec, text, backend, folder


def run_on(
    tmp_path: Path,
    prompt: str,
    backend: FakeBackend,
    strategy: str = "kv",
    shown: bool = True,
    **fields: Any,
) -> tuple[dict[str, Any], str, Path]:
    """One section with `prompt` on `backend`; returns (its manifest entry, its text, the
    run folder). With `shown` (not for a JSON section) the document holds exactly the
    section's text."""
    yaml = (
        "name: reader\n"
        "defaults: {max_tokens: 80, max_rounds: 4, temperature: 0.7, seed: 3, "
        f"continuation: {strategy}}}\n"
        "sections:\n"
        "  - id: s\n"
        f'    prompt: "[s] {prompt}"\n' + "".join(f"    {k}: {v}\n" for k, v in fields.items())
    )
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    text = (prepared.run_dir.sections_dir / "s.md").read_text("utf-8")
    document = (prepared.run_dir.path / "document.md").read_text("utf-8")
    assert document.rstrip().endswith(text.rstrip()) or not shown
    assert deltas_of(prepared.run_dir.path) == text  # nothing shown that was cut
    return manifest["sections"][0], text, prepared.run_dir.path


def cuts(section: dict[str, Any]) -> list[str | None]:
    return [(r.get("repetition") or {}).get("kind") for r in section["rounds"]]


# -- junk ------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["kv", "prefix", "chat"])
def test_an_emoji_per_line_answer_is_retried_then_ends_degenerate(
    tmp_path: Path, strategy: str
) -> None:
    replies: list[Reply] = [(EMOJI, "stop")] * 3
    sec, text, backend, run_dir = run_section(tmp_path, PROMPT_EN, replies, strategy)
    assert len(backend.calls) == 3  # the first try and loop_retries (2) retries
    assert cuts(sec) == ["junk"] * 3
    assert sec["degenerate"] is True and sec["reasons"] == ["junk"]
    assert sec["junk"] == 9  # three lines a try, each try cut at its third
    assert text == ""  # "Adrian:" announced the junk: it goes with it
    document = (run_dir / "document.md").read_text("utf-8")
    assert "👩" not in document


def test_a_row_of_junk_is_retried_from_the_sound_text(tmp_path: Path) -> None:
    replies: list[Reply] = [(TEA_ZH + "\n\n" + "\ufffd\ufffd\n" * 5, "stop"), (CARS, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_ZH, replies)
    assert text == TEA_ZH + CARS
    first, retry = backend.calls
    assert retry.continue_final and retry.messages[-1]["content"] == TEA_ZH
    assert retry.params.seed != first.params.seed
    assert retry.params.logit_bias == ((ord("\ufffd"), -6.0),)  # the junk made less likely
    assert cuts(sec) == ["junk", None] and sec["rounds"][0]["stop_reason"] == "junk"
    assert sec["degenerate"] is False and sec["reasons"] == ["junk"] and sec["junk"] == 3


def test_an_emoji_line_split_across_kv_rounds_is_dropped(tmp_path: Path) -> None:
    replies: list[Reply] = [
        ("Plan the first week.\n👩", "length"),
        ("👩\n\nLearn optionals next.", "stop"),
    ]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_EN, replies)
    assert text == "Plan the first week.\n\nLearn optionals next."
    assert len(backend.calls) == 1 and sec["junk"] == 1 and sec["reasons"] == []


@pytest.mark.parametrize(
    ("prompt", "reply", "kept"),
    [
        (PROMPT_EN, f"{SWIFT}\n\n🚀🚀🚀\n\nWeek two: closures.", f"{SWIFT}\n\nWeek two: closures."),
        (PROMPT_ZH, f"{CARS}\n\n\ufffd\n\n{TEA_ZH}", f"{CARS}\n\n{TEA_ZH}"),
        (PROMPT_EN, f"{SWIFT}\n-\nWeek two.", f"{SWIFT}\nWeek two."),  # a marker alone
        (PROMPT_EN, f"{SWIFT} {'✨' * 40} Week two.", f"{SWIFT} Week two."),  # a run
    ],
)
def test_stray_junk_is_cut_silently(tmp_path: Path, prompt: str, reply: str, kept: str) -> None:
    sec, text, backend, _ = run_section(tmp_path, prompt, [(reply, "stop")])
    assert text == kept
    assert len(backend.calls) == 1 and sec["junk"] == 1
    assert sec["reasons"] == [] and sec["degenerate"] is False


# -- ordinary text passes both checks ---------------------------------------------------------

SOUND_EN = {
    "list": "Your plan:\n\n1. Week one: syntax.\n2. Week two: closures.\n\n- Read the book.\n- "
    "Build a small app.",
    "dialogue": "“Ready?” asked the teacher.\n\n“Yes — let's start!” said Ann… and smiled.",
    "refrain": "Row, row, row your boat,\nGently down the stream.\nRow, row, row your boat,\n"
    "Merrily we go.",
    "code": "Try this:\n\n```swift\nlet x = [1, 2, 3]\nfor n in x {\n    print(n)\n}\n```\n\n"
    "It prints each number.",
    "numbers": "In 2014, Swift 1.0 came out; by 2019, version 5.0 had a stable ABI (about "
    "60% faster builds).",
    "table": "| Week | Topic |\n|---:|:---|\n| 1 | Syntax |\n| 2 | Closures |\n\nThat is all.",
    "emoji in sentences": "Great start 😀! Now build an app 🚀 and ship it ✅ this month.",
    "rules": "Part one.\n\n---\n\nPart two.\n\n***\n\nThe end.",
}
SOUND_ZH = {
    "names and a link": "Swift 由 Chris Lattner 在 Apple 设计，2014 年发布。更多资料见 "
    "https://www.swift.org/documentation/ 和 GitHub 上的 apple/swift 仓库。学习时可以用 Xcode "
    "或者 Visual Studio Code 写代码，每天练习一个小时。",
    "code": '示例代码：\n\n```swift\nlet names = ["Anna", "Brian"]\nfor name in names {\n'
    '    print("Hello, \\(name)! Welcome to the language.")\n}\n```\n\n这段代码会向每个人问好。',
    "list": "学习计划：\n\n1. 第一周：语法。\n2. 第二周：闭包。\n\n- 读官方文档。\n- 写个小应用。",
    "dialogue": "“准备好了吗？”老师问。\n\n“好了！”学生说……然后笑了。",
    "table": "| 周 | 内容 |\n|---|---|\n| 1 | 语法 |\n| 2 | 闭包 |\n\n就是这些。",
    "numbers": "2023 年销量 1,234,567 辆，增长 12.5%，利润达到 3.2 亿元，同比提高 8%。",
    "emoji in sentences": "今天学得很好😀！明天继续加油🚀，争取早日写出自己的应用。",
    "refrain": "春天来了，花开了。\n春天来了，草绿了。\n春天来了，鸟叫了。",
}


@pytest.mark.parametrize(
    ("prompt", "reply"),
    [(PROMPT_EN, t) for t in SOUND_EN.values()] + [(PROMPT_ZH, t) for t in SOUND_ZH.values()],
    ids=[f"en-{k}" for k in SOUND_EN] + [f"zh-{k}" for k in SOUND_ZH],
)
def test_ordinary_text_passes(tmp_path: Path, prompt: str, reply: str) -> None:
    sec, text, backend, _ = run_section(tmp_path, prompt, [(reply, "stop")])
    assert text == reply
    assert len(backend.calls) == 1
    assert sec["junk"] == 0 and sec["reasons"] == [] and sec["degenerate"] is False
    assert sec["language_share"] is None or sec["language_share"] >= 0.7


# -- language --------------------------------------------------------------------------------


def test_a_chinese_prompt_answered_in_english_is_retried(tmp_path: Path) -> None:
    sec, text, backend, _ = run_section(tmp_path, PROMPT_ZH, [(SERMON, "stop"), (CARS, "stop")])
    assert text == CARS
    first, retry = backend.calls
    assert retry.params.seed != first.params.seed
    assert retry.messages[-1] == {"role": "assistant", "content": ""}  # nothing was sound
    assert cuts(sec) == ["language", None]
    detail = sec["rounds"][0]["repetition"]["detail"]
    assert detail == "0% of the last 30 words in the CJK script"
    assert sec["reasons"] == ["language"] and sec["degenerate"] is False
    assert sec["language_share"] == 1.0


def test_a_section_that_keeps_to_another_script_ends_degenerate(tmp_path: Path) -> None:
    sec, text, backend, _ = run_section(tmp_path, PROMPT_ZH, [(SERMON, "stop")] * 3)
    assert len(backend.calls) == 3
    assert cuts(sec) == ["language"] * 3
    assert sec["degenerate"] is True and sec["reasons"] == ["language"]
    assert text == ""


def test_an_english_prompt_answered_in_chinese_is_retried(tmp_path: Path) -> None:
    replies: list[Reply] = [(TEA_ZH * 2, "stop"), (SWIFT, "stop")]
    sec, text, _, _ = run_section(tmp_path, PROMPT_EN, replies)
    assert text == SWIFT
    assert cuts(sec) == ["language", None] and sec["reasons"] == ["language"]


@pytest.mark.parametrize("strategy", ["kv", "chat"])
def test_a_drift_into_english_is_cut_where_it_began(tmp_path: Path, strategy: str) -> None:
    drift = (
        "youre a bloke of fire in the world and you're all tha smash and pure "
        "destruction forever thanks to her for sending it across. "
    ) * 3
    later = "唐代以后，饮茶之风传遍全国。"
    replies: list[Reply] = [(TEA_ZH + "\n\n" + drift, "length"), (later, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_ZH, replies, strategy)
    assert text == TEA_ZH + later
    assert {"role": "assistant", "content": TEA_ZH} in backend.calls[1].messages
    assert cuts(sec) == ["language", None]


def test_an_announcing_line_goes_with_the_other_script(tmp_path: Path) -> None:
    reply = f"{CARS}\n\nThe English version follows:\n\n{SERMON}"
    sec, text, _, _ = run_section(tmp_path, PROMPT_ZH, [(reply, "stop"), ("完。", "stop")])
    assert text == CARS + "完。" and sec["reasons"] == ["language"]
    # an announcing line that is chatter itself is cut before the other script counts
    reply = f"{CARS}\n\nHere is the article in English:\n\n{SERMON}"
    sec, text, _, _ = run_section(tmp_path, PROMPT_ZH, [(reply, "stop"), ("完。", "stop")])
    assert text == CARS + "完。" and sec["reasons"] == ["chatter"]


@pytest.mark.parametrize(
    ("fields", "cut"),
    [({"language": "any"}, False), ({"language": "en"}, False), ({"language": "zh"}, True)],
)
def test_the_language_setting(tmp_path: Path, fields: dict[str, str], cut: bool) -> None:
    # an English prompt: only `language: zh` holds the English answer to be wrong
    replies: list[Reply] = [(SERMON, "stop"), (CARS, "stop")]
    sec, text, _, _ = run_section(tmp_path, PROMPT_EN, replies, **fields)
    assert (text == CARS) is cut
    assert (sec["reasons"] == ["language"]) is cut


def test_a_mixed_prompt_holds_no_script(tmp_path: Path) -> None:
    prompt = "Compare 茶 and 咖啡 and 可可 and 奶茶 in a few lines"
    sec, text, _, _ = run_section(tmp_path, prompt, [(SERMON, "stop")])
    assert text == SERMON.rstrip() and sec["language_share"] is None


def test_an_unknown_language_is_a_config_error() -> None:
    yaml = "name: x\ndefaults: {language: fr}\nsections:\n  - id: s\n    prompt: Hi.\n"
    with pytest.raises(ConfigError, match="language"):
        pipeline_from(yaml)


# -- the same text however the rounds cut it -------------------------------------------------

ROUNDS_EN = (
    "Plan the first week.\n👩 Start with syntax.\n\n🌟\n\nThen closures 😀 and "
    + "✨" * 20
    + " generics.\n- \n- Build an app.\n"
)


@pytest.mark.parametrize("cut_at", [0, 21, 22, 23, 45, 60, 75, 95, 99])
def test_junk_is_judged_the_same_across_kv_rounds(tmp_path: Path, cut_at: int) -> None:
    whole = run_section(tmp_path / "whole", PROMPT_EN, [(ROUNDS_EN, "stop")])
    head, rest = ROUNDS_EN[:cut_at], ROUNDS_EN[cut_at:]
    replies: list[Reply] = [(head, "length"), (rest, "stop")] if head else [(rest, "stop")]
    split = run_section(tmp_path / "split", PROMPT_EN, replies)
    assert split[1] == whole[1]
    assert split[0]["junk"] == whole[0]["junk"] == 3


@pytest.mark.parametrize("cut_at", [10, len(TEA_ZH), len(TEA_ZH) + 30])
def test_a_drift_is_cut_at_the_same_place_across_kv_rounds(tmp_path: Path, cut_at: int) -> None:
    reply = TEA_ZH + "\n\n" + SERMON
    later = "唐代以后，饮茶之风传遍全国。"
    split: list[Reply] = [(reply[:cut_at], "length"), (reply[cut_at:], "length"), (later, "stop")]
    sec, text, _, _ = run_section(tmp_path, PROMPT_ZH, split)
    assert text == TEA_ZH + later
    assert cuts(sec) == [None, "language", None]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("Intro.\nThe answer is ", "Intro."),
        ("Hello.\nAdrian:\n\n", "Hello."),  # a line announcing the junk goes with it
        ("1. Item\n2. Item\n3. ", "1. Item\n2. Item"),  # "3." is no sentence end
        ("茶很香。然后", "茶很香。"),
        ("以下是文章：\n\n", ""),
    ],
)
def test_junk_is_cut_back_to_the_last_sound_sentence(text: str, kept: str) -> None:
    assert text[: sound_end(text, 0)] == kept
    assert sound_end(text, len(text)) == len(text)  # never before what was shown


def test_another_script_is_cut_from_its_line_start_after_a_marker() -> None:
    text = "中文。\n- English words here"
    assert line_start(text, text.index("English")) == text.index("-")
    assert line_start(text, text.index("words")) == text.index("words")


# -- chatter ---------------------------------------------------------------------------------

WEEK2 = "Week two: build a small app with SwiftUI, one screen at a time."


@pytest.mark.parametrize(
    ("prompt", "opening", "own"),
    [
        (PROMPT_EN, "Certainly! 🎉 Here is a 600-word learning plan for Swift:\n\n", SWIFT),
        (PROMPT_EN, "**Sure!**\n\n", SWIFT),
        (PROMPT_ZH, "好的！以下是一篇关于汽车制造商研究背景的说明：\n\n", CARS),
    ],
)
def test_chatter_at_the_opening_is_dropped(
    tmp_path: Path, prompt: str, opening: str, own: str
) -> None:
    sec, text, backend, _ = run_section(tmp_path, prompt, [(opening + own, "stop")])
    assert text == own and len(backend.calls) == 1  # dropped, not retried
    assert sec["chatter"] >= 1 and sec["reasons"] == [] and sec["degenerate"] is False


@pytest.mark.parametrize(
    ("prompt", "own", "ending"),
    [
        (PROMPT_EN, SWIFT, "\n\nI hope this helps! Let me know if you need anything else."),
        (PROMPT_EN, SWIFT, " Feel free to ask if you have any questions"),  # no full stop
        (PROMPT_ZH, CARS, "\n\n希望这篇文章对你有帮助！（字数：约600字）"),
    ],
)
def test_chatter_at_the_end_is_dropped(tmp_path: Path, prompt: str, own: str, ending: str) -> None:
    sec, text, backend, _ = run_section(tmp_path, prompt, [(own + ending, "stop")])
    assert text == own and len(backend.calls) == 1
    assert sec["chatter"] >= 1 and sec["reasons"] == []


def test_chatter_at_a_rounds_end_is_dropped_before_the_text_goes_on(tmp_path: Path) -> None:
    """A model that ends short of its target with "I hope this helps!" is asked for more:
    the more goes on from its own text, not from the chatter."""
    replies: list[Reply] = [(SWIFT + " I hope this helps!", "stop"), (WEEK2, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_EN, replies, target_words=20)
    assert text == SWIFT + "\n\n" + WEEK2
    assert backend.calls[1].messages[-1]["content"] == SWIFT + "\n\n"
    assert sec["chatter"] == 1


@pytest.mark.parametrize(
    ("prompt", "own", "inside", "later"),
    [
        (PROMPT_EN, SWIFT, " The article will have 280 words. Sure, let me help you.", WEEK2),
        (PROMPT_ZH, CARS, "本文将分为三个部分。", "电池成本在十年间下降了八成。"),
    ],
)
def test_chatter_inside_the_text_is_cut_and_retried(
    tmp_path: Path, prompt: str, own: str, inside: str, later: str
) -> None:
    replies: list[Reply] = [(own + inside + " " + later, "stop"), (" " + later, "stop")]
    sec, text, backend, _ = run_section(tmp_path, prompt, replies)
    assert text == own + " " + later
    first, retry = backend.calls
    assert retry.continue_final and retry.messages[-1]["content"] == own
    assert retry.params.seed != first.params.seed
    assert cuts(sec) == ["chatter", None] and sec["rounds"][0]["stop_reason"] == "chatter"
    assert sec["reasons"] == ["chatter"] and sec["degenerate"] is False


def test_a_section_that_keeps_chattering_ends_degenerate_with_its_own_text(
    tmp_path: Path,
) -> None:
    chatty = " As an AI, I will now write the rest of the article. " + WEEK2
    own = [" Week three: tests.", " Week four: a release."]
    replies: list[Reply] = [(SWIFT + chatty, "stop")] + [(o + chatty, "stop") for o in own]
    sec, text, _, _ = run_section(tmp_path, PROMPT_EN, replies, loop_retries=2)
    assert text == SWIFT + "".join(own)
    assert sec["degenerate"] is True and sec["reasons"] == ["chatter"]


def test_a_chat_models_new_answer_opens_without_chatter(tmp_path: Path) -> None:
    replies: list[Reply] = [
        (SWIFT, "length"),
        ("Sure! Here is the rest of the plan:\n\n" + WEEK2, "stop"),
    ]
    sec, text, _, _ = run_section(tmp_path, PROMPT_EN, replies, "chat")
    assert "Sure" not in text and "rest of the plan" not in text
    assert text.startswith(SWIFT) and text.endswith(WEEK2)
    assert sec["chatter"] == 2 and sec["reasons"] == []


def test_the_prompts_instructions_said_again_are_dropped(tmp_path: Path) -> None:
    prompt = (
        "Write about the Swift language for beginners. Give concrete facts, names, dates, "
        "examples and explanations that belong to this part and to no other."
    )
    echo = "Give concrete facts, names, dates, examples and explanations for this part.\n\n"
    sec, text, _, _ = run_section(tmp_path, prompt, [(echo + SWIFT, "stop")])
    assert text == SWIFT and sec["chatter"] == 1


@pytest.mark.parametrize(
    "own",
    [
        '"Sure, I can help you," said the keeper. "Of course, the lamp needs oil." ' + SWIFT,
        "Of course, Swift was announced in 2014. " + SWIFT,
        "「好的！」老人笑着说。" + CARS,
        "1. Learn the syntax.\n2. Learn the types.\n3. Build an app: 3 screens, 2 weeks.",
        "```swift\nlet words = 600\nprint(words)\n```\n\n" + SWIFT,
    ],
)
def test_the_texts_own_sentences_are_kept(tmp_path: Path, own: str) -> None:
    prompt = PROMPT_ZH if "。" in own else PROMPT_EN
    sec, text, backend, _ = run_section(tmp_path, prompt, [(own, "stop")])
    assert text == own and sec["chatter"] == 0 and len(backend.calls) == 1


def test_a_loop_cut_back_to_chatter_drops_the_chatter_too(tmp_path: Path) -> None:
    """A loop cut back to "I hope this helps!": the retry writes on from the text's own."""
    looped = f"{SWIFT} I hope this helps! {SWIFT} {WEEK2}"
    replies: list[Reply] = [(looped, "stop"), (" " + WEEK2, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_EN, replies)
    assert text == SWIFT + " " + WEEK2
    assert backend.calls[1].messages[-1]["content"] == SWIFT
    assert cuts(sec) == ["sentence", None] and sec["chatter"] == 1


def test_a_retrys_opening_chatter_is_dropped_not_cut_again(tmp_path: Path) -> None:
    """A retry is a new answer: "I hope you like this plan." at its opening is dropped and
    the text goes on, where inside the text it would be cut again."""
    looped = f"{SWIFT} {SWIFT} {WEEK2}"
    replies: list[Reply] = [(looped, "stop"), (" I hope you like this plan. " + WEEK2, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_EN, replies)
    assert text == SWIFT + " " + WEEK2 and len(backend.calls) == 2
    assert cuts(sec) == ["sentence", None] and sec["chatter"] == 1


# -- gibberish -------------------------------------------------------------------------------

GIBBERISH_ZH = (
    "碮碧碧，碧碧！碧碧黑碧碧把一间小碳被迫中，碧碧被走运！碧碩碧碧碧和碧碧胆碧碎碧碬碧碊碧碢碼。"
    * 3
)


def test_rare_characters_in_simplified_chinese_are_cut_and_retried(tmp_path: Path) -> None:
    replies: list[Reply] = [(TEA_ZH + "\n\n" + GIBBERISH_ZH, "stop"), (CARS, "stop")]
    sec, text, backend, _ = run_section(tmp_path, PROMPT_ZH, replies)
    assert text == TEA_ZH + CARS
    assert cuts(sec) == ["gibberish", None] and sec["rounds"][0]["stop_reason"] == "gibberish"
    assert sec["reasons"] == ["gibberish"] and sec["degenerate"] is False
    assert backend.calls[1].params.seed != backend.calls[0].params.seed


def test_a_section_that_keeps_writing_gibberish_ends_degenerate(tmp_path: Path) -> None:
    replies: list[Reply] = [(TEA_ZH + "\n\n" + GIBBERISH_ZH, "stop")] + [
        ("\n\n" + GIBBERISH_ZH, "stop")
    ] * 4
    sec, text, _, _ = run_section(tmp_path, PROMPT_ZH, replies, loop_retries=2)
    assert text == TEA_ZH and sec["degenerate"] is True and sec["reasons"] == ["gibberish"]


def test_traditional_chinese_is_not_held_to_simplifieds_common_characters(
    tmp_path: Path,
) -> None:
    prompt = "請用中文寫一篇關於汽車製造商研究背景的說明，大約六百字。"
    traditional = (
        "汽車製造商的研究背景包括市場、技術和政策三個方面。電動化改變了整個行業。"
        "電池成本在十年間下降了八成，充電網絡也在快速擴張。各國的排放法規日益嚴格。"
    )
    sec, text, backend, _ = run_section(tmp_path, prompt, [(traditional, "stop")])
    assert text == traditional and len(backend.calls) == 1 and sec["reasons"] == []


def test_broken_bytes_inside_a_line_never_reach_the_text(tmp_path: Path) -> None:
    reply = "清晨的菜市场很热闹\ufffd，卖菜的人\ufffd\ufffd大声吆喝。Week one: Swift\ufffd basics."
    sec, text, _, _ = run_section(tmp_path, PROMPT_ZH, [(reply, "stop")], language="any")
    assert text == reply.replace("\ufffd", "") and sec["junk"] == 4


def test_broken_bytes_in_a_held_back_tail_never_reach_the_text() -> None:
    """Text added between requests (a stream's held-back tail) is read for broken bytes."""
    draft = Draft(
        EventLog("r"), "s", LengthPolicy(None, None, None), HeadingFilter("keep"), Siblings(())
    )
    draft.reader = Reader("cjk")
    draft.begin(1, restart=False)
    assert draft.take(TEA_ZH, 1) is None and draft.end_round(1) is None
    draft.append("\ufffd" + CARS[:5])
    draft.finish("\ufffd")
    assert draft.text == TEA_ZH + CARS[:5] and draft.reader.junk.dropped == 2
