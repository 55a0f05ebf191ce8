"""A one-section pipeline with only a prompt and a 1,500-word target, on the bundled model
with gen's defaults: the target gets the rounds it needs and the section ends near it, or
the manifest says why it could not."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gen.backends.local import LocalBackend
from gen.pipeline.run.runner import prepare_run
from tests.pipeline.fake_backend import pipeline_from

pytestmark = pytest.mark.real_model

ESSAY = """
name: essay
defaults: {seed: 5}
sections:
  - id: essay
    prompt: "Write an essay about how cities grow around rivers, roads and markets."
    target_words: 1500
"""


@pytest.fixture(scope="module")
def backend(real_model_blocks: Any) -> Iterator[LocalBackend]:
    local = LocalBackend(real_model_blocks, max_slots=1)
    yield local
    asyncio.run(local.aclose())


def test_a_1500_word_target_ends_near_it_or_says_why(backend: LocalBackend, tmp_path: Path) -> None:
    prepared = prepare_run(pipeline_from(ESSAY), backend, tmp_path, model="smollm2-135m")
    manifest = asyncio.run(prepared.execute())
    (section,) = manifest["sections"]
    plan = section["length_plan"]
    assert manifest["status"] == "completed"
    assert (plan["rounds_from"], plan["script"]) == ("target", "latin")
    assert plan["rounds"] > 4  # more than the default that capped it at ~800 words
    assert 1.0 < plan["tokens_per_word"] < 1.6
    if section["truncated"] or section["length_score"] < 80:  # it says why: the plan, or a check
        assert (plan["reachable"] is False and plan["why"]) or section["reasons"], section
    else:
        assert section["words"] >= 1000
