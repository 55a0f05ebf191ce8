"""What a run shows of itself: prompts/<key>.json holds per round the messages sent, the
sampling settings with the seed, and the tokens; the manifest names the pipeline file, its
hash, the gen version and each section's settings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import gen
from tests.pipeline.fake_backend import FakeBackend, pipeline_from, run

PIPELINE = """
name: tea
defaults: {max_tokens: 20, max_rounds: 3, seed: 9, temperature: 0.5}
sections:
  - id: intro
    prompt: "[intro] 写一段关于茶的引言 🍵"
    target_words: 4
  - id: tips
    prompt: "[tips] Give tips."
    max_tokens: 7
    continuation: prefix
"""


def test_prompts_record_every_round_as_sent(tmp_path: Path) -> None:
    backend = FakeBackend(
        {
            "intro": [("茶叶来自", "length"), ("中国的南方。", "stop")],
            "tips": [("Warm the pot", "length"), (" first.", "stop")],
        }
    )
    manifest, prepared = run(pipeline_from(PIPELINE), backend, tmp_path)
    folder = prepared.run_dir.path / "prompts"
    assert sorted(p.name for p in folder.iterdir()) == ["intro.json", "tips.json"]
    sections = {s["id"]: s for s in manifest["sections"]}

    intro = json.loads((folder / "intro.json").read_text("utf-8"))
    first, second = intro["rounds"]
    call = next(c for c in backend.calls if c.key == "intro")
    assert first["messages"] == call.messages
    assert first["strategy"] == "initial" and second["strategy"] == "kv"
    assert second["messages"] is None  # a kv round decodes on in the same sequence
    assert first["sampling"]["seed"] == sections["intro"]["seed"] == call.params.seed
    assert first["sampling"]["temperature"] == 0.5 and first["sampling"]["max_tokens"] == 20
    for entry, recorded in zip(intro["rounds"], sections["intro"]["rounds"], strict=True):
        for k in ("prompt_tokens", "completion_tokens", "finish_reason"):
            assert entry[k] == recorded[k]

    tips = json.loads((folder / "tips.json").read_text("utf-8"))
    calls = [c for c in backend.calls if c.key == "tips"]
    assert [r["messages"] for r in tips["rounds"]] == [c.messages for c in calls]
    assert tips["rounds"][1]["continue_final_message"] is True
    assert tips["rounds"][1]["messages"][-1] == {"role": "assistant", "content": "Warm the pot"}
    assert all(r["sampling"]["max_tokens"] == 7 for r in tips["rounds"])


def test_manifest_names_pipeline_version_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "tea.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    from gen.pipeline import load_pipeline

    manifest, _ = run(load_pipeline(path), FakeBackend({}), tmp_path / "out")
    assert manifest["pipeline_file"] == str(path)
    assert manifest["pipeline_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert manifest["gen_version"] == gen.__version__
    settings = manifest["settings"]
    assert settings["intro"]["max_tokens"] == 20 and settings["tips"]["max_tokens"] == 7
    assert settings["tips"]["continuation"] == "prefix"
    assert settings["intro"]["seed"] == 9
