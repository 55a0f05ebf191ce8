from __future__ import annotations

import hashlib

import pytest

from gen.sources.document import Block, Document, Location
from gen.sources.passages import passages, split
from gen.text.words import count_words


def document(kind: str, *blocks: Block, path: str = "notes.md") -> Document:
    return Document(path, kind, "0" * 64, blocks)


def lines(first: int, last: int, heading: tuple[str, ...] = ()) -> Location:
    return Location(None, heading, "line", first, last)


def test_small_neighbours_of_one_place_share_a_passage() -> None:
    doc = document(
        "markdown",
        Block("First paragraph.", lines(3, 3, ("A",))),
        Block("Second\nparagraph.", lines(5, 6, ("A",))),
        Block("Other heading.", lines(9, 9, ("A", "B"))),
    )
    got = split(doc, words=50)
    assert [(p.id, p.text, p.location) for p in got] == [
        ("notes.md#1", "First paragraph.\n\nSecond\nparagraph.", lines(3, 6, ("A",))),
        ("notes.md#2", "Other heading.", lines(9, 9, ("A", "B"))),
    ]
    assert got[0].sha256 == hashlib.sha256(got[0].text.encode()).hexdigest()
    assert got[0].words == 4


def test_a_long_paragraph_is_cut_at_sentences_with_their_lines() -> None:
    text = "One two three four.\nFive six seven eight. Nine ten\neleven twelve."
    got = split(document("text", Block(text, lines(10, 12))), words=5)
    assert [(p.text, p.location.first, p.location.last) for p in got] == [
        ("One two three four.", 10, 10),
        ("Five six seven eight.", 11, 11),
        ("Nine ten\neleven twelve.", 11, 12),
    ]
    assert all(p.words <= 5 for p in got)


def test_no_cut_inside_a_word_even_without_any_boundary() -> None:
    text = " ".join(f"supercalifragilistic{i}" for i in range(25))
    got = split(document("text", Block(text, lines(1, 1))), words=10)
    assert [p.words for p in got] == [10, 10, 5]
    assert " ".join(p.text for p in got) == text


def test_an_abbreviation_before_a_lower_case_word_does_not_end_a_sentence() -> None:
    text = "Fares rose, e.g. the single fare. Passes rose too."
    got = split(document("text", Block(text, lines(1, 1))), words=6)
    assert [p.text for p in got] == ["Fares rose, e.g. the single fare.", "Passes rose too."]


def test_chinese_is_cut_after_its_sentence_ends() -> None:
    text = (
        "凯斯林有轨电车二零二五年载客四千八百七十万人次。"
        "四号线延伸段于三月十四日开通！准点率是多少？百分之九十一点四。"
    )
    got = split(document("text", Block(text, lines(1, 1)), path="年报.txt"), words=25)
    assert [p.text for p in got] == [
        "凯斯林有轨电车二零二五年载客四千八百七十万人次。",
        "四号线延伸段于三月十四日开通！准点率是多少？",
        "百分之九十一点四。",
    ]
    assert [p.id for p in got] == ["年报.txt#1", "年报.txt#2", "年报.txt#3"]
    assert all(count_words(p.text) <= 25 for p in got)


def test_chinese_without_punctuation_is_cut_between_characters() -> None:
    text = "电" * 25
    got = split(document("text", Block(text, lines(1, 1))), words=10)
    assert [p.text for p in got] == ["电" * 10, "电" * 10, "电" * 5]


def test_pages_never_share_a_passage() -> None:
    doc = document(
        "pdf",
        Block("Page one.", Location(page=1)),
        Block("Page two.", Location(page=2)),
        path="r.pdf",
    )
    got = split(doc)
    assert [(p.text, p.location.label()) for p in got] == [
        ("Page one.", "page 1"),
        ("Page two.", "page 2"),
    ]


def test_rows_share_a_passage_one_per_line() -> None:
    rows = [
        Block(f"line: {n}; riders: {n * 100}", Location(unit="row", first=n, last=n))
        for n in (2, 3, 4)
    ]
    (got,) = split(document("csv", *rows, path="f.csv"))
    assert got.text == "line: 2; riders: 200\nline: 3; riders: 300\nline: 4; riders: 400"
    assert got.location.label() == "rows 2-4"


def test_passages_of_several_documents_keep_their_order() -> None:
    a = document("text", Block("Alpha.", lines(1, 1)), path="a.txt")
    b = document("text", Block("Beta.", lines(1, 1)), path="b.txt")
    assert [p.id for p in passages([a, b])] == ["a.txt#1", "b.txt#1"]


def test_words_must_be_positive() -> None:
    with pytest.raises(ValueError, match="words must be at least 1, got 0"):
        split(document("text"), words=0)
