"""The orchestrator with a scripted backend: DAG order and concurrency, fan-outs, the
manifest (docs/design.md §4), events (§5) and failing sections."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from gen.errors import BackendError
from gen.pipeline import count_words
from gen.pipeline.templates.render import CONTEXT_LABELS
from tests.pipeline.fake_backend import (
    FakeBackend,
    pipeline_from,
    prepare,
    read_events,
    run,
    sections_by_id,
)

DAG = """
name: dag
defaults: {max_tokens: 50, max_rounds: 1}
sections:
  - {id: a, prompt: "[a] Write A."}
  - {id: b, prompt: "[b] Write B."}
  - {id: c, prompt: "[c] Join {{ sections.a.text }} / {{ sections.b.text }}"}
  - {id: d, prompt: "[d] After a.", depends_on: [a]}
"""


def test_dag_order_and_independent_sections_overlap(tmp_path: Path) -> None:
    backend = FakeBackend({"a": [("Alpha text.", "stop")], "b": [("Beta text, longer.", "stop")]})
    manifest, prepared = run(pipeline_from(DAG), backend, tmp_path)
    assert manifest["status"] == "completed"
    log = backend.log
    start = {k: log.index(("start", k)) for k in "abcd"}
    end = {k: log.index(("end", k)) for k in "abcd"}
    # a and b need nothing: both are under way before either has finished
    assert max(start["a"], start["b"]) < min(end["a"], end["b"])
    # c waits for a and b, d only for a
    assert start["c"] > max(end["a"], end["b"])
    assert start["d"] > end["a"]
    (c_call,) = backend.calls_for("c")
    assert c_call.messages[-1]["content"] == "[c] Join Alpha text. / Beta text, longer."
    assert [s["id"] for s in manifest["sections"]] == ["a", "b", "c", "d"]
    doc = prepared.run_dir.document_path.read_text("utf-8")
    assert doc.index("Alpha text.") < doc.index("Beta text") < doc.index("Text of c.")
    # timeline.svg beside the manifest: a row per section, a bar per round
    svg = ET.parse(prepared.run_dir.path / "timeline.svg").getroot()
    rows = svg.findall(".//{http://www.w3.org/2000/svg}g[@class='section']")
    assert [g.get("data-section") for g in rows] == ["a", "b", "d", "c"]  # as they started
    bars = [
        r for r in svg.iter("{http://www.w3.org/2000/svg}rect") if "round" in r.get("class", "")
    ]
    assert len(bars) == 4


FAN_OUT = """
name: fan
defaults: {max_tokens: 50, max_rounds: 1}
sections:
  - id: outline
    prompt: "[outline] List three parts."
    parse: list
  - id: part
    foreach: sections.outline.items
    prompt: "[part-{{ loop_index }}] Write part {{ loop_index }} of {{ loop_length }}: {{ item }}"
