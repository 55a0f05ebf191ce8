"""Support measured: a paraphrase of what a passage says is supported, a claim the passage
does not make is not, a figure no passage holds is listed; the table below is the
calibration the module's docstring cites for its threshold."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gen.text.citations import check_section
from gen.text.support import SUPPORTED, document_support, measure_section


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    text: str
    path: str = "notes.md"
    location: str = ""


TRAMS = Passage(
    "trams",
    "Lyon opened its first tram line, T1, in 2001. The network now has eight lines and "
    "carries about 300,000 passengers on an ordinary weekday. Trams on T1 run every five "
    "minutes at peak hours.",
)
FARES = Passage(
    "fares",
    "A single ticket costs 2.10 euros and is valid for one hour. Children under four travel "
    "free. The monthly pass was introduced in 2015 at 65 euros.",
)
SHANGHAI = Passage(
    "shanghai",
    "上海的有轨电车于1908年开通，由英商经营。1975年，最后一条有轨电车线路停止运营。"
    "2010年，张江有轨电车开通。",
)

PARAPHRASES = [
    ("The first tram line in Lyon, T1, opened in 2001 [1].", TRAMS),
    (
        "Today the network counts eight lines and carries roughly 300,000 riders a weekday [1].",
        TRAMS,
    ),
    ("At peak hours, trams on line T1 come every five minutes [1].", TRAMS),
    ("A single ticket is priced at 2.10 euros and stays valid for an hour [1].", FARES),
    ("Children younger than four ride for free [1].", FARES),
    ("The monthly pass arrived in 2015 and cost 65 euros [1].", FARES),
    ("上海有轨电车在1908年开通，由英商经营[1]。", SHANGHAI),
    ("最后一条有轨电车线路在1975年停止运营【1】。", SHANGHAI),
    ("张江有轨电车于2010年开通[1]。", SHANGHAI),
]
NOT_SAID = [  # the passage's subject, a claim it does not make
    ("Lyon's trams are popular with tourists because they are quiet and clean [1].", TRAMS),
    ("The tram network suffers frequent breakdowns during winter storms [1].", TRAMS),
    ("Ticket prices are among the lowest in Europe, according to travellers [1].", FARES),
    ("Students receive discounts on monthly passes at every university [1].", FARES),
    ("上海电车曾经是城市交通的骄傲，市民非常喜爱[1]。", SHANGHAI),
    ("电车票价低廉，深受游客欢迎[1]。", SHANGHAI),
    ("Children under four travel free [1].", TRAMS),  # true, but cited to the wrong passage
]


def support_of(text: str, passage: Passage) -> tuple[float, bool, tuple[str, ...]]:
    (sentence,) = measure_section(check_section(text, [passage])).sentences
    return sentence.support, sentence.supported, sentence.missing


@pytest.mark.parametrize(("text", "passage"), PARAPHRASES)
def test_a_paraphrase_is_supported(text: str, passage: Passage) -> None:
    support, supported, _ = support_of(text, passage)
    assert supported and support >= 0.6


@pytest.mark.parametrize(("text", "passage"), NOT_SAID)
def test_a_claim_the_passage_does_not_make_is_not(text: str, passage: Passage) -> None:
    support, supported, _ = support_of(text, passage)
    assert not supported and support < 0.4 < SUPPORTED


@pytest.mark.parametrize(
    ("text", "passage", "missing"),
    [
        ("Trams on T1 run every seven minutes at peak hours [1].", TRAMS, ("7",)),
        ("A single ticket costs 3.50 euros and is valid for one hour [1].", FARES, ("3.50",)),
        ("Lyon opened its first tram line, T4, in 2001 [1].", TRAMS, ("T4",)),
        ("上海的有轨电车于1906年开通，由英商经营[1]。", SHANGHAI, ("1906",)),
    ],
)
def test_an_invented_figure_is_not_supported(
    text: str, passage: Passage, missing: tuple[str, ...]
) -> None:
    support, supported, found_missing = support_of(text, passage)
    assert support >= SUPPORTED and not supported  # the overlap alone would pass it
    assert found_missing == missing


def test_sentences_share_their_markers_and_a_sentence_cites_all_its_passages() -> None:
    text = "Lyon opened T1 in 2001 [1] and a single ticket costs 2.10 euros [2]. 无引用的句子。"
    section = measure_section(check_section(text, [TRAMS, FARES]))
    (sentence,) = section.sentences
    assert sentence.passages == ("trams", "fares") and sentence.supported
    assert sentence.text == "Lyon opened T1 in 2001 and a single ticket costs 2.10 euros."
    assert (section.citations, section.supported, section.supported_share) == (2, 1, 1.0)


def test_facts_no_shown_passage_holds_are_listed() -> None:
    text = (
        "## 2024 in review\n\n"  # a heading claims nothing
        "Fares were set in 2015 [1]. Mayor Jonas Berg opened line T9 in 2019. "
        "Lyon has eight lines [1]. 张江有轨电车于2012年开通。"
    )
    section = measure_section(check_section(text, [TRAMS, FARES]))
    assert [(f.sentence, f.facts) for f in section.unsupported_facts] == [
        ("Mayor Jonas Berg opened line T9 in 2019.", ("T9", "2019", "Jonas", "Berg")),
        ("张江有轨电车于2012年开通。", ("2012",)),
    ]
    # 2015 is in FARES though [1] is TRAMS: listed as missing from what it cites, not as a
    # fact no passage holds
    cited = {s.text: s for s in section.sentences}
    assert cited["Fares were set in 2015."].missing == ("2015",)


def test_dropped_markers_are_counted_and_no_citation_means_no_share() -> None:
    section = measure_section(check_section("Trams run [4]. 电车【5】。", [TRAMS]))
    assert (section.citations, section.dropped, section.sentences) == (0, 2, ())
    assert section.supported_share is None and section.mean_support is None


def test_a_marker_alone_is_no_claim() -> None:
    section = measure_section(check_section("It is so [1]. 就是这样【1】。", [TRAMS]))
    assert section.citations == 2 and section.sentences == ()


def test_the_document_counts_sentences_not_sections() -> None:
    one = measure_section(check_section(PARAPHRASES[0][0], [TRAMS]))
    three = measure_section(
        check_section(" ".join(t for t, _ in NOT_SAID[:2]) + " 7 + 5 = 12 [4].", [TRAMS])
    )
    document = document_support([one, three])
    assert (document.citations, document.dropped, document.cited_sentences) == (3, 1, 3)
    assert document.supported == 1 and document.supported_share == 1 / 3
    assert document.mean_support == pytest.approx(
        (one.sentences[0].support + sum(s.support for s in three.sentences)) / 3
    )
    assert document.unsupported_facts == 1  # "7 + 5 = 12": 7 and 12 are in no passage
    assert document_support([]).supported_share is None


def test_the_same_section_gives_the_same_figures() -> None:
    text = " ".join(t for t, _ in PARAPHRASES + NOT_SAID)
    runs = {measure_section(check_section(text, [TRAMS, FARES, SHANGHAI])) for _ in range(3)}
    assert len(runs) == 1
