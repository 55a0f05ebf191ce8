"""Chatter: an assistant's talk, sentences about the writing, the prompt said again; and the
text's own sentences (dialogue, lists, numbers, code, a refrain) that must pass."""

from __future__ import annotations

import pytest

from gen.text.chatter import Chatter, bare, units

CHATTER = [
    ("Sure, here is an article about lighthouses:", "assistant"),
    ("Certainly!", "assistant"),
    ("**Sure!**", "assistant"),
    ("Of course! I can help with that.", "assistant"),
    ("Here's a 600-word learning plan for Swift:", "assistant"),
    ("Below is the essay you asked for.", "assistant"),
    ("I hope this helps!", "assistant"),
    ("Let me know if you need anything else.", "assistant"),
    ("If you have any other questions, feel free to ask.", "assistant"),
    ("As an AI language model, I cannot visit lighthouses.", "assistant"),
    ("The article will have 280 words.", "writing"),
    ("This essay will explore the history of tea.", "writing"),
    ("I am going to give you something to think about.", "writing"),
    ("Sure, let me help you with the rest of the article.", "assistant"),
    ("Let me continue with the next part.", "writing"),
    ("(Word count: 612)", "writing"),
    ("I'll now write the conclusion.", "writing"),
    ("In this article, I have tried to provide you with an overview.", "writing"),
    ("1000 words.", "writing"),
    ("In my next paragraph, I'd like to delve into the brewing methods.", "writing"),
    ("I'm here to help explain everything.", "assistant"),
    ("The main part of the article is about the science of light.", "writing"),
    ("The article also contains a different part about lenses.", "writing"),
    ("Each paragraph contains 3 paragraphs.", "writing"),
    ("Article ends.", "writing"),
    ("The article is divided into two paragraphs, written in simple language.", "writing"),
    ("This story is told in detail in the article, in a clear and factual style.", "writing"),
    ("好的！", "assistant"),
    ("当然，以下是一篇关于茶文化的文章：", "assistant"),
    ("以下是关于丝绸之路的短文。", "assistant"),
    ("希望这篇文章对你有帮助！", "assistant"),
    ("如果你还有其他问题，请随时告诉我。", "assistant"),
    ("作为一个AI助手，我无法品尝茶。", "assistant"),
    ("（字数：约800字）", "writing"),
    ("本文将介绍茶文化的历史。", "writing"),
    ("接下来我将继续写第二部分。", "writing"),
]

OWN = [
    "Of course, the keeper had to climb the stairs every night.",
    "Sure enough, the storm broke before dawn.",
    '"Sure, I will help you," she said, and took the lamp.',
    "“I hope this helps,” the keeper whispered as he handed over the map.",
    "「好的！」老人笑着说。",
    "Here is where the first lighthouse of Alexandria stood, on the island of Pharos.",
    "The lighthouse will stand for another century if it is maintained.",
    "The report has three findings: costs fell, wait times fell, and staff stayed.",
    "In 1822 Augustin Fresnel showed his lens to the commission.",
    "1. Learn the basics of Swift syntax: variables, constants and types.",
    "- Week 2: optionals, closures and error handling.",
    "for i in range(10): print(i)",
    "The sea was grey. The sea was cold. The sea was endless.",
    "茶起源于中国，已有数千年的历史。",
    "唐代陆羽著《茶经》，被后人尊为茶圣。",
    "这座城市有三千年的历史，共有十二座城门。",
    "He walked 300 miles along the coast.",
    "I'd like to thank the keepers, she wrote in the logbook.",
    "The next paragraph of the treaty set the harbour dues.",
    "2. Practise scales for ten minutes a day.",
    "The story of the keepers ends with the last light automated in 1998.",
    "The treaty's first article gave the port to the crown.",
    "She counted the words of the old letter one by one.",
]


@pytest.mark.parametrize(("sentence", "rule"), CHATTER)
def test_chatter_is_told(sentence: str, rule: str) -> None:
    assert Chatter().rule(sentence) == rule


@pytest.mark.parametrize("sentence", OWN)
def test_the_texts_own_sentences_pass(sentence: str) -> None:
    assert Chatter().rule(sentence) is None


