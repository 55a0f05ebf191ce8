"""A document's title from its topic: a short topic is its own title; a whole request
gives the subject it names, in whole words, English and Chinese."""

from __future__ import annotations

import pytest

from gen.text.headline import headline


@pytest.mark.parametrize(
    ("topic", "title"),
    [
        ("The history of lighthouses", "The history of lighthouses"),
        ("Bread, butter and jam", "Bread, butter and jam"),
        ("Hong Kong: a travel guide", "Hong Kong: a travel guide"),
        ("长城", "长城"),
        (
            "Please write a 1200-character research report on the discrimination against "
            "Asian Americans in college admissions, using these figures: 43.04%, 0.67% "
            "and 7.27%.",
            "Discrimination against Asian Americans in college admissions",
        ),
        ("A Hong Kong Travel Guide, approximately 3000 words", "Hong Kong Travel Guide"),
        ("Write a travel guide to Hong Kong, about 3000 words.", "Travel guide to Hong Kong"),
        (
            "Write a 600-word learning plan for iOS development that covers Swift, "
            "Objective-C and Xcode over twelve weeks.",
            "Learning plan for iOS development",
        ),
        (
            "请写一篇关于比亚迪新能源汽车技术的研究报告，字数约2000字。",
            "比亚迪新能源汽车技术的研究报告",
        ),
        ("请以“我的母亲”为题写一篇作文。", "我的母亲"),
        ('Write a short story titled "The Last Keeper" about a lighthouse.', "The Last Keeper"),
        (
            "Write about the role of women in the industrial revolution of nineteenth "
            "century Britain and its effects on family life and wages",
            "Role of women in the industrial revolution of nineteenth century Britain",
        ),
    ],
)
def test_a_title_from_a_topic(topic: str, title: str) -> None:
    assert headline(topic) == title


def test_a_long_title_ends_on_a_whole_word_and_no_function_word() -> None:
    topic = " ".join(["lighthouse"] * 10 + ["of", "the"] + ["keeper"] * 5)
    title = headline(topic)
    assert title.split()[-1] == "lighthouse" and len(title.split()) == 10
    assert title.startswith("Lighthouse lighthouse")
