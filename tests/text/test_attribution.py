"""gen's own citations: a sentence the model left uncited gets the shown passage that bears it
out, only where one does, before its closing stop; headings, lead-ins and cited sentences
are left alone."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gen.text.attribution import attribute


@dataclass(frozen=True)
class P:
    id: str
    text: str
    path: str = "notes.md"
    location: str = ""


SHOWN = [
    P("a#1", "Kessling's trams carried 48.7 million boardings in 2025, up from 45.9 million."),
    P("a#2", "Kessling's Line 4 extension to Orrin Quay opened on 14 March 2025 with four stops."),
    P("b#1", "上海的电车在二〇二五年运送了三百万人次，比去年多一成。"),
]


@pytest.mark.parametrize(
    ("text", "expected", "added"),
    [
        (  # borne out by the second passage: its number before the stop
            "The Line 4 extension to Orrin Quay opened on 14 March 2025.",
            "The Line 4 extension to Orrin Quay opened on 14 March 2025 [2].",
            1,
        ),
        (  # a figure no passage holds: not cited, however close the words
            "Kessling's trams carried 52 million boardings in 2025.",
            "Kessling's trams carried 52 million boardings in 2025.",
            0,
        ),
        (  # the model's own marker stands
            "Trams carried 48.7 million boardings in 2025 [2].",
            "Trams carried 48.7 million boardings in 2025 [2].",
            0,
        ),
        (  # a heading and a lead-in claim nothing
            "## Trams carried 48.7 million boardings\n\nKessling's trams in 2025, 48.7 million:",
            "## Trams carried 48.7 million boardings\n\nKessling's trams in 2025, 48.7 million:",
            0,
        ),
        (  # only the subject's name in common: no sign of which passage
            "Kessling's people like Kessling's trams.",
            "Kessling's people like Kessling's trams.",
            0,
        ),
        (  # Chinese, closing quote kept after the marker
            "上海的电车在二〇二五年运送了三百万人次。",
            "上海的电车在二〇二五年运送了三百万人次 [3]。",
            1,
        ),
    ],
)
def test_a_sentence_is_cited_where_a_shown_passage_bears_it_out(
    text: str, expected: str, added: int
) -> None:
    result = attribute(text, SHOWN)
    assert (result.text, result.added) == (expected, added)


def test_nothing_shown_nothing_added() -> None:
    text = "The Line 4 extension to Orrin Quay opened on 14 March 2025."
    assert attribute(text, []).text == text
