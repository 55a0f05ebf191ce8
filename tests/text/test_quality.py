from __future__ import annotations

import dataclasses
import random

import pytest

from gen.text.quality import (
    Scanner,
    TextQuality,
    Token,
    Unit,
    distinct_n,
    measure,
    overlap,
    repeated_sentences,
    scan,
    sentences,
    tokens,
)
from gen.text.words import count_words

MARKDOWN = """# Printing in Europe

The press changed how ideas moved. Books became cheap!

- **Cost:** Paper was the largest expense for early printers.
- Second item without an end
1. First numbered step of the outline
> Quoted line that a reader sent in.

| Year | Event |
|------|-------|
| 1450 | Gutenberg builds his press in Mainz |

```python
print("this line is code and not a sentence")
```
"""


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Hello, world!",
        "state-of-the-art isn't — hard",
        "印刷术改变了世界。",
        "Gutenberg 发明了 printing press",
        "ひらがな カタカナ・ー",
        "1. 2. 3.",
        "— … !!",
        "Party time 🎉🎉 with 🍕pizza and 👨‍👩‍👧 family!",
        "它建于明朝。1420年，皇帝迁都北京。Hello。World",
        MARKDOWN,
    ],
)
def test_tokens_are_count_words_words(text: str) -> None:
    assert len(tokens(text)) == count_words(text)


def test_tokens_are_lower_case_without_edge_punctuation() -> None:
    assert tokens("Hello, WORLD! “Quoted” horse-drawn (1450) 长城 🎉 🍕pizza") == [
        *("hello", "world", "quoted", "horse-drawn", "1450", "长", "城", "pizza"),
    ]


def test_distinct_n() -> None:
    assert distinct_n("a b c d a b c d") == pytest.approx(4 / 5)
    assert distinct_n("one two three") == 1.0
    assert distinct_n("") == 1.0
    assert distinct_n("哈哈哈哈哈哈") == pytest.approx(1 / 3)
    assert distinct_n("🎉 go 🎉 go 🎉 go", n=1) == pytest.approx(1 / 3)
    assert distinct_n("the cat the dog", n=2) == 1.0
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        distinct_n("a b", n=0)


def test_sentences_skip_markers_headings_tables_and_code() -> None:
    assert sentences(MARKDOWN) == [
        "The press changed how ideas moved.",
        "**Cost:** Paper was the largest expense for early printers.",
        "Second item without an end",
        "First numbered step of the outline",
        "Quoted line that a reader sent in.",
    ]


def test_sentences_chinese_and_short_units() -> None:
    text = "长城很长。它东起山海关，西至嘉峪关。“秦始皇下令修建。”他说。Yes. Hi there!"
    assert sentences(text) == ["它东起山海关，西至嘉峪关。", "“秦始皇下令修建。”"]


def test_repeated_sentences_normalise_case_space_and_punctuation() -> None:
    text = (
        "The wall is very long. It was built over centuries. "
        "the WALL is   very long! Something else entirely here.\n"
        "- The wall, is very long\n"
        "长城是中国古代的伟大工程。长城是中国古代的伟大工程！"
        "Fun 🎉 party at the beach. Fun party at the beach 🍕."
    )
    assert repeated_sentences(text) == (4, 9)
    assert repeated_sentences("") == (0, 0)


def test_overlap() -> None:
    earlier = "the quick brown fox jumps over the lazy dog and runs away"
    assert overlap("The quick brown fox jumps over the lazy dog, then sleeps.", earlier) == (
        pytest.approx(2 / 4)
    )
    assert overlap("too short", earlier) == 0.0
    assert overlap("completely different words that never appeared anywhere before", earlier) == 0.0
    assert overlap("长城是中国古代的伟大工程", "我们都知道长城是中国古代的伟大工程。", n=4) == 1.0


def test_measure() -> None:
    text = "The press changed the world. The press changed the world. 印刷术改变了整个世界。🎉"
    quality = measure(text)
    assert quality == TextQuality(
        words=count_words(text),
        distinct_4=distinct_n(text),
        repeated_sentences=1,
        sentences=3,
        repeated_share=1 / 3,
    )
    assert measure("") == TextQuality(0, 1.0, 0, 0, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        quality.words = 3  # type: ignore[misc]


def test_scanner_reports_the_same_whatever_the_split() -> None:
    text = MARKDOWN + "长城很长。它东起山海关，西至嘉峪关。“秦始皇下令修建。”他说。🎉 Done.\n"
    whole = scan(text)
    assert any(isinstance(event, Unit) for event in whole)
    assert any(isinstance(event, Token) for event in whole)
    rng = random.Random(7)
    for sizes in ([1] * len(text), [rng.randint(1, 9) for _ in text]):
        scanner, events, at = Scanner(), [], 0
        for size in sizes:
            events += scanner.feed(text[at : at + size])
            at += size
        assert events + scanner.finish() == whole
