"""`gen bench --outlines`: the tech-report's outline step alone, greedy, over fixed topics no
test uses: held to its grammar (a `parse: list` section on an engine that supports one) and
free (the same section with `format: none`), with what each outline gets right."""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gen.engine.config import EngineConfig
from gen.pipeline import Pipeline, load_pipeline
from gen.text.listparse import line_item, singular, title_key

TECH_REPORT = "tech-report.yaml"  # in the bundled pipelines' folder the caller names
TOPICS = (
    "Jazz", "Urban beekeeping", "Quantum computing", "Tidal energy", "The Silk Road",
    "Electric bicycles", "Volcanoes", "Wind turbines", "Cheese making", "Paper making",
)  # fmt: skip
MODES = ("held", "free")
# what a small model writes for any topic (singular, lower case: the words of a title key)
GENERIC = frozenset(
    ("introduction", "background", "methodology", "result", "conclusion", "summary", "overview")
)
TITLE_CHARS = 80  # a longer item is a sentence or a paragraph, not a title
_SENTENCE_END = re.compile(r"[.!?。！？]\s")
# every check of one outline, "ok" last: all of the others
CHECKS = ("count", "distinct", "single_line", "no_generic", "only_list", "ok")


def check_outline(text: str, n_parts: int) -> dict[str, Any]:
    """One outline's items and checks: exactly `n_parts` list items (`count`), none the same
    as another, case, punctuation and a plural -s aside (`distinct`), each a title on one
    line (`single_line`), none with a generic word such as "Introduction" (`no_generic`),
    no non-empty line outside the list (`only_list`), and all of these (`ok`)."""
    lines = [line for line in text.splitlines() if line.strip()]
    items = [item for item in map(line_item, lines) if item is not None]
    keys = [singular(title_key(item)) for item in items]
    checks = {
        "count": len(items) == n_parts,
        "distinct": len(set(keys)) == len(keys),
        "single_line": all(
            len(item) <= TITLE_CHARS and not _SENTENCE_END.search(item) for item in items
        ),
        "no_generic": not any(GENERIC.intersection(key.split()) for key in keys),
        "only_list": len(lines) == len(items),
    }
    return {"items": items, **checks, "ok": all(checks.values())}


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """For each mode, how many outlines pass each check (and `outlines`: how many ran)."""
    return {
        mode: {"outlines": len(of), **{c: sum(bool(r[c]) for r in of) for c in CHECKS}}
        for mode in MODES
        if (of := [r for r in rows if r["mode"] == mode])
    }


def run_outlines(
    model: str,
    note: Callable[[str], None],
    out: Path | None = None,
    engine: EngineConfig | None = None,
    topics: Sequence[str] = TOPICS,
    *,
    pipelines: Path,
) -> dict[str, Any]:
    """Every topic's outline, held and then free; rows and their summary. `pipelines`: the
    folder that holds the tech-report."""
    from gen.backends import open_backend
    from gen.pipeline.run.runner import prepare_run

    if not topics:
        raise ValueError("run_outlines needs at least one topic, got none")
    plans = [
        (mode, topic, outline_pipeline(topic, mode, pipelines))
        for mode in MODES
        for topic in topics
    ]
    n_parts = int(str(plans[0][2].inputs["n_parts"]))
    backend = open_backend(model, engine=engine)
    root = out or Path(tempfile.mkdtemp(prefix="gen-outlines-"))
    rows = []
    try:
        for mode, topic, pipeline in plans:
            note(f"{mode} outline: {topic}")
            prepared = prepare_run(pipeline, backend, root, model=model)
            asyncio.run(prepared.execute())
            text = prepared.run_dir.section_path("outline").read_text("utf-8")
            rows.append({"mode": mode, "topic": topic, **check_outline(text, n_parts)})
    finally:
        asyncio.run(backend.aclose())
    return {
        "model": model,
        "topics": len(topics),
        "n_parts": n_parts,
        # False: the backend cannot hold a list to a grammar, so "held" ran free as well
        "held_by_grammar": bool(backend.supports_grammar),
        "rows": rows,
        "summary": summarize(rows),
    }


def outline_pipeline(topic: str, mode: str, pipelines: Path) -> Pipeline:
    """The tech-report in `pipelines` with only its outline section, greedy; `free`: with
    `format: none`."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    pipeline = load_pipeline(
        pipelines / TECH_REPORT, {"topic": topic, "sections.outline.temperature": "0"}
    )
    outline = next(s for s in pipeline.sections if s.id == "outline")
    pipeline.sections[:] = [outline]  # nothing after it runs
    if mode == "free":
        outline.format = "none"
    return pipeline
