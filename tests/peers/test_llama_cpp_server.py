"""gen's `openai:` backend against llama.cpp's server (llama-cpp-python) serving the bundled
GGUF: a pipeline with continuation rounds completes, its text whole and UTF-8-clean."""

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


@pytest.mark.parametrize("mode", ["chat", "prefix"])
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