"""
OUTLINE = "1. Tea leaves\n2. **Water**\n3. Cups:\n"


def test_fan_out_over_list_items(tmp_path: Path) -> None:
    backend = FakeBackend({"outline": [(OUTLINE, "stop")]})
    manifest, prepared = run(pipeline_from(FAN_OUT), backend, tmp_path)
    assert manifest["status"] == "completed"
    secs = sections_by_id(manifest)
    assert list(secs) == ["outline", "part-1", "part-2", "part-3"]
    assert secs["outline"]["items"] == ["Tea leaves", "Water", "Cups"]
    assert [secs[f"part-{i}"]["title"] for i in (1, 2, 3)] == ["Tea leaves", "Water", "Cups"]
    assert all(secs[k]["section"] == "part" for k in ("part-1", "part-2", "part-3"))
    files = sorted(p.name for p in prepared.run_dir.sections_dir.iterdir())
    assert files == ["outline.md", "part-1.md", "part-2.md", "part-3.md"]
    assert (prepared.run_dir.sections_dir / "part-2.md").read_text("utf-8") == "Text of part-2."
    prompts = {c.key: c.messages[-1]["content"] for c in backend.calls}
    assert prompts["part-3"] == "[part-3] Write part 3 of 3: Cups"
    # the instances need only the outline: they run side by side
    log = backend.log
    starts = [log.index(("start", f"part-{i}")) for i in (1, 2, 3)]
    ends = [log.index(("end", f"part-{i}")) for i in (1, 2, 3)]
    assert max(starts) < min(ends)
    doc = prepared.run_dir.document_path.read_text("utf-8")
    assert "## Tea leaves" in doc and "Text of part-3." in doc
    assert "1. Tea leaves" not in doc  # a parse: list section is hidden by default


def test_fan_out_with_previous_runs_in_order(tmp_path: Path) -> None:
    text = FAN_OUT.replace(
        '    prompt: "[part-{{ loop_index }}] Write part',
        "    context: [outline, previous]\n"
        '    prompt: "[part-{{ loop_index }}] <{{ previous }}> Write part',
    )
    backend = FakeBackend({"outline": [(OUTLINE, "stop")]})
    manifest, _ = run(pipeline_from(text), backend, tmp_path)
    assert manifest["status"] == "completed"
    # the outline, which the prompt does not place, comes first as a labelled block
    labels = CONTEXT_LABELS["en"]
    plan = f"{labels['outline']}:\n\n{OUTLINE.strip()}\n\n{labels['task']}:\n\n"
    assert all(c.messages[-1]["content"].startswith(plan) for c in backend.calls[1:])
    prompts = {c.key: c.messages[-1]["content"].removeprefix(plan) for c in backend.calls}
    assert prompts["part-1"].startswith("[part-1] <> Write part 1")
    assert prompts["part-2"].startswith("[part-2] <Text of part-1.> Write part 2")
    assert prompts["part-3"].startswith("[part-3] <Text of part-2.> Write part 3")
    log = backend.log
    for i in (1, 2):
        assert log.index(("start", f"part-{i + 1}")) > log.index(("end", f"part-{i}"))


def test_a_sequential_fan_out_sees_the_words_its_earlier_parts_wrote(tmp_path: Path) -> None:
    text = FAN_OUT.replace(
        '    prompt: "[part-{{ loop_index }}] Write part',
        "    context: [outline, previous]\n"
        '    target_words: "{{ (30 - words_written) // (loop_length - loop_index + 1) }}"\n'
        '    prompt: "[part-{{ loop_index }}] ({{ words_written }}) Write part',
    )
    # a budget of 15 tokens, which each part's one reply spends (short of its target with
    # budget left, a part would be asked to write on)
    text = text.replace("max_tokens: 50", "max_tokens: 15")
    four = "One two three four."
    backend = FakeBackend({"outline": [(OUTLINE, "stop")], "part-1": [(four, "stop")]})
    manifest, _ = run(pipeline_from(text), backend, tmp_path)
    secs = sections_by_id(manifest)
    # part 1 wrote 4 of its 10 words: parts 2 and 3 share the 26 left, then the 23 left
    assert [secs[f"part-{i}"]["target_words"] for i in (1, 2, 3)] == [10, 13, 23]
    prompts = {c.key: c.messages[-1]["content"] for c in backend.calls}
    assert "[part-2] (4) Write part" in prompts["part-2"]
    assert "[part-3] (7) Write part" in prompts["part-3"]  # + "Text of part-2." (3 words)


MANIFEST = """
name: shape
defaults: {max_tokens: 10, max_rounds: 3, continuation: kv}
sections:
  - id: intro
    prompt: "[intro] Write an intro."
    target_words: 4
  - id: body
    prompt: "[body] Write the body."
