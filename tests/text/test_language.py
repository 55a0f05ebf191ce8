"""The language check: which script a prompt wants, and where streamed text leaves it; names,
code, links, numbers and tables in the other script do not count."""

from __future__ import annotations

import pytest

from gen.text.language import (
    LANGUAGE_MIN_WORDS,
    LanguageCheck,
    Script,
    Slip,
    language_share,
    prompt_script,
    wanted_script,
    word_script,
)


def first_slip(text: str, wanted: Script, chunk: int = 3, base: str = "") -> Slip | None:
    check = LanguageCheck(wanted, base)
    for i in range(0, len(text), chunk):
        slip = check.feed(text[i : i + chunk])
        if slip is not None:
            return slip
    return None


ZH = "茶起源于中国，已有数千年的历史。人们最早把茶叶当作药材使用，后来才逐渐成为日常饮品。"
EN = "Tea came to Europe in the seventeenth century, and the English soon drank it daily. "
SERMON = "You are a God. A God of the Almighty, who made the heavens and the earth. " * 3

# ordinary text in the wanted script, with what must not trip the check
SOUND: dict[str, tuple[Script, str]] = {
    "names and a link": (
        "cjk",
        "Python 由 Guido van Rossum 在 1991 年发布。欢迎访问 https://www.python.org/doc/ 了解"
        "更多。我们用 GitHub 和 Visual Studio Code 管理代码，www.example.com 也可以。" * 2,
    ),
    "code": (
        "cjk",
        "下面是一个例子：\n\n```python\ndef combine(first, second):\n    return first + second"
        "  # join the two strings together here\n```\n\n运行 `pip install numpy pandas` "
        "安装依赖，然后调用这个函数把两个字符串连起来。",
    ),
    "table of names": (
        "cjk",
        "| 语言 | 作者 | 年份 |\n|---|---|---|\n| Python | Guido van Rossum | 1991 |\n"
        "| Java | James Gosling | 1995 |\n| Ruby | Yukihiro Matsumoto | 1995 |\n" * 2,
    ),
    "a list of terms": ("cjk", "常见的语言有 Python、Java、Go、Rust、C 和 Swift，各有所长。" * 3),
    "numbers": ("cjk", "2023 年销量 1,234,567 辆，增长 12.5%，利润 3.2e9 元。" * 4),
    "english with names": (
        "latin",
        "The poem 静夜思 by 李白 is short. Words like 茶 (cha) came with the trade. " * 3,
    ),
    "dialogue": ("latin", "“Tea?” she asked. “Yes,” he said, “with milk, please.” " * 4),
    "one english sentence in chinese": (
        "cjk",
        ZH + "他说：“Tea is the best drink in the whole wide world.” " + ZH,
    ),
}


@pytest.mark.parametrize("name", list(SOUND))
def test_ordinary_text_in_the_wanted_script_passes(name: str) -> None:
    wanted, text = SOUND[name]
    assert first_slip(text, wanted) is None
    share = language_share(text, wanted)
    assert share is not None and share >= 0.7


@pytest.mark.parametrize(("wanted", "text"), [("cjk", SERMON), ("latin", ZH * 2)])
def test_text_in_the_other_script_slips_from_its_start(wanted: Script, text: str) -> None:
    slip = first_slip(text, wanted)
    assert slip is not None and slip.start == 0 and slip.share == 0.0
    assert language_share(text, wanted) == 0.0


@pytest.mark.parametrize(
    ("wanted", "before", "after"),
    [("cjk", ZH * 2 + "\n\n", EN * 5), ("latin", EN * 3 + "\n\n", ZH * 4)],
)
def test_a_drift_slips_where_it_began(wanted: Script, before: str, after: str) -> None:
    slip = first_slip(before + after, wanted)
    assert slip is not None and slip.start == len(before)


def test_too_little_text_is_not_judged() -> None:
    few = " ".join(["word"] * (LANGUAGE_MIN_WORDS - 1)) + "."
    assert first_slip(few, "cjk") is None
    assert first_slip(few + " word. ", "cjk") is not None  # (a word counts once ended)


def test_base_fills_the_window_but_only_fed_text_is_judged() -> None:
    assert first_slip("", "cjk", base=SERMON) is None
    slip = first_slip(" Praise him.", "cjk", base=SERMON)
    assert slip is not None and slip.start == len(SERMON)  # the floor: the end of base


@pytest.mark.parametrize(
    ("raw", "script"),
    [
        ("Hello,", "latin"),
        ("“don't”", "latin"),
        ("e.g.", "latin"),
        ("café", "latin"),
        ("茶", "cjk"),
        ("한국어", "cjk"),
        ("Москва", "other"),
        ("1991", None),
        ("https://x.org/a", None),
        ("example.com", None),
        ("a@b.org", None),
        ("snake_case", None),
        ("H2O", None),
    ],
)
def test_word_scripts(raw: str, script: str | None) -> None:
    assert word_script(raw) == script


@pytest.mark.parametrize(
    ("prompt", "script"),
    [
        ("请用中文写一段关于“茶的历史”的引言。", "cjk"),
        ("Help me establish a 600 words learning plan for Swift language development.", "latin"),
        ("写一篇关于 machine learning 和 deep learning 的文章", "cjk"),
        ("用中文回答：What is the capital of France, and why?", "cjk"),  # asked by name
        ("Translate into English: 床前明月光，疑是地上霜。", "latin"),
        ("Write a story set in 北京 about 李明 and his family", "latin"),
        ("Compare 茶 and 咖啡 and 可可 and 奶茶 in a few lines", None),  # mixed: no script
        ("Write the section.", None),  # too short to tell
        ("```\ncode only\n```", None),
    ],
)
def test_the_script_a_prompt_wants(prompt: str, script: Script | None) -> None:
    assert prompt_script(prompt) == script


def test_the_setting_wins_over_the_prompt() -> None:
    prompt = "Write a long essay about the history of tea in Europe, please."
    assert wanted_script("auto", prompt) == "latin"
    assert wanted_script("zh", prompt) == "cjk"
    assert wanted_script("en", "请用中文写一段关于茶的引言。") == "latin"
    assert wanted_script("any", prompt) is None
