"""The example corpus (pipelines/sources/): every file reads, and BM25 finds each planted fact
in its own file from the question that asks for it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gen.sources import load, passages, rank, render, select
from tests.sources.facts import CORPUS, CUSTOMERS, TRAMWAYS, Fact

MAX_BYTES = {".pdf": 60_000}  # every other file: 30 KB


def test_the_corpus_has_every_kind_and_stays_small() -> None:
    documents = load(["tramways"], CORPUS)
    assert {d.kind for d in documents} == {"markdown", "html", "pdf", "docx", "csv"}
    for path in CORPUS.rglob("*"):
        if path.is_file():
            assert path.stat().st_size < MAX_BYTES.get(path.suffix, 30_000), path
    pdf = next(d for d in documents if d.kind == "pdf")
    assert [b.location.page for b in pdf.blocks] == [1, 2]


@pytest.mark.parametrize("key", TRAMWAYS)
def test_a_fact_is_found_in_its_file_from_its_question(key: str) -> None:
    fact = TRAMWAYS[key]
    ps = passages(load(["tramways"], CORPUS))
    top = [s.passage for s in rank(ps, fact.question)[:3]]
    assert any(holds(p.path, p.text, fact) for p in top), [p.id for p in top]


@pytest.mark.parametrize("record", CUSTOMERS)
def test_a_record_reads_only_its_own_folder(record: str) -> None:
    fact = CUSTOMERS[record]
    ps = passages(load([f"customers/{record}/"], CORPUS))
    assert {p.path.split("/")[1] for p in ps} == {record}
    chosen = select(ps, fact.question, 200, lambda text: len(text.split()))
    assert any(holds(s.passage.path, s.passage.text, fact) for s in chosen)
    assert len(render([s.passage for s in chosen]).split()) <= 200


def test_the_batch_records_name_the_folders() -> None:
    listed = CORPUS.parent / "sources-customers.csv"
    with listed.open(newline="", encoding="utf-8") as f:
        ids = [row["id"] for row in csv.DictReader(f)]
    assert ids == sorted(CUSTOMERS)
    assert sorted(p.name for p in (CORPUS / "customers").iterdir()) == ids


def test_facts_name_files_that_exist() -> None:
    for fact in [*TRAMWAYS.values(), *CUSTOMERS.values()]:
        assert Path(CORPUS / fact.file).is_file(), fact.file


def holds(path: str, text: str, fact: Fact) -> bool:
    return path == fact.file and all(s in " ".join(text.split()) for s in fact.says)