"""

ROUND_KEYS = {
    "finish_reason",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "trimmed_tokens",
    "seconds",
}
METRIC_KEYS = {
    "sections",
    "rounds_avg",
    "continuation_success_rate",
    "context_utilization_max",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "seconds",
    "tokens_per_second",
}


def test_manifest_fields(tmp_path: Path) -> None:
    backend = FakeBackend(
        {"intro": [("One two ", "length"), ("three four five.", "stop")]}, context_window=1000
    )
    manifest, prepared = run(pipeline_from(MANIFEST), backend, tmp_path)
    on_disk = prepared.run_dir.read_manifest()
    assert on_disk == manifest
    assert manifest["pipeline"] == "shape"
    assert manifest["run_id"] == prepared.run_dir.run_id == prepared.run_dir.path.name
    assert prepared.run_dir.path == tmp_path / "shape" / manifest["run_id"]
    assert (manifest["status"], manifest["model"], manifest["backend"], manifest["dtype"]) == (
        "completed",
        "fake-model",
        "fake",
        None,
    )
    assert manifest["document"] == "document.md"
    intro, body = manifest["sections"]
    prompt = len("[intro] Write an intro.")
    assert {k: intro[k] for k in ("id", "status", "cached", "words", "target_words")} == {
        "id": "intro",
        "status": "completed",
        "cached": False,
        "words": 5,
        "target_words": 4,
    }
    assert intro["length_score"] == round(100 * (1 - (5 / 4 - 1) / 3), 1)
    assert intro["truncated"] is False
    for rnd in intro["rounds"] + body["rounds"]:
        assert set(rnd) >= ROUND_KEYS
        assert isinstance(rnd["seconds"], float) and rnd["seconds"] >= 0
    r1, r2 = intro["rounds"]
    assert {k: r1[k] for k in ROUND_KEYS - {"seconds"}} == {
        "finish_reason": "length",
        "prompt_tokens": prompt,
        "cached_prompt_tokens": 0,
        "completion_tokens": 8,
        "trimmed_tokens": 0,
    }
    assert {k: r2[k] for k in ROUND_KEYS - {"seconds"}} == {
        "finish_reason": "stop",
        "prompt_tokens": prompt + 8,
        "cached_prompt_tokens": prompt + 8,
        "completion_tokens": 16,
        "trimmed_tokens": 0,
    }
    assert (r1["strategy"], r2["strategy"]) == ("initial", "kv")
    assert body["target_words"] is None and body["length_score"] is None
    assert [r["finish_reason"] for r in body["rounds"]] == ["stop"]

    m = manifest["metrics"]
    assert set(m) >= METRIC_KEYS
    rounds = intro["rounds"] + body["rounds"]
    assert m["sections"] == 2
    assert m["rounds_avg"] == 1.5
    assert m["continuation_success_rate"] == 1.0
    assert m["prompt_tokens"] == sum(r["prompt_tokens"] for r in rounds)
    assert m["cached_prompt_tokens"] == prompt + 8
    assert m["completion_tokens"] == 8 + 16 + len("Text of body.")
    assert m["context_utilization_max"] == round((prompt + 8 + 16) / 1000, 3)
    assert m["seconds"] >= 0 and m["tokens_per_second"] >= 0
    section_files = {p.stem: p.read_text("utf-8") for p in prepared.run_dir.sections_dir.iterdir()}
    assert section_files == {"intro": "One two three four five.", "body": "Text of body."}
    assert intro["words"] == count_words(section_files["intro"])


EVENT_TYPES = {
    "run_started",
    "section_started",
    "delta",
    "round_finished",
    "section_finished",
    "run_finished",
    "error",
}


def test_events_schema(tmp_path: Path) -> None:
    backend = FakeBackend({"intro": [("One two ", "length"), ("three four five.", "stop")]})
    seen: list[dict[str, Any]] = []
    prepared = prepare(pipeline_from(MANIFEST), backend, tmp_path, subscribers=[seen.append])
    manifest = asyncio.run(prepared.execute())
    events = read_events(prepared.run_dir.events_path)
    assert events == seen  # the file and the subscribers see the same events
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(events) + 1))
    for e in events:
        assert e["type"] in EVENT_TYPES
        assert e["run_id"] == manifest["run_id"]
        assert isinstance(e["time"], float)
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert events[-1]["status"] == "completed"
    assert events[-1]["metrics"] == manifest["metrics"]
    for key in ("intro", "body"):
        mine = [e for e in events if e.get("section") == key]
        assert mine[0]["type"] == "section_started" and mine[-1]["type"] == "section_finished"
        deltas = [e for e in mine if e["type"] == "delta"]
        text = (prepared.run_dir.sections_dir / f"{key}.md").read_text("utf-8")
        assert "".join(e["text"] for e in deltas) == text
    rounds = [e for e in events if e["type"] == "round_finished" and e["section"] == "intro"]
    assert [(e["round"], e["finish_reason"]) for e in rounds] == [(1, "length"), (2, "stop")]
    for e in rounds:
        for k in ("prompt_tokens", "cached_prompt_tokens", "completion_tokens"):
            assert isinstance(e[k], int)
    deltas = [e for e in events if e["type"] == "delta" and e["section"] == "intro"]
    assert {e["round"] for e in deltas} == {1, 2}
    # whitespace at a round's end goes out with the text after it
    assert "".join(e["text"] for e in deltas if e["round"] == 2) == " three four five."


FAILING = """
name: failing
defaults: {max_tokens: 20, max_rounds: 1}
sections:
  - {id: a, prompt: "[a] A"}
  - {id: b, prompt: "[b] B"}
  - {id: c, prompt: "[c] C", depends_on: [b]}
  - {id: d, prompt: "[d] D", depends_on: [a]}
  - {id: e, prompt: "[e] E", depends_on: [c]}
