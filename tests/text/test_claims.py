"""Sentences and their terms: where English and Chinese sentences end (abbreviations,
decimals, markers after a stop, wrapped lines, code), and the terms, figures and names a
sentence is looked up by."""

from __future__ import annotations

import pytest

from gen.text.claims import claim, code_regions, sentence_spans, stem, terms


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in sentence_spans(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Trams run. Buses wait! Why? Because.", ["Trams run.", "Buses wait!", "Why?", "Because."]),
        ("It costs 2.10 euros. Done.", ["It costs 2.10 euros.", "Done."]),
        (
            "Dr. Ng met J. Smith in the U.S. last year.",
            ["Dr. Ng met J. Smith in the U.S. last year."],
        ),
        ("Use e.g. trams. Or buses.", ["Use e.g. trams.", "Or buses."]),
        (
            "Trams run [1]. Buses wait.[2] Cars [3].",
            ["Trams run [1].", "Buses wait.[2]", "Cars [3]."],
        ),
        ("Trams run. [1] [2] Buses wait.", ["Trams run. [1] [2]", "Buses wait."]),
        ("He said “stop.” Then left.", ["He said “stop.”", "Then left."]),
        (
            "电车于1908年开通。它们很受欢迎！真的吗？",
            ["电车于1908年开通。", "它们很受欢迎！", "真的吗？"],
        ),
        ("电车开通【1】。票价两欧元。[2]", ["电车开通【1】。", "票价两欧元。[2]"]),
        (
            "A wrapped\nline of a source.\n\nNext paragraph",
            ["A wrapped\nline of a source.", "Next paragraph"],
        ),
        (
            "# Title\nText under it\n- one item\n- two 🚋",
            ["# Title", "Text under it", "- one item", "- two 🚋"],
        ),
        ("| a | 2019 |\n| b | 2020 |", ["| a | 2019 |", "| b | 2020 |"]),
        (
            "1. Trams run. Buses too.\n10. Fares rose.",
            ["1. Trams run.", "Buses too.", "10. Fares rose."],
        ),
        ("Before.\n```\nx = 1. y = 2.\n```\nAfter.", ["Before.", "After."]),
        ("", []),
    ],
)
def test_sentence_spans(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_code_regions() -> None:
    text = "a `x [1]` b\n```\n[2]\n```\n`c` and ``d ` e``"
    assert [text[s:e] for s, e in code_regions(text)] == [
        "`x [1]`",
        "```\n[2]\n```\n",
        "`c`",
        "``d ` e``",
    ]
    unclosed = "```\nnever closed [1]"
    assert code_regions(unclosed) == [(0, len(unclosed))]


@pytest.mark.parametrize(
    ("forms", "key"),
    [
        (["tram", "trams", "Trams"], "tram"),
        (["open", "opens", "opened", "opening"], "open"),
        (["carry", "carries", "carried"], "carry"),
        (["run", "runs", "running"], "run"),
        (["bus", "buses"], "bus"),
        (["city", "cities", "city's"], "city"),
        (["stop", "stopped", "stops"], "stop"),
    ],
)
def test_stem_gives_one_key_to_a_word_s_forms(forms: list[str], key: str) -> None:
    assert {stem(f) for f in forms} == {key}


def test_claim_terms_figures_and_names() -> None:
    said = claim(
        "In 2001 Lyon's mayor, Anna Berg, opened line T1 with twelve trams for 1,200 riders."
    )
    assert said.numbers == ("2001", "T1", "12", "1200")
    assert said.names == ("Lyon's", "Anna", "Berg")  # "In" starts the sentence
    assert {
        "2001",
        "t1",
        "12",
        "1200",
        "lyon",
        "mayor",
        "anna",
        "berg",
        "open",
        "lin",
    } <= said.terms
    assert not {"in", "with", "for", "the"} & said.terms
    assert claim("**The** first line.").names == ()  # emphasis is no name


def test_chinese_terms_are_bigrams_cut_at_particles() -> None:
    said = claim("上海的电车在1908年开通。")
    assert said.numbers == ("1908",)
    assert said.terms == {"上海", "电车", "1908", "年开", "开通"}
    assert claim("就是这样。").terms == set()


def test_terms_of_a_passage_cover_all_its_sentences() -> None:
    found = terms("## Fares\n\nA ticket costs 2.10 euros.\n\n儿童免费乘车。")
    assert {"far", "ticket", "cost", "2.10", "euro", "儿童", "免费"} <= found