def test_the_prompts_instructions_said_again_are_chatter() -> None:
    prompt = (
        'Write part 2, "The Fresnel lens", in about 280 words. Give concrete facts, names, '
        "dates, examples and explanations that belong to this part and to no other."
    )
    chatter = Chatter(prompt)
    said = "Give concrete facts, names, dates, examples and explanations for this part."
    assert chatter.rule(said) == "instructions"
    assert chatter.rule("写第二部分，给出具体的事实、名字和日期。") is None
    # the topic named in the prompt is the text's own subject
    assert chatter.rule("The Fresnel lens changed how far a light could be seen at sea.") is None
    plan = "Its plan:\n1. The Role of Lighthouses in Maritime Navigation (about 280 words)"
    titled = Chatter(plan, ["The Role of Lighthouses in Maritime Navigation"])
    assert titled.rule("The role of lighthouses in maritime navigation was never small.") is None
    assert titled.rule("Its plan: the role of lighthouses in maritime navigation.") is None
    zh = Chatter("请写一篇大约800字的文章：丝绸之路上的城市。")
    assert zh.rule("请写一篇大约800字的文章。") is not None
    assert zh.rule("丝绸之路上的城市是古代文明交流的明珠。") is None


PLAN_LINES = [
    'Part 3, "Extracurricular and Personal Discrimination against Asian America", in about '
    "333 words.",
    "Part 3, “Extracurricular and Personal Discrimination”, in about 333 words.",
    "Part 3, «Extracurricular Discrimination», in about 333 words.",
    "1. Admissions data (about 300 words)",
    "第三部分：「课外活动」（约300字）",
    "第三部分：课外活动（约300字）",
]

DIALOGUE = [
    '"I wrote 500 words today," she said.',
    "“I wrote 500 words today,” she said.",
    "«I wrote 500 words today», she said.",
    "「我今天写了五百字。」她说。",
    "『这篇文章将介绍茶的历史。』老师念道。",
    'I wrote 500 words today," she said, and closed the notebook.',  # a quote opened before
    'He called it "the article will change everything" and laughed.',
]


@pytest.mark.parametrize("line", PLAN_LINES)
def test_a_plan_line_is_chatter_whatever_it_quotes(line: str) -> None:
    assert Chatter().rule(line) == "writing"


@pytest.mark.parametrize("sentence", DIALOGUE)
def test_what_is_in_quotes_is_the_storys(sentence: str) -> None:
    assert Chatter().rule(sentence) is None


GUIDE = "Write a 1,000-word travel guide to Hong Kong for a first-time visitor."
REPORT = "Write a 1,200-word research report on admissions at Westbrook University."
GUIDE_ZH = "请写一份约1500字的香港旅游指南。"
REPORT_ZH = "请写一篇约1700字的调研报告，题目为《云溪县农产品电商发展调研报告》。"
PLAN_ZH = "请帮我写一份约1600字的入职90天工作计划，分成四个阶段。"

ITSELF = [
    ("", "The article provides a detailed analysis of the admissions data."),
    ("", "The article concludes that legacy preferences favour white applicants."),
    ("", "This essay explores what it means to mend something by hand."),
    (GUIDE, "This guide is designed to be easy to read."),
    (GUIDE, "The guide includes a detailed breakdown of costs."),
    (GUIDE, "In this guide, you will find the best dim sum in town."),
    (GUIDE, "The travel guide also offers practical tips for getting around."),
    (REPORT, "This research report highlights the importance of transparency."),
    (REPORT, "The report examines admissions data from 2019 to 2023."),
    ("", "本文将探讨茶文化的历史。"),
    ("", "本文旨在说明深度阅读的价值。"),
    ("", "本报告分析了云溪县农产品电商的发展现状。"),
    (REPORT_ZH, "这份调研报告主要分析了电商从业人员的变化。"),
    (GUIDE_ZH, "这份指南介绍了香港最值得去的十个地方。"),
    (GUIDE_ZH, "在这份指南中，你将找到最地道的茶餐厅。"),
    ("请写一篇书评。", "这篇书评主要分析了小说的结构。"),
]

OTHER_WORKS = [
    (REPORT, "The report by the Department of Education found that 43% of applicants were Asian."),
    (REPORT, "A 2019 article in Nature showed that test scores predict first-year grades."),
    (REPORT, "This report covers the fall 2024 entering class."),
    (REPORT, "This report describes outcomes; it does not explain them."),
    (REPORT, "The October report should show how each group's share changes."),
    (GUIDE, "The guide at the visitor centre costs HK$20."),
    (GUIDE, "The guide offers a short tour in English every morning."),
    (GUIDE, "A good guide highlights the harbour at night."),
    ("", "Roughly 80% of your running in this plan is easy."),
    ("", "好文章有时要读好几遍。"),
    ("", "父亲把那篇文章剪下来，贴在笔记本里。"),
    ("", "他在报上读到一篇文章，介绍了这座灯塔的历史。"),
    (REPORT_ZH, "该报告显示，全县电商从业人员约5200人。"),
    (REPORT_ZH, "本次调研采用线上问卷与个别访谈相结合的方式。"),
    (REPORT_ZH, "基本计划分析起来并不复杂。"),
    ("请写一篇书评。", "这本小说探讨了爱情与死亡。"),
    ("请写一篇书评。", "日本文化介绍了很多外来的东西。"),
    (PLAN_ZH, "这份计划覆盖入职后的前90天，分为四个阶段。"),
]


