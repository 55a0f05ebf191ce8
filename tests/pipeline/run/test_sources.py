"""Sources in a run, with a scripted backend (a token is a character): each section is shown
the passages that match it within its budget, its markers are checked and made the
document's, the References resolve, and the manifest, events, dry run and resume say what
each section was shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gen.backends.base import Message
from gen.errors import ConfigError, SourceError
from gen.pipeline.run.dryrun import plan_prompts
from tests.pipeline.fake_backend import (
    FakeBackend,
    key_of,
    pipeline_from,
    read_events,
    run,
    sections_by_id,
)

TEA = """# Tea in Uji

## Harvest

The first flush of Uji green tea is picked in late April. Farmers shade the bushes for
twenty days before the harvest, which makes the leaves sweeter.

## Prices

In 2025 a kilogram of first-flush tencha sold for 48,000 yen at the Uji auction.
"""
TRAMS = """# Kessling trams

Kessling's trams carried 48.7 million boardings in 2025. The busiest day was 12 December.
"""
PIPELINE = """
name: cited
defaults: {max_tokens: 400, max_rounds: 1}
context: {sources_budget: 600}
sources: [notes/]
sections:
  - id: harvest
    prompt: "[harvest] Write about the green tea harvest in Uji and the shading of the bushes."
  - id: prices
    prompt: "[prices] Write about the price of first-flush tencha at the Uji auction."
  - id: plain
    prompt: "[plain] Write a closing line."
    sources: none
