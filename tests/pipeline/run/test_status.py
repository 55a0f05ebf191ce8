"""Honest status with a scripted backend: each section's `reasons` (why it failed or was
cut), which sections count as failed, and the run's `sections_failed` and
`failed_reasons`; a manifest written before reasons were recorded still loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gen.errors import BackendError
from gen.pipeline.run.manifest import SectionRecord, failed, failed_reasons
from tests.pipeline.fake_backend import (
    FakeBackend,
    Reply,
    pipeline_from,
    read_events,
    run,
    sections_by_id,
)

from .test_loops import LOOP_EN, SOUND_EN, SOUND_ZH

STATUS = """
name: status
defaults: {max_tokens: 50, max_rounds: 4, temperature: 0.7, seed: 3, loop_retries: 2}
sections:
  - {id: looping, prompt: "[looping] Write about signal boxes."}
  - {id: stalled, prompt: "[stalled] 写铁路信号。", target_words: 400, plan: false}
  - {id: short, prompt: "[short] Write about levers.", target_words: 400, max_rounds: 2,
     plan: false}
  - {id: cut, prompt: "[cut] Write about lamps.", max_rounds: 2}
  - {id: sound, prompt: "[sound] Write about bells."}
"""
ROUNDS_RUN_OUT: list[Reply] = [
    ("Levers moved the points. ", "length"),
    ("Wires ran along the line. ", "length"),
]
SCRIPTS: dict[str, list[Reply]] = {
    # loops again after each of its two retries
    "looping": [(SOUND_EN + LOOP_EN, "length")] + [(" " + LOOP_EN, "length")] * 2,
    # two rounds in a row that write no letter or digit, far short of the target
    "stalled": [(SOUND_ZH, "length"), ("\ufffd" * 40, "length"), ("！？＃" * 10, "length")],
    "short": list(ROUNDS_RUN_OUT),  # a target, and its rounds ran out short of it
    "cut": list(ROUNDS_RUN_OUT),  # no target: its rounds ran out, nothing said how long
}


def status_run(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    manifest, prepared = run(pipeline_from(STATUS), FakeBackend(dict(SCRIPTS)), tmp_path)
    return manifest, prepared.run_dir.path


def test_each_section_says_why_it_failed_or_was_cut(tmp_path: Path) -> None:
    manifest, run_dir = status_run(tmp_path)
    secs = sections_by_id(manifest)
    assert {k: s["reasons"] for k, s in secs.items()} == {
        "looping": ["loops"],
        "stalled": ["stalled", "truncated"],
        "short": ["truncated"],
        "cut": ["truncated"],
        "sound": [],
    }
    assert [k for k, s in secs.items() if s["degenerate"]] == ["looping", "stalled"]
    assert manifest["status"] == "completed"  # failed sections do not fail the run
    finished = {
        e["section"]: (e["failed"], e["reasons"])
        for e in read_events(run_dir / "events.jsonl")
        if e["type"] == "section_finished"
    }
    assert finished == {
        "looping": (True, ["loops"]),
        "stalled": (True, ["stalled", "truncated"]),
        "short": (True, ["truncated"]),
        "cut": (False, ["truncated"]),  # no target: truncated, but not failed
        "sound": (False, []),
    }


def test_the_metrics_count_failed_sections_per_reason(tmp_path: Path) -> None:
    manifest, _ = status_run(tmp_path)
    metrics = manifest["metrics"]
    assert metrics["sections_failed"] == 3
    assert metrics["failed_reasons"] == {"loops": 1, "stalled": 1, "truncated": 2}
    assert metrics["sections_truncated"] == 3 and metrics["sections_degenerate"] == 2


def test_a_section_an_error_ended_is_failed(tmp_path: Path) -> None:
    yaml = STATUS.split("sections:")[0] + (
        "sections:\n"
        '  - {id: broken, prompt: "[broken] Write."}\n'
        '  - {id: sound, prompt: "[sound] Write about bells."}\n'
    )
    backend = FakeBackend({"broken": [BackendError("the server went away")]})
    manifest, _ = run(pipeline_from(yaml), backend, tmp_path)
    assert manifest["status"] == "failed"
    assert sections_by_id(manifest)["broken"]["reasons"] == ["error"]
    assert manifest["metrics"]["sections_failed"] == 1
    assert manifest["metrics"]["failed_reasons"] == {"error": 1}


def test_a_run_with_nothing_wrong_has_no_failed_sections(tmp_path: Path) -> None:
    yaml = STATUS.split("sections:")[0] + 'sections:\n  - {id: sound, prompt: "[sound] Go."}\n'
    manifest, _ = run(pipeline_from(yaml), FakeBackend(), tmp_path)
    assert manifest["metrics"]["sections_failed"] == 0
    assert manifest["metrics"]["failed_reasons"] == {}


def test_a_manifest_without_reasons_loads_them_from_its_flags(tmp_path: Path) -> None:
    manifest, _ = status_run(tmp_path)
    secs = sections_by_id(manifest)
    for data in secs.values():
        del data["reasons"]  # as written before reasons were recorded
    records = [SectionRecord.from_json(data, "") for data in secs.values()]
    assert [r.reasons for r in records] == [
        ["loops"],  # its last round was cut for repetition
        ["stalled", "truncated"],
        ["truncated"],
        ["truncated"],
        [],
    ]
    assert [failed(r) for r in records] == [True, True, True, False, False]
    assert failed_reasons(records) == {"loops": 1, "stalled": 1, "truncated": 2}


def test_resume_keeps_the_reasons_of_reused_sections_even_from_an_old_manifest(
    tmp_path: Path,
) -> None:
    first, run_dir = status_run(tmp_path)
    old = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    for data in old["sections"]:
        del data["reasons"]
    del old["metrics"]["sections_failed"], old["metrics"]["failed_reasons"]
    (run_dir / "manifest.json").write_text(json.dumps(old), encoding="utf-8")
    backend = FakeBackend()
    resumed, _ = run(pipeline_from(STATUS), backend, tmp_path, resume=True)
    assert backend.calls == []  # every section was reused
    secs = sections_by_id(resumed)
    assert all(s["cached"] for s in secs.values())
    assert {k: s["reasons"] for k, s in secs.items()} == {
        k: s["reasons"] for k, s in sections_by_id(first).items()
    }
    assert resumed["metrics"]["failed_reasons"] == first["metrics"]["failed_reasons"]
