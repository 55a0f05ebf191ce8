"""Citation markers: each written form found, kept or dropped against the passages a section
was shown with the text mended, renumbered across the document, and listed as References."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gen.text.citations import (
    QUOTE_WORDS,
    Reference,
    check_section,
    find_markers,
    number_document,
    quote,
    references_markdown,
)
from gen.text.words import count_words


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    path: str = "notes.md"
    location: str = "line 1"
    text: str = ""


def shown(n: int, prefix: str = "p") -> list[Passage]:
    return [Passage(f"{prefix}{i}") for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("Trams run [3].", [(3,)]),
        ("Trams run [3, 5].", [(3, 5)]),
        ("Trams run [3][5].", [(3, 5)]),
        ("Trams run [3], [5].", [(3, 5)]),
        ("Trams run [5,3,3].", [(3, 5)]),  # ascending, once each
        ("Trams run [3-5].", [(3, 4, 5)]),
        ("Trams run [3–5].", [(3, 4, 5)]),  # en dash
        ("电车每五分钟一班【3】。", [(3,)]),
        ("电车每五分钟一班［3］。", [(3,)]),
        ("电车每五分钟一班【３，５】。", [(3, 5)]),  # full-width digits and comma
        ("电车【2、4】准时【1】。", [(2, 4), (1,)]),
        ("First [1]. Then [2].", [(1,), (2,)]),
    ],
)
def test_each_form_of_marker(text: str, numbers: list[tuple[int, ...]]) -> None:
    assert [m.numbers for m in find_markers(text, 5)] == numbers
    assert all(m.dropped == 0 for m in find_markers(text, 5))


@pytest.mark.parametrize(
    "text",
    [
        "See [the map](https://example.org/map).",
        "See [3](https://example.org/3).",  # a link whose text is a number
        "See [the map][3] for more.",  # a reference link's label
        "[3]: https://example.org/3",  # a link definition
        "A footnote[^1].\n\n[^1]: The note.",
        "- [ ] to do\n- [x] done",
        "Call `f([3])` first.",
        "```python\nxs = [3]\nys = [1, 2]\n```",
        "~~~\n【3】\n~~~",
        "No brackets at all, 🚋 only.",
    ],
)
def test_what_is_not_a_marker(text: str) -> None:
    assert find_markers(text, 5) == []
    assert check_section(text, shown(5)).text == text


@pytest.mark.parametrize(
    ("text", "mended", "dropped"),
    [
        ("In [2025] the fleet grew.", "In the fleet grew.", 1),  # a year past n is no passage
        ("Trams run [9].", "Trams run.", 1),
        ("Trams run [0], buses too.", "Trams run, buses too.", 1),
        ("Trams run [9] all night.", "Trams run all night.", 1),
        ("Trams run ([9]).", "Trams run.", 1),
        ("Trams run.[9]\n[8] Buses too.", "Trams run.\nBuses too.", 2),
        ("Trams run.\n[9]\nBuses too.", "Trams run.\nBuses too.", 1),
        ("电车运行【9】。", "电车运行。", 1),
        ("电车【9】运行。", "电车运行。", 1),
        ("Trams run [2][9].", "Trams run [2].", 1),
        ("Trams run [2, 9].", "Trams run [2].", 1),
        ("Trams run [4-9].", "Trams run [4, 5].", 1),  # the range's part past n
        ("Trams run [5-3].", "Trams run.", 1),
        ("Trams run 【２】.", "Trams run [2].", 0),  # kept markers are written one way
    ],
)
def test_out_of_range_is_dropped_and_the_text_mended(text: str, mended: str, dropped: int) -> None:
    checked = check_section(text, shown(5))
    assert (checked.text, checked.dropped) == (mended, dropped)
    assert "  " not in checked.text and "[]" not in checked.text and "()" not in checked.text


def test_a_checked_section_points_at_passage_ids() -> None:
    passages = [Passage("handbook.md#3"), Passage("fares.csv#12"), Passage("map.html#1")]
    checked = check_section("票价两欧元【2】。Trams run [1][3] daily [9].", passages)
    assert checked.text == "票价两欧元[2]。Trams run [1, 3] daily."
    assert [c.passages for c in checked.citations] == [
        ("fares.csv#12",),
        ("handbook.md#3", "map.html#1"),
    ]
    assert [checked.text[c.start : c.end] for c in checked.citations] == ["[2]", "[1, 3]"]
    assert (checked.cited, checked.dropped) == (3, 1)


def test_the_same_passage_shown_twice_is_cited_once() -> None:
    passages = [Passage("a#1"), Passage("b#1"), Passage("a#1")]
    checked = check_section("Trams [1, 3].", passages)
    assert checked.citations[0].passages == ("a#1",)


def test_renumbering_follows_first_citation_across_sections() -> None:
    first = check_section("Fares rose [2]. Trams run [1].", [Passage("tram"), Passage("fare")])
    nothing = check_section("A section that cites nothing: 无引用。", [Passage("tram")])
    second = check_section(
        "电车准时【2】，票价上涨【1】。Both [1][2].", [Passage("fare"), Passage("bus")]
    )
    texts, references = number_document([first, nothing, second])
    assert texts == [
        "Fares rose [1]. Trams run [2].",
        "A section that cites nothing: 无引用。",
        "电车准时[3]，票价上涨[1]。Both [1, 3].",
    ]
    assert [(r.number, r.passage) for r in references] == [(1, "fare"), (2, "tram"), (3, "bus")]


def test_a_local_marker_may_become_out_of_order_globally() -> None:
    earlier = check_section("Buses [1].", [Passage("bus")])
    later = check_section("Trams and buses [1, 2].", [Passage("tram"), Passage("bus")])
    texts, _ = number_document([earlier, later])
    assert texts[1] == "Trams and buses [1, 2]."  # bus is 1, tram 2: ascending again


def test_no_sections_and_no_citations() -> None:
    assert number_document([]) == ([], [])
    checked = check_section("", [])
    assert (checked.text, checked.citations, checked.dropped) == ("", (), 0)
    assert check_section("Trams [1].", []).text == "Trams."
    assert references_markdown([]) == ""


TRAMS = (
    "## Network\n\nLyon opened its first tram line, T1, in 2001. The network now has eight "
    "lines and carries about 300,000 passengers on an ordinary weekday. Trams on T1 run every "
    "five minutes at peak hours."
)


def test_the_quote_is_the_sentence_that_bears_the_claim() -> None:
    assert quote(TRAMS, ["At peak times trams run every 5 minutes on line T1."]) == (
        "Trams on T1 run every five minutes at peak hours."
    )
    assert quote(TRAMS, ["Ridership is about 300,000 a day."]).startswith("The network now")
    assert quote(TRAMS, ["Nothing in common here."]) == "Network"  # the first sentence


def test_a_long_quote_is_cut_on_a_word() -> None:
    long = " ".join(f"word{i}" for i in range(40)) + "."
    cut = quote(long, [])
    assert cut == " ".join(f"word{i}" for i in range(QUOTE_WORDS)) + "…"
    zh = "里昂的电车网络" * 10 + "。"
    cut_zh = quote(zh, [])
    assert cut_zh.endswith("…") and count_words(cut_zh) == QUOTE_WORDS


def test_references_markdown() -> None:
    references = [
        Reference(1, "a", "notes/trams.md", "line 3", 'Trams are "fast".'),
        Reference(2, "b", "资料/票价.html", "", "单程票两欧元。"),
    ]
    assert references_markdown(references) == (
        "## References\n\n"
        "[1] notes/trams.md, line 3: \"Trams are 'fast'.\"\n\n"
        '[2] 资料/票价.html: "单程票两欧元。"\n'
    )
    assert references_markdown(references, heading="参考文献").startswith("## 参考文献\n\n[1] ")


def test_references_from_the_document() -> None:
    passages = [
        Passage("t", "notes/trams.md", "Network, line 3", TRAMS),
        Passage("f", "票价.csv", "row 2", "单程票价为2.10欧元。儿童免费乘车。"),
    ]
    checked = check_section("Trams come every five minutes at peak [1]. 儿童免费【2】。", passages)
    _, references = number_document([checked])
    assert references_markdown(references, "参考文献") == (
        "## 参考文献\n\n"
        '[1] notes/trams.md, Network, line 3: "Trams on T1 run every five minutes at peak hours."'
        '\n\n[2] 票价.csv, row 2: "儿童免费乘车。"\n'
    )


def test_the_same_input_gives_the_same_output() -> None:
    text = "Trams [2][1]. 电车【3】。Buses [7]."
    runs = [number_document([check_section(text, shown(3))]) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