"""


def corpus(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir(parents=True)
    (notes / "tea.md").write_text(TEA, encoding="utf-8")
    (notes / "trams.md").write_text(TRAMS, encoding="utf-8")
    return tmp_path


def task_key(messages: list[Message]) -> str:
    """The `[key]` of the task, past the numbered passages before it."""
    user = next(m["content"] for m in messages if m["role"] == "user")
    task = user.rpartition("Your task:")[2]
    return key_of([{"role": "user", "content": task}])


def fake(scripts: dict[str, Any] | None = None, **kwargs: Any) -> FakeBackend:
    return FakeBackend(scripts or {}, keys=task_key, **kwargs)


def shown_block(backend: FakeBackend, key: str) -> str:
    user = next(m["content"] for m in backend.calls_for(key)[0].messages if m["role"] == "user")
    return user


def test_each_section_is_shown_the_passages_that_match_it(tmp_path: Path) -> None:
    base = corpus(tmp_path)
    backend = fake()
    manifest, prepared = run(pipeline_from(PIPELINE, base_dir=base), backend, tmp_path / "out")
    harvest = shown_block(backend, "harvest")
    assert harvest.startswith("Sources (after a sentence that uses one")
    assert '[1] (notes/tea.md, "Tea in Uji > Harvest", lines 5-6)' in harvest
    assert "shade the bushes" in harvest
    assert "Kessling" not in harvest  # shares no term with the section: not shown
    assert "Sources" not in shown_block(backend, "plain")  # sources: none
    sections = sections_by_id(manifest)
    assert sections["harvest"]["passages"][0]["id"] == "notes/tea.md#1"
    assert "passages" not in sections["plain"]
    assert [s["path"] for s in manifest["sources"]] == ["notes/tea.md", "notes/trams.md"]
    events = read_events(prepared.run_dir.events_path)
    shown = {e["section"]: e["passages"] for e in events if e["type"] == "sources"}
    assert set(shown) == {"harvest", "prices"}
    assert shown["prices"][0]["path"] == "notes/tea.md"


def test_markers_are_checked_made_the_documents_and_resolve_to_references(
    tmp_path: Path,
) -> None:
    base = corpus(tmp_path)
    scripts: dict[str, Any] = {
        # [1] of each is its best passage; [9] points at nothing it was shown
        "harvest": [("The first flush is picked in late April [1]. Uji is old [9].", "stop")],
        "prices": [("First-flush tencha sold for 48,000 yen in 2025 [1]. 价格很高。", "stop")],
    }
    backend = fake(scripts)
    manifest, prepared = run(pipeline_from(PIPELINE, base_dir=base), backend, tmp_path / "out")
    document = (prepared.run_dir.path / "document.md").read_text(encoding="utf-8")
    body, _, references = document.partition("## References")
    assert "[9]" not in body and "Uji is old." in body  # dropped cleanly
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    entries = dict(re.findall(r"^\[(\d+)\] (.+)$", references, re.M))
    assert cited == {int(n) for n in entries} == {1, 2}  # every marker resolves
    assert entries["1"].startswith('notes/tea.md, "Tea in Uji > Harvest"')
    assert "48,000 yen" in entries["2"]
    sections = sections_by_id(manifest)
    assert sections["harvest"]["citing"]["citations_dropped"] == 1
    assert sections["harvest"]["citing"]["citations"] == 1
    assert sections["prices"]["citing"]["supported_share"] == 1.0
    assert manifest["citations"]["references"] == 2
    assert manifest["citations"]["citations_dropped"] == 1
    # the section files keep the section's own numbers, the document the document's
    prices = (prepared.run_dir.path / "sections" / "prices.md").read_text(encoding="utf-8")
    assert "48,000 yen in 2025 [1]." in prices and "48,000 yen in 2025 [2]." in document


def test_a_passage_two_sections_cite_has_one_number(tmp_path: Path) -> None:
    base = corpus(tmp_path)
    text = "Tencha sold for 48,000 yen at the Uji auction in 2025 [{n}]."
    pipeline = pipeline_from(PIPELINE.replace("harvest in Uji", "price in Uji"), base_dir=base)
    backend = fake()
    run(pipeline, backend, tmp_path / "probe")  # which number each is shown the price under
    numbers = {}
    for key in ("harvest", "prices"):
        block = shown_block(backend, key)
        numbers[key] = re.search(r"\[(\d+)\] \(notes/tea.md, \"Tea in Uji > Prices\"", block)[1]  # type: ignore[index]
    scripts = {k: [(text.format(n=n), "stop")] for k, n in numbers.items()}
    manifest, prepared = run(pipeline, fake(scripts), tmp_path / "out")
    document = (prepared.run_dir.path / "document.md").read_text(encoding="utf-8")
    assert document.count("in 2025 [1].") == 2
    assert manifest["citations"]["references"] == 1


def test_gen_cites_a_sentence_its_passage_bears_out_and_counts_it_apart(tmp_path: Path) -> None:
    base = corpus(tmp_path)
    said = "Farmers shade the green tea bushes for twenty days before the April harvest."
    scripts: dict[str, Any] = {"harvest": [(said + " Tea is calming.", "stop")]}
    manifest, prepared = run(
        pipeline_from(PIPELINE, base_dir=base), fake(scripts), tmp_path / "out"
    )
    harvest = sections_by_id(manifest)["harvest"]["citing"]
    assert (harvest["attributed"], harvest["citations"], harvest["cited_sentences"]) == (1, 0, 0)
    assert harvest["supported_share"] is None  # the model cited nothing: no figure to give
    text = (prepared.run_dir.path / "sections" / "harvest.md").read_text(encoding="utf-8")
    assert text == said[:-1] + " [1]. Tea is calming."

    off = PIPELINE.replace("sources: [notes/]", "sources: [notes/]\ncitations: off")
    marked: dict[str, Any] = {"harvest": [(said + " [1]", "stop")]}
    manifest, prepared = run(pipeline_from(off, base_dir=base), fake(marked), tmp_path / "o2")
    document = (prepared.run_dir.path / "document.md").read_text(encoding="utf-8")
    assert "[1]" not in document and "References" not in document


def test_the_passages_fit_a_small_window_and_the_dry_run_shows_what_is_sent(
    tmp_path: Path,
) -> None:
    base = corpus(tmp_path)
    notes = base / "notes"
    for i in range(40):  # far more text than the window holds
        (notes / f"tea-{i:02}.md").write_text(TEA.replace("2025", str(1980 + i)), "utf-8")
    text = PIPELINE.replace("context: {sources_budget: 600}", "context: {reserve: 300}")
    pipeline = pipeline_from(text, base_dir=base)
    backend = fake(context_window=2000)
    manifest, _ = run(pipeline, backend, tmp_path / "out")
    for call in backend.calls:
        assert sum(len(m["content"]) for m in call.messages) <= 2000 - 300
    planned = {p.key: p for p in plan_prompts(pipeline, _Planner(backend))}
    for key in ("harvest", "prices"):
        assert planned[key].messages == backend.calls_for(key)[0].messages
        assert [p["id"] for p in planned[key].passages] == [
            p["id"] for p in sections_by_id(manifest)[key]["passages"]
        ]


class _Planner(FakeBackend):
    """The fake backend as the dry run uses it: it shows a prompt as its messages."""

    def __init__(self, backend: FakeBackend) -> None:
        super().__init__(context_window=backend.context_window)

    def render(self, messages: list[Any], continue_final: bool = False) -> str:
        return json.dumps(messages)


def test_resume_writes_again_a_section_whose_passages_changed(tmp_path: Path) -> None:
    base = corpus(tmp_path)
    first, _ = run(pipeline_from(PIPELINE, base_dir=base), fake(), tmp_path / "out")
    shown = {k: [p["id"] for p in s.get("passages", [])] for k, s in sections_by_id(first).items()}
    changed = [k for k in ("harvest", "prices") if "notes/tea.md#2" in shown[k]]  # the price
    assert "prices" in changed
    (base / "notes" / "tea.md").write_text(TEA.replace("48,000 yen", "51,000 yen"), "utf-8")
    backend = fake()
    again, _ = run(pipeline_from(PIPELINE, base_dir=base), backend, tmp_path / "out", resume=True)
    assert backend.call_keys() == changed  # plain (no sources) and unchanged ones kept
    assert sections_by_id(again)["plain"]["cached"] is True
    for key in set(shown) - set(changed) - {"plain"}:
        assert sections_by_id(again)[key]["passages"] == sections_by_id(first)[key]["passages"]


def test_a_record_names_its_own_folder(tmp_path: Path) -> None:
    for who, fact in (("a1", "Alpha Bakery opened in 1999."), ("b2", "Beta Dental has 7 clinics.")):
        (tmp_path / "customers" / who).mkdir(parents=True)
        (tmp_path / "customers" / who / "notes.md").write_text(fact, encoding="utf-8")
    text = """