"""


def _check_failed_run(manifest: dict[str, Any], run_dir: Path, backend: FakeBackend) -> None:
    assert manifest["status"] == "failed"
    assert manifest["document"] is None
    secs = sections_by_id(manifest)
    assert {k: s["status"] for k, s in secs.items()} == {
        "a": "completed",
        "b": "failed",
        "c": "skipped",
        "d": "completed",
        "e": "skipped",
    }
    assert "boom" in secs["b"]["error"]
    assert "'b'" in secs["c"]["error"] and "'c'" in secs["e"]["error"]
    files = sorted(p.name for p in (run_dir / "sections").iterdir())
    assert files == ["a.md", "d.md"]
    assert (run_dir / "sections" / "d.md").read_text("utf-8") == "Text of d."
    assert not (run_dir / "document.md").exists()
    assert "c" not in backend.call_keys() and "e" not in backend.call_keys()
    events = read_events(run_dir / "events.jsonl")
    errors = [e for e in events if e["type"] == "error"]
    assert [e.get("section") for e in errors] == ["b"]
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "failed"


def test_failing_section_skips_dependents_only(tmp_path: Path) -> None:
    backend = FakeBackend({"b": [BackendError("boom: server went away")]})
    manifest, prepared = run(pipeline_from(FAILING), backend, tmp_path)
    _check_failed_run(manifest, prepared.run_dir.path, backend)


def test_unexpected_backend_exception_fails_the_section_not_the_run(tmp_path: Path) -> None:
    backend = FakeBackend({"b": [RuntimeError("boom: unexpected")]})
    manifest, prepared = run(pipeline_from(FAILING), backend, tmp_path)
    _check_failed_run(manifest, prepared.run_dir.path, backend)
    assert "RuntimeError" in sections_by_id(manifest)["b"]["error"]


def test_failing_fan_out_instance_lets_its_siblings_finish(tmp_path: Path) -> None:
    text = FAN_OUT + "  - {id: after, prompt: '[after] x', depends_on: [part]}\n"
    long_text = " ".join(f"word{i}" for i in range(40))
    slow = (long_text, "stop")  # still streaming when part-2 fails
    backend = FakeBackend(
        {
            "outline": [(OUTLINE, "stop")],
            "part-1": [slow],
            "part-2": [BackendError("boom")],
            "part-3": [slow],
        }
    )
    manifest, prepared = run(pipeline_from(text), backend, tmp_path)
    assert backend.log.index(("error", "part-2")) < backend.log.index(("end", "part-3"))
    assert manifest["status"] == "failed"
    assert {k: s["status"] for k, s in sections_by_id(manifest).items()} == {
        "outline": "completed",
        "part-1": "completed",
        "part-2": "failed",
        "part-3": "completed",
        "after": "skipped",
    }
    assert prepared.run_dir.read_manifest() == manifest
    files = sorted(p.name for p in prepared.run_dir.sections_dir.iterdir())
    assert files == ["outline.md", "part-1.md", "part-3.md"]
    events = read_events(prepared.run_dir.events_path)
    assert events[-1]["type"] == "run_finished"  # nothing happens after the run ends


def test_an_outline_item_that_is_the_document_title_is_dropped(tmp_path: Path) -> None:
    text = FAN_OUT.replace("name: fan\n", 'name: fan\ndocument: {title: "茶 Tea leaves"}\n')
    backend = FakeBackend({"outline": [("1. 茶 tea LEAVES\n2. **Water**\n3. Cups:\n", "stop")]})
    manifest, _ = run(pipeline_from(text), backend, tmp_path)
    secs = sections_by_id(manifest)
    assert secs["outline"]["items"] == ["Water", "Cups"]
    assert [k for k in secs if k.startswith("part-")] == ["part-1", "part-2"]
