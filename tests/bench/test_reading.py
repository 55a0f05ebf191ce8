"""The reader's figures of a bench document, from fixed manifests: sums, the weighted share
in the wanted script, the worst of chatter and relevance, sections under S_l 80 with the
reason their manifest entry gives (or none), fields a manifest does not record read as None;
and over seeds, the worst seed's."""

from __future__ import annotations

from typing import Any

from gen.bench.reading import reader_figures, reader_row


def section(key: str, **fields: Any) -> dict[str, Any]:
    """A manifest's section entry as it is written before chatter and relevance."""
    entry = {"id": key, "section": key.split("-")[0], "status": "completed", "words": 100,
             "target_words": None, "length_plan": None, "length_score": None,
             "truncated": False, "reasons": [], "junk": 0, "language_share": None}  # fmt: skip
    return entry | fields


PLAN_WHY = "max_rounds 2 x max_tokens 256 = 512 tokens hold about 380 words"
MANIFEST: dict[str, Any] = {
    "sections": [
        section("outline", junk=9, language_share=0.1, chatter=7),  # hidden: not counted
        section("part-1", words=300, target_words=400, length_score=83.3, junk=2,
                language_share=1.0, chatter=1, chatter_share=0.02, relevance=0.61,
                rounds=[{"repetition": {"kind": "refrain"}}, {"repetition": None},
                        {"repetition": {"kind": "refrain"}}, {}],
                yields=[{"kind": "refrain", "detail": "5 of the last 6"}]),
        section("part-2", words=100, target_words=400, length_score=0.0, junk=1,
                language_share=0.6, truncated=True, reasons=["loops", "truncated"],
                chatter=2, chatter_share=0.1, relevance=None,
                rounds=[{"repetition": {"kind": "chatter"}}]),
        section("part-3", words=200, target_words=400, length_score=50.0, relevance=0.4,
                length_plan={"rounds": 2, "why": PLAN_WHY}),
        section("part-4", words=150, target_words=400, length_score=33.3),
        section("part-5", status="failed", words=0, target_words=400, length_score=None,
                reasons=["error"]),
    ],
    "metrics": {"sections_failed": 2, "failed_reasons": {"error": 1, "loops": 1,
                                                         "truncated": 1}},
}  # fmt: skip
SHOWN = {"part"}


def test_a_documents_figures_from_its_manifest() -> None:
    f = reader_figures(MANIFEST, SHOWN)
    assert f["junk"] == 3
    # weighted by words over the completed sections that are held to a script
    assert f["language_share"] == round((300 * 1.0 + 100 * 0.6) / 400, 3) == 0.9
    assert (f["chatter"], f["chatter_share"], f["relevance"]) == (3, 0.1, 0.4)
    assert (f["sections_failed"], f["truncated"]) == (2, 1)
    assert f["cuts"] == {"chatter": 1, "refrain": 2} and f["yields"] == {"refrain": 1}
    assert f["failed_reasons"] == {"error": 1, "loops": 1, "truncated": 1}
    assert f["misses"] == [
        {"section": "part-2", "words": 100, "target_words": 400, "length_score": 0.0,
         "why": "loops; truncated"},
        {"section": "part-3", "words": 200, "target_words": 400, "length_score": 50.0,
         "why": PLAN_WHY},
        {"section": "part-4", "words": 150, "target_words": 400, "length_score": 33.3,
         "why": None},
        {"section": "part-5", "words": 0, "target_words": 400, "length_score": None,
         "why": "error"},
    ]  # fmt: skip


def test_fields_the_manifest_does_not_record_read_as_none() -> None:
    """A manifest from before chatter and relevance, and before junk and language_share;
    a section without a target is never off it."""
    old = {"sections": [{"id": "body", "section": "body", "status": "completed", "words": 90,
                         "target_words": None, "truncated": False}],
           "metrics": {"sections_degenerate": 0}}  # fmt: skip
    f = reader_figures(old, {"body"})
    assert f == {"junk": 0, "language_share": None, "chatter": None, "chatter_share": None,
                 "relevance": None, "sections_failed": 0, "failed_reasons": {},
                 "truncated": 0, "misses": [], "cuts": {}, "yields": {}}  # fmt: skip
    # chatter counted without a share: the share stays None; zero chatter is 0, not None
    body = section("body", words=50, language_share=0.0, chatter=0, relevance=0.0)
    f = reader_figures({"sections": [body], "metrics": {}}, {"body"})
    assert (f["chatter"], f["chatter_share"], f["relevance"]) == (0, None, 0.0)
    assert f["language_share"] == 0.0


def run(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "junk": 0, "language_share": None, "chatter": None, "chatter_share": None,
        "relevance": None, "sections_failed": 0, "failed_reasons": {}, "truncated": 0,
        "misses": [], "cuts": {}, "yields": {},
    }  # fmt: skip
    return base | fields


def test_over_seeds_each_figure_is_the_worst_seeds() -> None:
    miss = {"section": "body", "words": 10, "target_words": 150, "length_score": 0.0}
    runs = [
        run(junk=2, language_share=0.97, chatter=1, relevance=0.8, sections_failed=1,
            failed_reasons={"loops": 1}, truncated=1, misses=[miss | {"why": "loops"}]),
        run(junk=5, language_share=1.0, chatter=4, chatter_share=0.05, relevance=0.3,
            misses=[miss | {"why": None}], cuts={"refrain": 2}, yields={"refrain": 1}),
        run(language_share=0.99, sections_failed=1, failed_reasons={"loops": 1, "junk": 1},
            cuts={"junk": 1, "refrain": 1}),
    ]  # fmt: skip
    assert reader_row(runs) == {
        "junk": 5, "language_share": 0.97, "chatter": 4, "chatter_share": 0.05,
        "relevance": 0.3, "sections_failed": 1, "failed_reasons": {"junk": 1, "loops": 2},
        "truncated": 1, "off_target": 1, "off_target_unexplained": 1,
        "cuts": {"junk": 1, "refrain": 3}, "yields": {"refrain": 1},
    }  # fmt: skip
    # nothing recorded in any seed stays None
    assert reader_row([run(), run()])["chatter"] is None
    assert reader_row([run(), run()])["relevance"] is None