@pytest.mark.parametrize(("prompt", "sentence"), ITSELF)
def test_the_text_describing_itself_is_chatter(prompt: str, sentence: str) -> None:
    assert Chatter(prompt).rule(sentence) == "writing"


@pytest.mark.parametrize(("prompt", "sentence"), OTHER_WORKS)
def test_other_works_named_in_the_text_pass(prompt: str, sentence: str) -> None:
    assert Chatter(prompt).rule(sentence) is None


def test_a_subjects_own_request_is_instructions_and_its_figures_subject() -> None:
    topic = (
        "Please write a 1200-character research report on the discrimination against Asian "
        "Americans in admissions, using these figures: Asian American students made up "
        "43.04% of applicants and 39.8% of admitted students."
    )
    chatter = Chatter(f"Write the conclusion of a document on this topic: {topic}", [topic])
    assert chatter.rule(topic) == "instructions"
    opening = (
        "Please write a 1200-character research report on the discrimination against Asian "
        "Americans in admissions."
    )
    assert chatter.rule(opening) == "instructions"
    figures = "Asian American students made up 43.04% of applicants and 39.8% of admitted students."
    assert chatter.rule(figures) is None
    assert chatter.rule("The discrimination against Asian Americans in admissions.") is None
    zh = (
        "请写一篇关于美国大学招生中亚裔歧视的1200字研究报告，"
        "使用以下数据：亚裔学生占申请者的43.04%。"
    )
    zh_chatter = Chatter(f"为下面的题目写结论：{zh}", [zh])
    assert zh_chatter.rule("请写一篇关于美国大学招生中亚裔歧视的1200字研究报告。") == "instructions"
    assert zh_chatter.rule("亚裔学生占申请者的43.04%。") is None
    assert zh_chatter.rule("美国大学招生中亚裔歧视") is None
    # a plan's item is subject, imperative or not
    item = "Use version control from day one"
    planned = Chatter(f'Write part 3, "{item}", in about 300 words.', [item])
    assert planned.rule("Use version control from day one.") is None


def test_what_the_prompt_quotes_or_gives_is_the_texts_to_say() -> None:
    titled = Chatter("请以“把一件事做到底”为题，写一篇约1600字的议论文，论述坚持的意义。")
    assert titled.rule("# 把一件事做到底") is None
    labelled = Chatter("请写一篇发言稿，必须包含【开场白】【衔接下一部分】两个部分。")
    assert labelled.rule("【衔接下一部分】") is None
    figures = Chatter(
        "请写一篇调研报告。数据：68.4%的受访者睡前使用手机超过30分钟；请使用以下数据。"
    )
    assert figures.rule("调查显示，68.4%的受访者睡前使用手机超过30分钟。") is None
    assert figures.rule("请写一篇调研报告。") is not None


def test_units_are_complete_sentences_and_lines() -> None:
    text = "Sure! Here is the plan:\n\n1. Learn Swift. 2. Build an app\n茶很好。下一句"
    found = [text[a:b] for a, b in units(text)]
    assert found == [
        "Sure!",
        " Here is the plan:",
        "1. Learn Swift.",
        " 2. Build an app\n",
        "茶很好。",
    ]
    assert bare(" **1. Learn Swift.** ") == "Learn Swift."


def test_a_request_wrapped_over_lines_is_one_clause() -> None:
    """A template's instruction wraps mid-sentence; said again whole, it is the prompt's."""
    prompt = (
        "Write part 2 in about 300 words. Give concrete facts,\n"
        "names, figures, places, dates, examples and explanations that belong to this part "
        "and to\nno other."
    )
    said = (
        "Give concrete facts, names, figures, places, dates, examples and explanations that "
        "belong to this part and to no other."
    )
    assert Chatter(prompt).rule(said) == "instructions"
    assert Chatter(prompt).rule("Fresnel's lens of 1822 bent the light of one lamp.") is None


def test_walking_the_reader_through_is_the_writers_talk() -> None:
    """The bundled model's quickstart: "Now let me walk you through the process" is the
    writer's next step; in a speech it is the speaker's own."""
    said = "Now let me walk you through the fascinating process of how tea is made."
    assert Chatter("Explain how tea is made.").rule(said) == "writing"
    assert Chatter("Write a short talk on how tea is made.").rule(said) is None