name: per-record
inputs: {id: a1}
sources: ["customers/{{ id }}/"]
sections:
  - id: s
    prompt: "[s] Write about the bakery and the dental clinics."
"""
    for who in ("a1", "b2"):
        manifest, _ = run(pipeline_from(text, base_dir=tmp_path, id=who), fake(), tmp_path / who)
        assert [s["path"] for s in manifest["sources"]] == [f"customers/{who}/notes.md"]


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ('["missing/"]', r"test.yaml:\d+:\d+: .*missing"),
        ('["../outside.md"]', r"test.yaml:\d+:\d+: .*outside"),
        ('["notes/tea.xyz"]', r"test.yaml:\d+:\d+: .*tea.xyz"),
    ],
)
def test_a_source_that_cannot_be_found_points_into_the_yaml(
    tmp_path: Path, sources: str, message: str
) -> None:
    base = corpus(tmp_path / "p")
    (tmp_path / "outside.md").write_text("x", encoding="utf-8")
    (base / "notes" / "tea.xyz").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        pipeline_from(PIPELINE.replace("sources: [notes/]", f"sources: {sources}"), base_dir=base)


def test_a_source_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    base = corpus(tmp_path)
    (base / "notes" / "binary.md").write_bytes(b"\x00\x01\x02PK\x03\x04" * 100)
    with pytest.raises(SourceError, match=r"notes/binary.md"):
        pipeline_from(PIPELINE, base_dir=base)
    (base / "notes" / "binary.md").unlink()
    (base / "notes" / "broken.pdf").write_bytes("%PDF-1.7\n garbage 月".encode())
    with pytest.raises(SourceError, match=r"notes/broken.pdf: cannot read PDF"):
        pipeline_from(PIPELINE, base_dir=base)


def test_a_copied_passage_header_is_no_part_of_the_text(tmp_path: Path) -> None:
    base = corpus(tmp_path)
    echo = '[1] (notes/tea.md, "Tea in Uji > Harvest", lines 5-6)\nThe end, 甘い.'
    manifest, prepared = run(
        pipeline_from(PIPELINE, base_dir=base), fake({"harvest": [(echo, "stop")]}), tmp_path / "o"
    )
    text = (prepared.run_dir.path / "sections" / "harvest.md").read_text(encoding="utf-8")
    assert text == "The end, 甘い."
    assert sections_by_id(manifest)["harvest"]["citing"]["echoed_headers"] == 1


def test_a_pipeline_given_as_text_reads_no_sources(tmp_path: Path) -> None:
    """Sent to a server as text, a pipeline has no folder: it may not read the server's."""
    with pytest.raises(ConfigError, match=r"test.yaml:5:\d+: .*no folder to read sources from"):
        pipeline_from(PIPELINE)
