"""`gen batch`'s runner with a scripted backend: one run directory per record, the ledger
(batch.json, batch.csv), a bad record failing alone, and a second run that leaves finished
records untouched and finishes the rest."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

from gen.errors import BackendError
from gen.pipeline.records import read_records
from gen.pipeline.run.batch import Batch
from tests.pipeline.fake_backend import FakeBackend, Reply

from .test_loops import LOOP_EN, SOUND_EN

PIPELINE = """
name: notes
defaults: {max_tokens: 400, max_rounds: 1}
inputs: {topic: tea, tone: plain}
sections:
  - {id: body, prompt: "[{{ topic }}] Write a {{ tone }} note on {{ topic }}."}
"""

RECORDS = "id,topic\nt1,茶\nt2,ไทย\nt3,boom\nt4,😀\n"


def make_batch(tmp_path: Path, backend: FakeBackend, records: str = RECORDS) -> Batch:
    pipeline = tmp_path / "notes.yaml"
    pipeline.write_text(PIPELINE, encoding="utf-8")
    path = tmp_path / "records.csv"
    path.write_text(records, encoding="utf-8")
    return Batch(
        pipeline,
        read_records(path, "id"),
        str(path),
        tmp_path / "out" / "notes" / "records",
        backend=backend,
        model="fake-model",
        concurrency=2,
        key_field="id",  # not an input of the pipeline: it only names the folders
    )


def test_one_run_per_record_and_a_failure_stays_with_its_record(tmp_path: Path) -> None:
    backend = FakeBackend({"boom": [BackendError("the server went away")]})
    batch = make_batch(tmp_path, backend)
    results = asyncio.run(batch.run())
    assert [(r.key, r.status) for r in results] == [
        ("t1", "completed"),
        ("t2", "completed"),
        ("t3", "failed"),
        ("t4", "completed"),
    ]
    folder = batch.folder
    assert (folder / "t1" / "sections" / "body.md").read_text("utf-8") == "Text of 茶."
    assert json.loads((folder / "t2" / "manifest.json").read_text("utf-8"))["inputs"] == {
        "topic": "ไทย",
        "tone": "plain",
    }
    ledger = json.loads((folder / "batch.json").read_text("utf-8"))
    assert ledger["counts"] == {"completed": 3, "failed": 1}
    failed = ledger["records"][2]
    assert failed["line"] == 4 and "the server went away" in failed["error"]
    rows = list(csv.DictReader((folder / "batch.csv").open(encoding="utf-8")))
    assert [r["status"] for r in rows] == ["completed", "completed", "failed", "completed"]
    assert rows[0]["words"] == "3" and rows[0]["tokens"] != ""


def test_a_second_run_finishes_the_rest_and_leaves_finished_records_alone(
    tmp_path: Path,
) -> None:
    first = make_batch(tmp_path, FakeBackend({"boom": [BackendError("down")]}))
    asyncio.run(first.run())
    done = first.folder / "t1"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in done.rglob("*") if p.is_file()}

    again = FakeBackend()  # the backend is back: "boom" now gets its text
    second = make_batch(tmp_path, again)
    assert [r.key for r in second.remaining()] == ["t3"]
    results = asyncio.run(second.run())
    assert {r.status for r in results} == {"completed"}
    assert [r.key for r in results if r.reused] == ["t1", "t2", "t4"]
    assert again.call_keys() == ["boom"]  # only the failed record was generated again
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in done.rglob("*") if p.is_file()}
    assert after == before


def test_a_changed_record_is_generated_again(tmp_path: Path) -> None:
    asyncio.run(make_batch(tmp_path, FakeBackend()).run())
    backend = FakeBackend()
    changed = RECORDS.replace("t2,ไทย", "t2,ภาษาไทย")
    asyncio.run(make_batch(tmp_path, backend, changed).run())
    assert backend.call_keys() == ["ภาษาไทย"]


def test_bad_fields_fail_before_any_generation(tmp_path: Path) -> None:
    backend = FakeBackend()
    records = "id,topic,colour\nt1,茶,red\n"
    batch = make_batch(tmp_path, backend, records)
    problems = batch.check()
    assert list(problems) == ["t1"]
    assert problems["t1"].startswith(f"{tmp_path / 'records.csv'}:2: colour: unknown input")
    (result,) = asyncio.run(batch.run())
    assert result.status == "failed" and backend.calls == []


def test_the_ledger_says_how_many_sections_of_each_record_failed_and_why(
    tmp_path: Path,
) -> None:
    looping: list[Reply] = [(SOUND_EN + LOOP_EN, "length")] + [(" " + LOOP_EN, "length")] * 2
    records = "id,topic\nt1,tea\nt2,loop\n"
    batch = make_batch(tmp_path, FakeBackend({"loop": looping}), records)
    results = asyncio.run(batch.run())
    assert [(r.status, r.sections_failed, r.failed_reasons) for r in results] == [
        ("completed", 0, {}),
        ("completed", 1, {"loops": 1}),  # degenerate: the run still completed
    ]
    rows = list(csv.DictReader((batch.folder / "batch.csv").open(encoding="utf-8")))
    assert [(r["sections_failed"], r["failed_reasons"]) for r in rows] == [
        ("0", ""),
        ("1", "loops=1"),
    ]
    ledger = json.loads((batch.folder / "batch.json").read_text("utf-8"))
    assert ledger["sections_failed"] == 1
    assert ledger["records"][1]["failed_reasons"] == {"loops": 1}

    # kept from the earlier run: from its manifest, even one written before they were counted
    manifest_path = batch.folder / "t2" / "manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    del manifest["metrics"]["sections_failed"], manifest["sections"][0]["reasons"]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    again = asyncio.run(make_batch(tmp_path, FakeBackend(), records).run())
    assert [(r.reused, r.sections_failed, r.failed_reasons) for r in again] == [
        (True, 0, {}),
        (True, 1, {"loops": 1}),
    ]


def test_a_record_whose_fields_break_a_template_fails_alone_before_generation(
    tmp_path: Path,
) -> None:
    pipeline = tmp_path / "dots.yaml"
    pipeline.write_text(
        "inputs: {topic: tea, dots: 3}\nsections:\n"
        '  - {id: body, prompt: "[{{ topic }}] {% for i in range(dots) %}.{% endfor %}"}\n',
        encoding="utf-8",
    )
    path = tmp_path / "records.csv"
    path.write_text("id,topic,dots\nt1,茶,3\nt2,ไทย,1000000000\n", encoding="utf-8")
    backend = FakeBackend()
    batch = Batch(
        pipeline, read_records(path, "id"), str(path), tmp_path / "out", backend=backend,
        model="fake-model", key_field="id",
    )  # fmt: skip
    problems = batch.check()  # as `gen batch` does before it loads a model
    assert list(problems) == ["t2"]
    assert problems["t2"] == (
        f"{path}:3: sections[0].prompt: blocked by the template sandbox: range() of "
        "1,000,000,000 numbers; the limit is 100,000"
    )
    assert [r.key for r in batch.remaining()] == ["t1"]
    results = asyncio.run(batch.run())
    assert [(r.key, r.status) for r in results] == [("t1", "completed"), ("t2", "failed")]
    assert backend.call_keys() == ["茶"]


def test_a_ledger_write_cut_short_leaves_no_temp_file_after_the_resume(tmp_path: Path) -> None:
    first = make_batch(tmp_path, FakeBackend())
    asyncio.run(first.run())
    torn = first.folder / ".batch.csv.x1y2z3.tmp"  # as a kill inside atomic_write leaves it
    torn.write_text("key,line,sta", encoding="utf-8")
    asyncio.run(make_batch(tmp_path, FakeBackend()).run())
    assert not torn.exists()
    assert list(first.folder.glob(".*.tmp")) == []
