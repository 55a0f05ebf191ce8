"""`gen bench --quality`: long texts as a reader gets them. Fixed targets (single sections of
500 and 1,500 words, an 800-character Chinese section, the long-article recipe at 5,000
words), each on a topic no test uses and each run with N seeds, with words (and their spread
across the seeds), S_l, distinct-4, repeated sentences and seconds per document."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gen.backends.base import Backend
from gen.engine.config import EngineConfig
from gen.pipeline import Pipeline, load_pipeline, load_pipeline_text
from gen.text.quality import measure
from gen.text.words import count_words, length_score

RECIPE = "long-article.yaml"  # in the bundled pipelines' folder the caller names

SINGLE = """
name: quality-{name}
model: {model}
defaults: {{temperature: 0.7, seed: {seed}, max_tokens: 256, max_rounds: 40}}
sections:
  - id: body
    target_words: {words}
    prompt: "{prompt}"
"""
SINGLE_SEED = 23  # a single section's first seed; the recipe's is its defaults.seed

TARGETS: list[tuple[str, int, str]] = [
    ("en-500", 500, "Write an article of about 500 words: How bicycles changed city life."),
    ("en-1500", 1500, "Write an article of about 1500 words: The science of sourdough bread."),
    ("zh-800", 800, "请写一篇大约800字的文章：丝绸之路上的城市。"),
]
RECIPE_NAME = "recipe-5000"
RECIPE_WORDS = 5000
RECIPE_TOPIC = "The history of lighthouses"
SEEDS = 5
CASE_NAMES = [name for name, _, _ in TARGETS] + [RECIPE_NAME]


def word_spread(words: Sequence[int]) -> dict[str, Any]:
    """How far a case's word counts drift from seed to seed: each, their mean, min and max,
    the spread (max - min) / mean and the coefficient of variation (the sample standard
    deviation / mean; 0 for a single run)."""
    if not words:
        raise ValueError("word_spread needs at least one word count, got none")
    mean = statistics.fmean(words)
    stdev = statistics.stdev(words) if len(words) > 1 else 0.0
    return {
        "words_each": list(words),
        "words_mean": round(mean, 1),
        "words_min": min(words),
        "words_max": max(words),
        "words_spread": round((max(words) - min(words)) / mean, 3) if mean else 0.0,
        "words_cv": round(stdev / mean, 3) if mean else 0.0,
    }


def run_quality(
    model: str,
    note: Callable[[str], None],
    out: Path | None = None,
    engine: EngineConfig | None = None,
    seeds: int = SEEDS,
    only: Sequence[str] | None = None,
    *,
    pipelines: Path,
) -> dict[str, Any]:
    """Each case run with `seeds` seeds (its first seed + 0, 1, ...). A row keeps the figures
    of one document as the mean over the seeds (words, S_l, distinct-4, repeated sentences,
    seconds; degenerate sections: the worst seed), the spread of its words and every run.
    `only` names the cases to run (all of them when None); `pipelines`, the folder that holds
    the recipe (read only when it runs)."""
    from gen.backends import open_backend

    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    unknown = sorted(set(only or ()) - set(CASE_NAMES))
    if unknown:
        raise ValueError(f"no quality case named {', '.join(unknown)}; "
                         f"the cases are {', '.join(CASE_NAMES)}")  # fmt: skip
    wanted = set(only or CASE_NAMES)
    # every pipeline loaded (and checked) before anything is generated
    cases = [(name, words, _single(name, model, words, prompt, SINGLE_SEED + i))
             for name, words, prompt in TARGETS if name in wanted
             for i in range(seeds)]  # fmt: skip
    if RECIPE_NAME in wanted:
        recipe_seed = _recipe(pipelines, None).defaults.seed or 0
        cases += [
            (RECIPE_NAME, RECIPE_WORDS, _recipe(pipelines, recipe_seed + i)) for i in range(seeds)
        ]
    backend = open_backend(model, engine=engine)
    root = out or Path(tempfile.mkdtemp(prefix="gen-quality-"))
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        for name, target, pipeline in cases:
            seed = pipeline.defaults.seed
            note(f"{name}, seed {seed}: generating")
            runs.setdefault((name, target), []).append(
                {"seed": seed} | _measure(pipeline, target, backend, root, model)
            )
    finally:
        asyncio.run(backend.aclose())
    rows = [_row(name, target, each) for (name, target), each in runs.items()]
    every = [r for each in runs.values() for r in each]
    return {
        "model": model,
        "seeds": seeds,
        "rows": rows,
        "length_score_avg": _mean(r["length_score"] for r in rows),
        "distinct_4_min": min(r["distinct_4"] for r in every),
        "repeated_sentences_max": max(r["repeated_sentences"] for r in every),
        "words_spread_max": max(r["words_spread"] for r in rows),
        "words_cv_max": max(r["words_cv"] for r in rows),
    }


def _recipe(pipelines: Path, seed: int | None) -> Pipeline:
    """The long-article recipe in `pipelines`; `seed` in place of its defaults.seed where
    given."""
    overrides = {"topic": RECIPE_TOPIC, "words": str(RECIPE_WORDS)}
    if seed is not None:
        overrides["defaults.seed"] = str(seed)
    return load_pipeline(pipelines / RECIPE, overrides)


def _single(name: str, model: str, words: int, prompt: str, seed: int) -> Pipeline:
    text = SINGLE.format(name=name, model=model, words=words, prompt=prompt, seed=seed)
    return load_pipeline_text(text, file=f"{name}.yaml")


def _measure(
    pipeline: Pipeline, target: int, backend: Backend, root: Path, model: str
) -> dict[str, Any]:
    """One document's figures."""
    from gen.pipeline.run.runner import prepare_run

    started = time.monotonic()
    prepared = prepare_run(pipeline, backend, root, model=model)
    manifest = asyncio.run(prepared.execute())
    # the document's text without the headings its template writes: the sections in it, as
    # the model wrote them (their own headings included)
    shown = {s.id for s in pipeline.sections if s.in_document}
    body = "\n\n".join(
        prepared.run_dir.section_path(s["id"]).read_text("utf-8")
        for s in manifest["sections"]
        if s["section"] in shown and s["status"] == "completed"
    )
    q = measure(body)
    words = count_words(body)
    return {
        "words": words,
        "length_score": round(length_score(target, max(1, words)), 1),
        "distinct_4": round(q.distinct_4, 3),
        "repeated_sentences": round(q.repeated_share, 3),
        "degenerate_sections": manifest["metrics"]["sections_degenerate"],
        "seconds": round(time.monotonic() - started, 1),
        "document": str(prepared.run_dir.document_path),
    }


def _row(name: str, target: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A case over its seeds: the means (the first seed's document), the spread, each run."""
    spread = word_spread([r["words"] for r in runs])
    return {
        "name": name,
        "target_words": target,
        "words": round(spread["words_mean"]),
        "length_score": _mean(r["length_score"] for r in runs),
        "distinct_4": _mean((r["distinct_4"] for r in runs), 3),
        "repeated_sentences": _mean((r["repeated_sentences"] for r in runs), 3),
        "degenerate_sections": max(r["degenerate_sections"] for r in runs),
        "seconds": _mean(r["seconds"] for r in runs),
        "document": runs[0]["document"],
        "seeds": [r["seed"] for r in runs],
        **spread,
        "runs": runs,
    }


def _mean(values: Any, digits: int = 1) -> float:
    return round(statistics.fmean(values), digits)
