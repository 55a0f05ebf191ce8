"""`gen bench --quality`: long texts as a reader gets them. Single-section pipelines as a new
user writes them (a prompt and a target, gen's defaults, the seed the bench sets) from 150
to 3,000 words, a plan and a dialogue among them, Chinese of 400 and 2,000 characters, and
the long-article recipe at 5,000 words; each on a topic no test uses and each run with N
seeds. Per document: words (and their spread across the seeds), S_l, distinct-4, repeated
sentences, and what the manifest says a reader was spared or given: junk lines dropped, the
share in the wanted script, chatter cut, relevance, sections failed and why, truncated
sections, and every section that ended under S_l 80 with the reason it gives (or none)."""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.backends.base import Backend
from gen.bench.reading import reader_figures, reader_row
from gen.engine.config import EngineConfig
from gen.pipeline import Pipeline, load_pipeline, load_pipeline_text
from gen.text.quality import measure
from gen.text.words import count_words, length_score

RECIPE = "long-article.yaml"  # in the bundled pipelines' folder the caller names

# a case as a new user writes it: a prompt and a target, nothing else; the model named
# and the seed set (as `defaults.seed`) by the bench
CASE_YAML = """
name: quality-{name}
model: {model}
sections:
  - id: body
    target_words: {target}
    prompt: {prompt}
"""
SINGLE_SEED = 23  # a single section's first seed; the recipe's is its defaults.seed


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    target: int  # words; characters for Chinese
    prompt: str


CASES = [
    Case("en-150", 150, "Write about 150 words on why tide pools are worth visiting at low tide."),
    Case("en-600-plan", 600,
         "Help me establish a 600 words learning plan for playing the cello as an adult."),
    Case("en-1500-dialogue", 1500,
         "Write a short story of about 1500 words, told mostly in dialogue, about two "
         "astronomers waiting out a snowstorm at a mountain observatory."),
    Case("en-3000", 3000,
         "Write an article of about 3000 words on the history of canals and the boats "
         "that worked them."),
    Case("zh-400", 400, "请写一篇大约400字的短文：清晨的菜市场。"),
    Case("zh-2000", 2000, "请写一篇大约2000字的文章：茶马古道的历史与今天。"),
]  # fmt: skip
RECIPE_NAME = "recipe-5000"
RECIPE_WORDS = 5000
RECIPE_TOPIC = "The history of lighthouses"
SEEDS = 5
CASE_NAMES = [c.name for c in CASES] + [RECIPE_NAME]


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
    of one document over the seeds: the means of words, S_l, distinct-4, repeated sentences
    and seconds; the worst seed's of the rest (reader_row); the spread of its words and
    every run. `only` names the cases to run (all of them when None); `pipelines`, the
    folder that holds the recipe (read only when it runs)."""
    from gen.backends import open_backend

    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    unknown = sorted(set(only or ()) - set(CASE_NAMES))
    if unknown:
        raise ValueError(f"no quality case named {', '.join(unknown)}; "
                         f"the cases are {', '.join(CASE_NAMES)}")  # fmt: skip
    wanted = set(only or CASE_NAMES)
    # every pipeline loaded (and checked) before anything is generated
    cases = [(c.name, c.target, case_pipeline(c, model, SINGLE_SEED + i))
             for c in CASES if c.name in wanted
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
        # every section under S_l 80, with its document and seed
        "misses": [
            {"name": name, "seed": r["seed"]} | miss
            for (name, _), each in runs.items()
            for r in each
            for miss in r["misses"]
        ],
    }


def case_pipeline(case: Case, model: str, seed: int) -> Pipeline:
    """The case's pipeline for `model` with `seed` as its defaults.seed."""
    text = CASE_YAML.format(
        name=case.name,
        model=model,
        target=case.target,
        prompt=json.dumps(case.prompt, ensure_ascii=False),
    )
    return load_pipeline_text(text, file=f"{case.name}.yaml", overrides={"defaults.seed": seed})


def _recipe(pipelines: Path, seed: int | None) -> Pipeline:
    """The long-article recipe in `pipelines`; `seed` in place of its defaults.seed where
    given."""
    overrides = {"topic": RECIPE_TOPIC, "words": str(RECIPE_WORDS)}
    if seed is not None:
        overrides["defaults.seed"] = str(seed)
    return load_pipeline(pipelines / RECIPE, overrides)


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
        **reader_figures(manifest, shown),
        "seconds": round(time.monotonic() - started, 1),
        "document": str(prepared.run_dir.document_path),
    }


def _row(name: str, target: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A case over its seeds: the means (the first seed's document), the reader's figures of
    the worst seed, the spread, each run."""
    spread = word_spread([r["words"] for r in runs])
    return {
        "name": name,
        "target_words": target,
        "words": round(spread["words_mean"]),
        "length_score": _mean(r["length_score"] for r in runs),
        "distinct_4": _mean((r["distinct_4"] for r in runs), 3),
        "repeated_sentences": _mean((r["repeated_sentences"] for r in runs), 3),
        "degenerate_sections": max(r["degenerate_sections"] for r in runs),
        **reader_row(runs),
        "seconds": _mean(r["seconds"] for r in runs),
        "document": runs[0]["document"],
        "seeds": [r["seed"] for r in runs],
        **spread,
        "runs": runs,
    }


def _mean(values: Any, digits: int = 1) -> float:
    return round(statistics.fmean(values), digits)
