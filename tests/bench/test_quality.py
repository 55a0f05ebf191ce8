"""`gen bench --quality` on a scripted fake backend: each case runs with N seeds and its row
holds the spread of their word counts; one seed is the bench as it was. No timing is
asserted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gen.bench.quality import RECIPE, RECIPE_NAME, SINGLE_SEED, TARGETS, run_quality, word_spread
from gen.cli import main
from gen.pipeline import load_pipeline
from tests.bench import PIPELINES, bench
from tests.pipeline.fake_backend import FakeBackend, Reply, install

# the keys a row had before --seeds, and the ones it adds
ROW_KEYS = {"name", "target_words", "words", "length_score", "distinct_4",
            "repeated_sentences", "degenerate_sections", "seconds", "document"}  # fmt: skip
SPREAD_KEYS = {"words_each", "words_mean", "words_min", "words_max", "words_spread", "words_cv"}
RUN_KEYS = {"seed", "words", "length_score", "distinct_4", "repeated_sentences",
            "degenerate_sections", "seconds", "document"}  # fmt: skip


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
    assert [x["name"] for x in r["rows"]] == [name for name, _, _ in TARGETS] + [RECIPE_NAME]
    first = {name: SINGLE_SEED for name, _, _ in TARGETS} | {RECIPE_NAME: recipe_seed()}
    assert len(notes) == 4 * 3
    every = []
    for row in r["rows"]:
        assert set(row) == ROW_KEYS | SPREAD_KEYS | {"seeds", "runs"}
        base = first[row["name"]]
        assert row["seeds"] == [base, base + 1, base + 2]
        assert [run["seed"] for run in row["runs"]] == row["seeds"]
        for run in row["runs"]:
            assert set(run) == RUN_KEYS and Path(run["document"]).is_file()
        assert len({run["document"] for run in row["runs"]}) == 3  # a run directory each
        assert row["document"] == row["runs"][0]["document"]
        words = [run["words"] for run in row["runs"]]
        assert {k: row[k] for k in SPREAD_KEYS} == word_spread(words)
        assert row["words"] == round(sum(words) / 3) and len(set(words)) > 1
        assert row["degenerate_sections"] == max(x["degenerate_sections"] for x in row["runs"])
        every += row["runs"]
    assert r["distinct_4_min"] == min(x["distinct_4"] for x in every)
    assert r["repeated_sentences_max"] == max(x["repeated_sentences"] for x in every)
    assert r["words_spread_max"] == max(x["words_spread"] for x in r["rows"]) > 0
    assert r["words_cv_max"] == max(x["words_cv"] for x in r["rows"]) > 0


def test_one_seed_is_the_bench_as_it_was(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    install(monkeypatch, Varying())
    r = run_quality("fake-model", lambda _: None, tmp_path, seeds=1, pipelines=PIPELINES)
    assert {"model", "rows", "length_score_avg", "distinct_4_min", "repeated_sentences_max"} <= set(
        r
    )
    for row in r["rows"]:
        (run,) = row["runs"]
        assert {k: row[k] for k in RUN_KEYS - {"seed"}} == {k: run[k] for k in RUN_KEYS - {"seed"}}
        assert (row["words_spread"], row["words_cv"]) == (0.0, 0.0)
    assert [x["seeds"] for x in r["rows"]][-1] == [recipe_seed()]
    with pytest.raises(ValueError, match="seeds must be at least 1, got 0"):
        run_quality("fake-model", lambda _: None, tmp_path, seeds=0, pipelines=PIPELINES)


def test_the_cli_prints_the_spread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, Varying())
    assert bench("--quality", "--seeds", "2", out=tmp_path) == 0
    table = capsys.readouterr().out
    head, *rows = table.splitlines()
    assert "words (2 seeds)" in head and "cv" in head
    assert rows[0].startswith("en-500") and "spread" in rows[0] and "–" in rows[0]
    assert "widest spread" in table

    assert bench("--quality", "--seeds", "1", "--json", out=tmp_path) == 0
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert printed["seeds"] == 1 and len(printed["rows"]) == 4

    assert bench("--quality", "--seeds", "1", out=tmp_path) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.split() == ["document", "target", "words", "S_l", "distinct-4", "repeated",
                            "seconds"]  # fmt: skip
    with pytest.raises(SystemExit):
        main(["bench", "--quality", "--seeds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err


def test_only_runs_the_named_documents(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    install(monkeypatch, Varying())
    only = ["zh-800", RECIPE_NAME]
    r = run_quality("fake-model", lambda _: None, tmp_path, seeds=2, only=only, pipelines=PIPELINES)
    assert [x["name"] for x in r["rows"]] == ["zh-800", RECIPE_NAME]
    assert all(len(x["runs"]) == 2 for x in r["rows"])
    with pytest.raises(ValueError, match="no quality case named en-9000"):
        run_quality("fake-model", lambda _: None, tmp_path, only=["en-9000"], pipelines=PIPELINES)
    with pytest.raises(SystemExit):
        main(["bench", "--quality", "--only", "en-9000"])
    err = capsys.readouterr().err
    assert "no document named en-9000" in err and "recipe-5000" in err
