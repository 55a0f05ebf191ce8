"""`gen bench --quality` on a scripted fake backend: each case runs with N seeds and its row
holds the spread of their word counts; one seed is the bench as it was. No timing is
asserted."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gen.bench.quality import (
    CASES,
    RECIPE,
    RECIPE_NAME,
    SINGLE_SEED,
    case_pipeline,
    run_quality,
    word_spread,
)
from gen.cli import main
from gen.pipeline import load_pipeline
from tests.bench import PIPELINES, bench
from tests.pipeline.fake_backend import FakeBackend, Reply, install

# the keys a row had before --seeds, the reader's (each run's, the row's worst seed's), and
# the ones --seeds adds
ROW_KEYS = {"name", "target_words", "words", "length_score", "distinct_4",
            "repeated_sentences", "degenerate_sections", "seconds", "document"}  # fmt: skip
READER_KEYS = {"junk", "language_share", "chatter", "chatter_share", "relevance",
               "sections_failed", "failed_reasons", "truncated", "cuts", "yields"}  # fmt: skip
SPREAD_KEYS = {"words_each", "words_mean", "words_min", "words_max", "words_spread", "words_cv"}
RUN_KEYS = {"seed", "words", "length_score", "distinct_4", "repeated_sentences",
            "degenerate_sections", "seconds", "document", "misses"} | READER_KEYS  # fmt: skip
NAMES = [c.name for c in CASES] + [RECIPE_NAME]


@dataclass
class Varying(FakeBackend):
    """Replies of 1 to 7 new words in turn, so that runs end at different lengths."""

    replies: int = 0

    def take(self, key: str) -> Reply:
        self.replies += 1
        return " ".join(f"w{self.replies}n{i}" for i in range(self.replies % 7 + 1)) + ".", "stop"


def test_the_spread_of_known_word_counts() -> None:
    s = word_spread([450, 500, 550])
    assert (s["words_mean"], s["words_min"], s["words_max"]) == (500.0, 450, 550)
    assert s["words_spread"] == 0.2  # (550 - 450) / 500
    assert s["words_cv"] == 0.1  # sample stdev 50 / 500
    assert s["words_each"] == [450, 500, 550]
    one = word_spread([512])
    assert (one["words_mean"], one["words_spread"], one["words_cv"]) == (512.0, 0.0, 0.0)
    uneven = word_spread([488, 530, 512, 500, 530])
    assert uneven["words_spread"] == round(42 / 512, 3) and uneven["words_cv"] == 0.036
    assert word_spread([0, 0])["words_spread"] == 0.0
    with pytest.raises(ValueError, match="at least one"):
        word_spread([])


def recipe_seed() -> int:
    seed = load_pipeline(PIPELINES / RECIPE).defaults.seed
    assert seed is not None
    return seed


def test_each_case_runs_with_n_seeds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    install(monkeypatch, Varying())
    notes: list[str] = []
    r = run_quality("fake-model", notes.append, tmp_path, seeds=3, pipelines=PIPELINES)
    assert r["seeds"] == 3
    assert [x["name"] for x in r["rows"]] == NAMES
    first = {c.name: SINGLE_SEED for c in CASES} | {RECIPE_NAME: recipe_seed()}
    assert len(notes) == len(NAMES) * 3
    every = []
    for row in r["rows"]:
        assert set(row) == ROW_KEYS | READER_KEYS | SPREAD_KEYS | {
            "seeds", "runs", "off_target", "off_target_unexplained"}  # fmt: skip
        base = first[row["name"]]
        assert row["seeds"] == [base, base + 1, base + 2]
        assert [run["seed"] for run in row["runs"]] == row["seeds"]
        for run in row["runs"]:
            assert set(run) == RUN_KEYS and Path(run["document"]).is_file()
        assert len({run["document"] for run in row["runs"]}) == 3  # a run directory each
        assert row["document"] == row["runs"][0]["document"]
        words = [run["words"] for run in row["runs"]]
        assert {k: row[k] for k in SPREAD_KEYS} == word_spread(words)
        assert row["words"] == round(sum(words) / 3)
        assert row["degenerate_sections"] == max(x["degenerate_sections"] for x in row["runs"])
        every += row["runs"]
    assert r["distinct_4_min"] == min(x["distinct_4"] for x in every)
    assert r["repeated_sentences_max"] == max(x["repeated_sentences"] for x in every)
    assert r["words_spread_max"] == max(x["words_spread"] for x in r["rows"]) > 0
    assert sum(x["words_spread"] > 0 for x in r["rows"]) >= len(NAMES) - 1
    assert r["words_cv_max"] == max(x["words_cv"] for x in r["rows"]) > 0


def test_one_seed_is_the_bench_as_it_was(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    install(monkeypatch, Varying())
    r = run_quality("fake-model", lambda _: None, tmp_path, seeds=1, pipelines=PIPELINES)
    assert {"model", "rows", "length_score_avg", "distinct_4_min", "repeated_sentences_max"} <= set(
        r
    )
    for row in r["rows"]:
        (run,) = row["runs"]
        same = RUN_KEYS - {"seed", "misses"}
        assert {k: row[k] for k in same} == {k: run[k] for k in same}
        assert row["off_target"] == len(run["misses"])
        assert (row["words_spread"], row["words_cv"]) == (0.0, 0.0)
    assert [x["seeds"] for x in r["rows"]][-1] == [recipe_seed()]
    with pytest.raises(ValueError, match="seeds must be at least 1, got 0"):
        run_quality("fake-model", lambda _: None, tmp_path, seeds=0, pipelines=PIPELINES)


def test_the_cli_prints_the_spread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, Varying())
    few = ("--only", "en-150,zh-400")  # the whole set runs in test_each_case_runs_with_n_seeds
    assert bench("--quality", "--seeds", "2", *few, out=tmp_path) == 0
    table = capsys.readouterr().out
    head, *rows = table.splitlines()
    assert "words (2 seeds)" in head and "cv" in head
    assert rows[0].startswith("en-150") and "spread" in rows[0] and "–" in rows[0]
    assert "widest spread" in table

    assert bench("--quality", "--seeds", "1", "--json", *few, out=tmp_path) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert printed["seeds"] == 1 and [x["name"] for x in printed["rows"]] == ["en-150", "zh-400"]
    assert set(printed["rows"][0]) >= READER_KEYS

    assert bench("--quality", "--seeds", "1", *few, out=tmp_path) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.split() == ["document", "target", "words", "S_l", "<80", "distinct-4",
                            "repeated", "junk", "language", "chatter", "relevance", "failed",
                            "truncated", "cuts", "yields", "seconds"]  # fmt: skip
    with pytest.raises(SystemExit):
        main(["bench", "--quality", "--seeds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err


def test_only_runs_the_named_documents(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, Varying())
    only = ["zh-2000", RECIPE_NAME]
    r = run_quality("fake-model", lambda _: None, tmp_path, seeds=2, only=only, pipelines=PIPELINES)
    assert [x["name"] for x in r["rows"]] == ["zh-2000", RECIPE_NAME]
    assert all(len(x["runs"]) == 2 for x in r["rows"])
    with pytest.raises(ValueError, match="no quality case named en-9000"):
        run_quality("fake-model", lambda _: None, tmp_path, only=["en-9000"], pipelines=PIPELINES)
    with pytest.raises(SystemExit):
        main(["bench", "--quality", "--only", "en-9000"])
    err = capsys.readouterr().err
    assert "no document named en-9000" in err and "recipe-5000" in err


def test_a_case_is_a_prompt_and_a_target_with_gens_defaults() -> None:
    """What a new user writes: no max_tokens, max_rounds or temperature; the bench sets the
    model and the seed. Among the cases, a plan, a dialogue and 2,000 Chinese characters."""
    for case in CASES:
        pipeline = case_pipeline(case, "smollm2-135m", 41)
        (body,) = pipeline.sections
        assert body.overrides() == {} and body.target_words == case.target
        assert body.prompt == case.prompt
        assert pipeline.defaults.model_fields_set == {"seed"} and pipeline.defaults.seed == 41
        assert pipeline.model == "smollm2-135m"
    targets = {c.name: c.target for c in CASES}
    prompts = {c.name: c.prompt for c in CASES}
    assert [targets[n] for n in ("en-150", "en-600-plan", "en-1500-dialogue", "en-3000")] == [
        150, 600, 1500, 3000]  # fmt: skip
    assert targets["zh-400"] == 400 and targets["zh-2000"] >= 1500
    assert "learning plan" in prompts["en-600-plan"]
    assert "dialogue" in prompts["en-1500-dialogue"]


# a reply as a reader would not want it: a junk line, then one Chinese sentence over and over
JUNK_REPLY = "茶马古道连接四川、云南和西藏。\n\n🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊🌊\n\n" + (
    "马帮走过高山和河谷，把茶叶运到远方。" * 130
)


def test_a_documents_row_reads_its_manifest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real run on the fake: the junk line dropped and counted, the text all in the wanted
    script, the loop cut so the section fails far short of its target and says why; no
    chatter; relevance shown as absent until the manifest records it."""
    install(monkeypatch, FakeBackend(scripts={"default": [(JUNK_REPLY, "stop")] * 20}))
    r = run_quality("fake-model", lambda _: None, tmp_path, seeds=1, only=["zh-2000"],
                    pipelines=PIPELINES)  # fmt: skip
    (row,) = r["rows"]
    assert row["junk"] >= 1 and row["language_share"] == 1.0
    assert (row["chatter"], row["chatter_share"], row["relevance"]) == (0, None, None)
    assert (row["sections_failed"], row["failed_reasons"]) == (1, {"loops": 1})
    assert (row["off_target"], row["off_target_unexplained"]) == (1, 0)
    (miss,) = r["misses"]
    assert miss["name"] == "zh-2000" and miss["seed"] == SINGLE_SEED and miss["section"] == "body"
    assert miss["words"] == row["words"] < 2000 and "loops" in miss["why"]
    document = Path(row["document"]).read_text("utf-8")
    assert "马帮走过高山" in document and "🌊" not in document

    install(monkeypatch, FakeBackend(scripts={"default": [(JUNK_REPLY, "stop")] * 20}))
    assert bench("--quality", "--seeds", "1", "--only", "zh-2000", out=tmp_path) == 0
    head, row_line, *below = capsys.readouterr().out.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", head)] + [len(row_line)]
    cells = {name: row_line[a:b].strip()
             for name, a, b in zip(head.split(), starts, starts[1:], strict=False)}  # fmt: skip
    assert (cells["chatter"], cells["relevance"], cells["language"]) == ("0", "—", "100%")
    assert (cells["failed"], cells["<80"], cells["truncated"]) == ("1 (loops)", "1", "0")
    assert below[-1].startswith("<80: zh-2000, seed 23, section body: ")
    assert below[-1].endswith("of 2000 words, S_l 0.0: loops")
