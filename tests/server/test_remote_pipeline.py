"""gen's own `openai:` backend against a real `gen serve`: a pipeline whose rounds are cut
off at max_tokens goes on through `prefix` continuation (continue_final_message)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Server, gen_command, running_server

pytestmark = pytest.mark.real_model

PIPELINE = """
name: remote
model: openai:smollm2-135m
defaults:
  temperature: 0
  max_tokens: 24
  max_rounds: 3
  continuation: prefix
sections:
  - id: essay
    prompt: Write a long essay about the history of the bicycle.
  - id: summary
    prompt: 用中文写一段关于自行车的长文章。
"""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as s:
        yield s


def test_a_pipeline_runs_against_gen_serve_with_prefix_rounds(
    server: Server, tmp_path: Path
) -> None:
    path = tmp_path / "remote.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    out = tmp_path / "out"
    env = {**os.environ, "OPENAI_BASE_URL": server.v1, "OPENAI_API_KEY": ""}
    done = subprocess.run(
        gen_command("run", str(path), "--out", str(out)),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr + server.output()
    document = Path(done.stdout.splitlines()[-1])
    manifest = json.loads((document.parent / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "completed" and manifest["backend"] == "openai"
    for section in manifest["sections"]:
        rounds = section["rounds"]
        assert len(rounds) >= 2, section
        assert rounds[0]["finish_reason"] == "length"
        assert [r["strategy"] for r in rounds[1:]] == ["prefix"] * (len(rounds) - 1)
        assert all(r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 for r in rounds)
        # a prefix round re-sends the text so far: its prompt holds the earlier rounds'
        assert rounds[1]["prompt_tokens"] > rounds[0]["prompt_tokens"]
        text = (document.parent / "sections" / f"{section['id']}.md").read_text("utf-8")
        assert text.strip() and "\ufffd" not in text
