"""gen bench --checks: the corpus of good writing replayed through real section runs. Every
check cuts at most one place per 10,000 words in either language, and no English document
is cut at all."""

from __future__ import annotations

import pytest

from gen.bench.checks import load_corpus, run_checks


@pytest.fixture(scope="module")
def result() -> dict:
    return run_checks(None, lambda _: None)


def test_the_corpus_holds_both_languages_and_the_kinds_asked_for() -> None:
    docs = load_corpus()
    for lang in ("en", "zh"):
        mine = [d for d in docs if d.language == lang]
        assert sum(d.words for d in mine) >= 15_000
        assert {"plan", "report", "speech", "essay", "story", "dialogue"} <= {d.kind for d in mine}


def test_every_check_cuts_good_text_at_most_once_per_10k_words(result: dict) -> None:
    for lang, row in result["languages"].items():
        assert all(rate <= 1.0 for rate in row["per_10k"].values()), (lang, row)
    assert result["languages"]["en"]["places"] == {}
