"""gen's `openai:` backend against llama.cpp's server (llama-cpp-python) serving the bundled
GGUF: a pipeline with continuation rounds (`chat`) completes, its text whole, UTF-8-clean
and not repeated at the seams."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gen.engine.detokenizer import REPLACEMENT
from gen.pipeline import load_pipeline_text
from gen.pipeline.run.runner import open_pipeline_backend, prepare_run

PIPELINE = """
name: peer
model: openai:smollm2
base_url: {url}
defaults: {{max_tokens: 48, max_rounds: 4, temperature: 0, seed: 1, continuation: {mode}}}
sections:
  - id: water
    prompt: "Write about 120 words on how rivers reach the sea."
    target_words: 120
  - id: tea
    prompt: "用中文写三句话介绍茶。"
"""


# not `prefix`: llama-cpp-python 0.3.36 ignores continue_final_message and answers an open
# assistant message with a new turn, so the text would start over
@pytest.mark.parametrize("mode", ["chat"])
def test_a_pipeline_with_continuation_rounds_completes(
    llama_cpp_server: str, tmp_path: Path, mode: str
) -> None:
    pipeline = load_pipeline_text(PIPELINE.format(url=llama_cpp_server, mode=mode), file="p.yaml")

    async def go() -> dict[str, Any]:
        backend = open_pipeline_backend(pipeline, pipeline.model)
        try:
            return await prepare_run(pipeline, backend, tmp_path, model=pipeline.model).execute()
        finally:
            await backend.aclose()

    manifest = asyncio.run(go())
    print(json.dumps(manifest["sections"], ensure_ascii=False, indent=1))  # for the issue note
    assert manifest["status"] == "completed"
    water = manifest["sections"][0]
    assert len(water["rounds"]) > 1 and water["rounds"][0]["finish_reason"] == "length"
    assert water["rounds"][1]["strategy"] == mode
    folder = tmp_path / "peer" / manifest["run_id"] / "sections"
    for section in ("water", "tea"):
        text = (folder / f"{section}.md").read_text("utf-8")
        assert text.strip() and REPLACEMENT not in text
    water_text = (folder / "water.md").read_text("utf-8")
    opening = water_text[:40]
    assert water_text.count(opening) == 1, water_text  # no round started the text over
