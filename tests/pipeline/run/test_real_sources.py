"""The example report from sources on the bundled SmolLM2 in a 2,048-token window: every
prompt keeps inside the budget with its passages, every marker in the document resolves to
a References entry that names a passage its section was shown, and the manifest carries the
figures."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gen.backends.local import LocalBackend
from gen.pipeline.run.runner import prepare_run
from tests.pipeline.fake_backend import pipeline_from, sections_by_id

pytestmark = pytest.mark.real_model

PIPELINES = Path(__file__).resolve().parents[3] / "pipelines"


@pytest.fixture(scope="module")
def backend(real_model_blocks: Any) -> Iterator[LocalBackend]:
    local = LocalBackend(real_model_blocks, max_slots=4)
    yield local
    asyncio.run(local.aclose())


def test_the_example_report_fits_a_small_window_and_its_markers_resolve(
    backend: LocalBackend, tmp_path: Path
) -> None:
    text = (PIPELINES / "report-from-sources.yaml").read_text(encoding="utf-8")
    text = text.replace("  reserve: 512\n", "  window: 2048\n  reserve: 512\n")
    pipeline = pipeline_from(text, base_dir=PIPELINES)
    prepared = prepare_run(pipeline, backend, tmp_path, model="smollm2-135m")
    manifest = asyncio.run(prepared.execute())
    assert manifest["status"] == "completed"
    sections = sections_by_id(manifest)
    for key, section in sections.items():
        assert section["passages"], key  # every section was shown some of the corpus
        assert section["rounds"][0]["prompt_tokens"] <= 2048 - 512
        assert all(p["path"].startswith("sources/tramways/") for p in section["passages"])
    document = (prepared.run_dir.path / "document.md").read_text(encoding="utf-8")
    body, _, references = document.partition("\n## References\n")
    entries = dict(re.findall(r"^\[(\d+)\] (.+)$", references, re.M))
    cited = {n for marker in re.findall(r"\[(\d+(?:, \d+)*)\]", body) for n in marker.split(", ")}
    assert cited == set(entries)  # every marker has its entry, every entry a marker
    shown = {(p["path"], p["location"]) for s in sections.values() for p in s["passages"]}
    for entry in entries.values():
        assert any(entry.startswith(f"{path}, {where}") for path, where in shown), entry
    figures = manifest["citations"]
    assert figures["references"] == len(entries)
    assert {"model_citations", "attributed", "supported_share", "unsupported_facts"} <= set(figures)
    assert len(manifest["sources"]) == 7
