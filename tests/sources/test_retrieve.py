from __future__ import annotations

from collections import OrderedDict

import bm25s
import pytest

from gen.sources import retrieve
from gen.sources.document import Block, Document, Location
from gen.sources.passages import Passage, passages
from gen.sources.render import render
from gen.sources.retrieve import rank, select

TEXTS = [
    "The depot on Depot Road has been in use since 1931.",
    "The single fare rose from €1.90 to €2.10 on 1 January 2025.",
    "Eight Lindqvist T9 trams entered service from 2 September 2025.",
    "Punctuality reached 91.4% within two minutes of the timetable.",
    "四号线延伸段于二零二五年三月十四日开通。",
]


def words(text: str) -> int:
    return len(text.split())


def corpus(*texts: str, path: str = "notes.md") -> list[Passage]:
    """One passage per text: each under its own heading."""
    blocks = [Block(t, Location(None, (f"Part {i}",), "line", i, i)) for i, t in enumerate(texts)]
    return passages([Document(path, "markdown", "0" * 64, tuple(blocks))])


def test_the_passage_with_the_fact_ranks_first() -> None:
    ps = corpus(*TEXTS)
    assert rank(ps, "What is the single fare?")[0].passage.text == TEXTS[1]
    assert rank(ps, "When did the new trams enter service?")[0].passage.text == TEXTS[2]
    assert rank(ps, "四号线什么时候开通")[0].passage.text == TEXTS[4]


def test_passages_without_a_shared_term_are_not_taken() -> None:
    ps = corpus(*TEXTS)
    assert [s.passage.text for s in rank(ps, "fare")] == [TEXTS[1]]
    assert rank(ps, "the of and") == [] and rank(ps, "") == [] and rank([], "fare") == []
    assert rank(corpus("The of and.", "It is."), "fare") == []  # no passage has a term
    assert select(ps, "zebra crossing", 1000, words) == []


def test_the_same_query_gives_the_same_answer() -> None:
    ps = corpus(*TEXTS, *TEXTS)  # every text twice: equal scores
    first = [(s.passage.id, s.score, s.order) for s in rank(ps, "fare trams 2025")]
    assert first == [(s.passage.id, s.score, s.order) for s in rank(ps, "fare trams 2025")]
    assert [order for _, _, order in first] == [1, 6, 2, 7]  # ties: the earlier first


def test_equal_scores_keep_passage_order() -> None:
    ps = [p for i in range(4) for p in corpus(f"Tram fares note {i}.", path=f"{i}.md")]
    got = rank(ps, "tram fares")
    assert len({s.score for s in got}) == 1
    assert [s.order for s in got] == [0, 1, 2, 3]


def test_the_rendered_block_fits_the_budget_exactly() -> None:
    ps = corpus(*TEXTS)
    ranked = rank(ps, "fare trams service punctuality depot 1931 2025")
    full = words(render([s.passage for s in ranked]))
    for budget in range(0, full + 2):
        chosen = select(ps, "fare trams service punctuality depot 1931 2025", budget, words)
        block = render([s.passage for s in chosen])
        assert words(block) <= budget
        left_out = [s for s in ranked if s not in chosen]
        for s in left_out:  # nothing more would have fitted
            assert words(render([*(c.passage for c in chosen), s.passage])) > budget
    assert len(select(ps, "fare trams service punctuality depot 1931 2025", full, words)) == len(
        ranked
    )


def test_a_passage_too_long_for_what_is_left_is_passed_over() -> None:
    long = "Fare " + "history " * 40 + "ends."
    ps = corpus("The fare is €2.10 and the fare for passes is €49.", long, "A fare note.")
    chosen = select(ps, "fare", 30, words)
    assert [s.passage.text for s in chosen] == [ps[0].text, "A fare note."]
    assert words(render([s.passage for s in chosen])) <= 30


def test_an_index_is_built_once_per_set_of_passages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieve, "_INDEXES", OrderedDict())
    built: list[int] = []
    index = bm25s.BM25.index

    def counted(self: bm25s.BM25, corpus: list[list[str]], **kwargs: object) -> object:
        built.append(len(corpus))
        return index(self, corpus, **kwargs)

    monkeypatch.setattr(bm25s.BM25, "index", counted)
    ps = corpus(*TEXTS, path="once.md")
    rank(ps, "fare")
    rank(ps, "trams")
    select(ps, "depot", 100, words)
    assert built == [len(ps)]
    rank(ps[:2], "fare")  # another set: another index
    assert built == [len(ps), 2]
    assert len(retrieve._INDEXES) <= retrieve.INDEXES_KEPT
