"""Resume with a scripted backend: an interrupted run continues in the same directory,
finished sections are taken from disk unchanged, and the backend is not asked again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gen.pipeline.run.events import Event
from tests.pipeline.fake_backend import (
    FakeBackend,
    pipeline_from,
    prepare,
    read_events,
    run,
    sections_by_id,
)

CHAIN = """
name: chain
defaults: {max_tokens: 20, max_rounds: 3}
inputs: {topic: tea}
sections:
  - id: outline
    prompt: "[outline] Outline {{ topic }}."
    parse: list
  - id: part
    foreach: sections.outline.items
    prompt: "[part-{{ loop_index }}] Write about {{ item }}."
  - id: b
    prompt: "[b] Write b after the parts."
    depends_on: [part]
  - id: c
    prompt: "[c] Finish: {{ previous }}"
    context: [previous]
"""
SCRIPTS: dict[str, Any] = {
    "outline": [("1. Leaves\n2. Water\n", "stop")],
    "b": [("Bee text, 第一", "length"), ("部分 🍵 done.", "stop")],
}


def interrupted_run(tmp_path: Path, after: str) -> tuple[Path, dict[str, bytes]]:
    """Run CHAIN and cancel it (like Ctrl-C) as soon as section `after` has finished."""
    backend = FakeBackend(dict(SCRIPTS))

    async def go() -> Path:
        task: asyncio.Task[Any] | None = None

        def on_event(ev: Event) -> None:
            if ev["type"] == "section_finished" and ev["section"] == after and task:
                task.cancel()

        prepared = prepare(pipeline_from(CHAIN), backend, tmp_path, subscribers=[on_event])
        task = asyncio.ensure_future(prepared.execute())
        with pytest.raises(asyncio.CancelledError):
            await task
        return prepared.run_dir.path

    run_dir = asyncio.run(go())
    files = {p.name: p.read_bytes() for p in (run_dir / "sections").iterdir()}
    return run_dir, files


def test_cancelled_run_keeps_finished_sections(tmp_path: Path) -> None:
    run_dir, files = interrupted_run(tmp_path, "b")
    manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "cancelled"
    done = {k for k, s in sections_by_id(manifest).items() if s["status"] == "completed"}
    assert done == {"outline", "part-1", "part-2", "b"}
    assert set(files) == {f"{k}.md" for k in done}
    assert sections_by_id(manifest).get("c", {}).get("status", "cancelled") == "cancelled"
    assert not (run_dir / "document.md").exists()
    assert [p.name for p in run_dir.rglob("*.tmp")] == []


def test_resume_reuses_finished_sections_byte_for_byte(tmp_path: Path) -> None:
    run_dir, before = interrupted_run(tmp_path, "b")
    seq_before = read_events(run_dir / "events.jsonl")[-1]["seq"]
    old = sections_by_id(json.loads((run_dir / "manifest.json").read_text("utf-8")))
    backend = FakeBackend(dict(SCRIPTS))
    manifest, prepared = run(pipeline_from(CHAIN), backend, tmp_path, resume=True)
    assert prepared.run_dir.path == run_dir  # the same run, continued
    assert manifest["status"] == "completed"
    assert backend.call_keys() == ["c"]  # nothing else was generated again
    secs = sections_by_id(manifest)
    for name, data in before.items():
        assert (run_dir / "sections" / name).read_bytes() == data
        key = name.removesuffix(".md")
        assert secs[key]["cached"] is True and secs[key]["status"] == "completed"
    assert secs["c"]["cached"] is False
    assert secs["b"]["rounds"] == old["b"]["rounds"]  # the original rounds are kept
    assert secs["b"]["input_hash"] == old["b"]["input_hash"]
    assert [r["finish_reason"] for r in secs["b"]["rounds"]] == ["length", "stop"]
    assert secs["outline"]["items"] == ["Leaves", "Water"]
    (c_call,) = backend.calls
    assert c_call.messages[-1]["content"] == "[c] Finish: Bee text, 第一部分 🍵 done."
    doc = (run_dir / "document.md").read_text("utf-8")
    assert "Text of part-2." in doc and "第一部分 🍵 done." in doc
    # one event log for the whole run: seq goes on from where the first attempt stopped
    events = read_events(run_dir / "events.jsonl")
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)) and seqs[-1] > seq_before
    cached = [e for e in events if e["type"] == "section_started" and e.get("cached")]
    assert {e["section"] for e in cached} == {"outline", "part-1", "part-2", "b"}


def test_resume_after_a_kill_between_sections(tmp_path: Path) -> None:
    # a kill leaves a manifest from the last finished section: drop what came after it
    manifest, prepared = run(pipeline_from(CHAIN), FakeBackend(dict(SCRIPTS)), tmp_path)
    run_dir = prepared.run_dir.path
    kept = ["outline", "part-1"]
    for key in ("part-2", "b", "c"):
        (run_dir / "sections" / f"{key}.md").unlink()
    (run_dir / "document.md").unlink()
    manifest["status"] = "running"
    manifest["sections"] = [s for s in manifest["sections"] if s["id"] in kept]
    (run_dir / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    before = {k: (run_dir / "sections" / f"{k}.md").read_bytes() for k in kept}

    backend = FakeBackend(dict(SCRIPTS))
    resumed, _ = run(pipeline_from(CHAIN), backend, tmp_path, resume=True)
    assert resumed["status"] == "completed"
    assert sorted(backend.call_keys()) == ["b", "c", "part-2"]
    assert backend.resumes == [("b", 20)]  # b's second round
    secs = sections_by_id(resumed)
    for key in kept:
        assert (run_dir / "sections" / f"{key}.md").read_bytes() == before[key]
        assert secs[key]["cached"] is True
    assert not any(secs[k]["cached"] for k in ("part-2", "b", "c"))


def test_resume_regenerates_a_section_whose_inputs_changed(tmp_path: Path) -> None:
    run(pipeline_from(CHAIN), FakeBackend(dict(SCRIPTS)), tmp_path)
    backend = FakeBackend(dict(SCRIPTS))
    manifest, _ = run(pipeline_from(CHAIN, topic="coffee"), backend, tmp_path, resume=True)
    # the outline's prompt changed, so it and everything downstream run again
    assert "outline" in backend.call_keys()
    assert sections_by_id(manifest)["outline"]["cached"] is False
    assert manifest["inputs"] == {"topic": "coffee"}


def test_resume_regenerates_sections_written_in_another_dtype(tmp_path: Path) -> None:
    first, _ = run(pipeline_from(CHAIN), FakeBackend(dict(SCRIPTS), dtype="int8"), tmp_path)
    assert first["dtype"] == "int8"
    backend = FakeBackend(dict(SCRIPTS), dtype="float32")
    manifest, _ = run(pipeline_from(CHAIN), backend, tmp_path, resume=True)
    # the same prompts, other weights: nothing is taken from the int8 run
    assert manifest["dtype"] == "float32"
    assert not any(s["cached"] for s in manifest["sections"])
    assert "outline" in backend.call_keys()
