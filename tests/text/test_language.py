"""The language check: which script a prompt wants, and where streamed text leaves it; names,
code, links, numbers and tables in the other script do not count."""

from __future__ import annotations

import pytest

from gen.text.language import (
    LANGUAGE_MIN_WORDS,
    RARE_BURST,
    RARE_SHARE,
    LanguageCheck,
    RareCheck,
    Script,
    Slip,
    common_han,
    language_share,
    prompt_script,
    simplified,
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
    "a chinese paper citing english works": (
        "cjk",
        ZH * 2
        + "\n\n## 参考文献\n\n"
        + "".join(
            f"[{n}] OPHIR E, NASS C, WAGNER A D. Cognitive control in media multitaskers[J]. "
            f"Proceedings of the National Academy of Sciences, 2009, 106(37): 15583-15587.\n\n"
            for n in range(1, 7)
        ),
    ),
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


def test_english_prose_after_a_reference_line_still_slips() -> None:
    cited = "[1] OPHIR E, NASS C. Cognitive control in media multitaskers[J]. PNAS, 2009.\n\n"
    slip = first_slip(ZH * 2 + "\n\n" + cited + EN * 5, "cjk")
    assert slip is not None and slip.start == len(ZH * 2 + "\n\n" + cited)


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


# -- rare characters in Simplified Chinese -------------------------------------------------

# the bundled model's Chinese as the quality bench read it: every character Chinese, much
# of it outside everyday use
GIBBERISH = (
    "碮碧碧，碧碧！碧碧黑碧碧把一间小碳被迫中，碧碧被走运！碧碩碧碧碧和碧碧胆碧碎碧碬碧碊碧碢碼，"
    "灯灯奇！清晨属于宫漂桏莫莫！清晨制墨，清水碗，清楚碰碶碧烨，碧烧碧碫！清晨繁荚白白的碧烬烬。"
)
TEA = (
    "茶起源于中国，已有数千年的历史。人们最早把茶叶当作药材使用，后来才逐渐成为日常饮品。"
    "唐代陆羽著《茶经》，被后人尊为茶圣。宋代流行点茶，明清以后散茶冲泡逐渐普及。"
    "今天，中国的六大茶类包括绿茶、白茶、黄茶、青茶、红茶和黑茶，云南的普洱和杭州的龙井"
    "各有名气，文人也爱以茗为题写诗。🍵"
)


def feed(check: RareCheck, text: str, size: int = 3) -> Slip | None:
    found = None
    for i in range(0, len(text), size):
        found = found or check.feed(text[i : i + size])
    return found


def test_common_characters_of_simplified_chinese() -> None:
    assert common_han("茶") and common_han("龙") and not common_han("碩")
    assert not common_han("茗") and not common_han("a") and not common_han("🍵")
    assert simplified("请写一篇大约600字的文章，介绍中国的茶文化。")
    assert not simplified("請寫一篇大約600字的文章，介紹中國的茶文化。")  # Traditional
    assert not simplified("Write about tea in Chinese.") and not simplified("写茶。")


def test_ordinary_chinese_passes_the_rare_check() -> None:
    assert feed(RareCheck(), TEA * 3) is None


def test_a_list_of_names_in_rare_characters_passes() -> None:
    """Birds a science night's host lists: six rare characters in thirty, each in a name
    just after a "、"."""
    birds = (
        "公园里既有常见的麻雀、白头鹎、乌鸫、珠颈斑鸠，也有在迁徙季节短暂停留的北红尾鸲、"
        "黄眉柳莺，甚至还有人在人民公园拍到过红隼。"
    )
    assert feed(RareCheck(), TEA + birds + TEA) is None
    # the same characters run together, with no list: past the burst's share
    assert feed(RareCheck(), TEA + "鹎鸫鸠鸲莺鹎鸫鸠鸲莺鹎鸫鸠鸲莺。" + TEA) is not None


def test_gibberish_of_rare_characters_is_found_where_it_began() -> None:
    text = TEA + "\n\n" + GIBBERISH * 2
    found = feed(RareCheck(), text)
    assert found is not None and found.share > RARE_SHARE and found.words >= RARE_BURST
    assert text[found.start :].startswith("碮碧碧")
    # the text before the check was made (base) is read, not judged; floor holds the start
    later = RareCheck(TEA + "\n\n", floor=5)
    found = feed(later, GIBBERISH * 2, 7)
    assert found is not None and found.start == len(TEA) + 2
