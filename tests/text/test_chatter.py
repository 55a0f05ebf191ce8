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
