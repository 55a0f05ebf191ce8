"""`gen bench --quality`: long texts as a reader gets them. Fixed targets (single sections of
500 and 1,500 words, an 800-character Chinese section, the long-article recipe at 5,000
words), each on a topic no test uses, with words, S_l, distinct-4, repeated sentences and
seconds per document."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen.pipeline import load_pipeline, load_pipeline_text
from gen.pipeline.quality import measure
from gen.pipeline.words import count_words, length_score

RECIPE = Path(__file__).resolve().parent.parent / "pipelines" / "long-article.yaml"

SINGLE = """
name: quality-{name}
model: {model}
defaults: {{temperature: 0.7, seed: 23, max_tokens: 256, max_rounds: 40}}
sections:
  - id: body
    target_words: {words}
    prompt: "{prompt}"
"""

TARGETS: list[tuple[str, int, str]] = [
    ("en-500", 500, "Write an article of about 500 words: How bicycles changed city life."),
    ("en-1500", 1500, "Write an article of about 1500 words: The science of sourdough bread."),
    ("zh-800", 800, "请写一篇大约800字的文章：丝绸之路上的城市。"),
]
RECIPE_WORDS = 5000
RECIPE_TOPIC = "The history of lighthouses"


def run_quality(
    model: str, note: Callable[[str], None], out: Path | None = None, dtype: str | None = None
) -> dict[str, Any]:
    from gen.backends import open_backend
    from gen.pipeline.run.runner import prepare_run

    backend = open_backend(model, dtype=dtype)
    root = out or Path(tempfile.mkdtemp(prefix="gen-quality-"))
    pipelines = [
        (name, words, load_pipeline_text(SINGLE.format(name=name, model=model, words=words,
                                                        prompt=prompt), file=f"{name}.yaml"))
        for name, words, prompt in TARGETS
    ]  # fmt: skip
    recipe = load_pipeline(RECIPE, {"topic": RECIPE_TOPIC, "words": str(RECIPE_WORDS)})
    pipelines.append(("recipe-5000", RECIPE_WORDS, recipe))
    rows = []
    try:
        for name, target, pipeline in pipelines:
            note(f"{name}: generating")
            started = time.monotonic()
            prepared = prepare_run(pipeline, backend, root, model=model)
            manifest = asyncio.run(prepared.execute())
            # the document's text without the headings its template writes: the sections in
            # it, as the model wrote them (their own headings included)
            shown = {s.id for s in pipeline.sections if s.in_document}
            body = "\n\n".join(
                prepared.run_dir.section_path(s["id"]).read_text("utf-8")
                for s in manifest["sections"]
                if s["section"] in shown and s["status"] == "completed"
            )
            q = measure(body)
            words = count_words(body)
            rows.append(
                {
                    "name": name,
                    "target_words": target,
                    "words": words,
                    "length_score": round(length_score(target, max(1, words)), 1),
                    "distinct_4": round(q.distinct_4, 3),
                    "repeated_sentences": round(q.repeated_share, 3),
                    "degenerate_sections": manifest["metrics"]["sections_degenerate"],
                    "seconds": round(time.monotonic() - started, 1),
                    "document": str(prepared.run_dir.document_path),
                }
            )
    finally:
        asyncio.run(backend.aclose())
    scores = [r["length_score"] for r in rows]
    return {
        "model": model,
        "rows": rows,
        "length_score_avg": round(sum(scores) / len(scores), 1),
        "distinct_4_min": min(r["distinct_4"] for r in rows),
        "repeated_sentences_max": max(r["repeated_sentences"] for r in rows),
    }
