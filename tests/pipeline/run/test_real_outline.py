"""The tech-report recipe on the bundled SmolLM2: its outline step, held to its grammar,
gives exactly n_parts distinct single-line titles (none the recipe's own Conclusion) with
greedy decoding, and the whole report follows its outline without a repeated heading or a
part that says again what an earlier one said."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gen.backends.local import LocalBackend
from gen.pipeline import load_pipeline
from gen.pipeline.run.runner import prepare_run
from gen.text.listparse import singular, title_key
from tests.pipeline.fake_backend import read_events

pytestmark = pytest.mark.real_model

RECIPE = Path(__file__).parents[3] / "pipelines" / "tech-report.yaml"


@pytest.fixture(scope="module")
def backend(real_model_blocks: Any) -> Iterator[LocalBackend]:
    local = LocalBackend(real_model_blocks, max_slots=8)
    yield local
    asyncio.run(local.aclose())


def run_recipe(backend: LocalBackend, out: Path, **inputs: Any) -> dict[str, Any]:
    pipeline = load_pipeline(RECIPE, overrides=inputs)
    prepared = prepare_run(pipeline, backend, out, model="smollm2-135m")
    return asyncio.run(prepared.execute())


@pytest.mark.parametrize(("topic", "n_parts"), [("Coral reefs", 4), ("地铁隧道", 5)])
def test_the_outline_gives_n_distinct_titles(
    backend: LocalBackend, tmp_path: Path, topic: str, n_parts: int
) -> None:
    # the outline alone: the parts are left out by giving the fan-out nothing to do
    pipeline = load_pipeline(RECIPE, overrides={"topic": topic, "n_parts": n_parts})
    pipeline.sections[:] = pipeline.sections[:1]
    prepared = prepare_run(pipeline, backend, tmp_path, model="smollm2-135m")
    manifest = asyncio.run(prepared.execute())
    (outline,) = manifest["sections"]
    items = outline["items"]
    assert len(items) == n_parts, items
    keys = [singular(title_key(i)) for i in items]
    assert len(set(keys)) == n_parts, items
    assert all("\n" not in i and 0 < len(i) <= 60 for i in items), items
    assert not any("conclusion" in k or "introduction" in k for k in keys), items
    text = (prepared.run_dir.sections_dir / "outline.md").read_text("utf-8")
    assert text.splitlines()[0].startswith("1. ")  # nothing before the list


def test_the_report_follows_its_outline(backend: LocalBackend, tmp_path: Path) -> None:
    manifest = run_recipe(backend, tmp_path)  # the default inputs
    assert manifest["status"] == "completed"
    metrics = manifest["metrics"]
    assert metrics["outline_followed"] is True, metrics
    assert metrics["headings_repeated"] == [] and metrics["outline_missing"] == []
    assert metrics["overlap_max"] is not None and metrics["overlap_max"] <= 0.10
    run_dir = Path(tmp_path) / "tech-report"
    (folder,) = run_dir.iterdir()
    document = (folder / "document.md").read_text("utf-8")
    headings = [line for line in document.splitlines() if line.startswith("#")]
    assert len(headings) == len(set(headings)), headings
    assert sum("conclusion" in h.lower() for h in headings) == 1, headings
    events = read_events(folder / "events.jsonl")
    finished = [e for e in events if e["type"] == "run_finished"]
    assert finished[-1]["metrics"]["outline_followed"] is True  # over SSE too
