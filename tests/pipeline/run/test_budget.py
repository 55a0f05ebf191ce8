"""The context budget: fit_prompt's trimming order and numbers, the orchestrator with a
small `context.window`, and instructions that cannot fit (exit code 2 before any call)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gen.backends.base import Message
from gen.cli import main
from gen.errors import ContextOverflowError
from gen.pipeline.run.budget import fit_prompt
from tests.pipeline.conftest import WritePipeline
from tests.pipeline.fake_backend import (
    FakeBackend,
    Reply,
    count_chars,
    install,
    pipeline_from,
    read_events,
    run,
    sections_by_id,
)

INSTRUCTIONS = "Write part 4. "
OUTLINE = " ".join(f"o{i}" for i in range(10))  # 29 characters
EARLIER = "\n\n".join(" ".join(f"{s}{i}" for i in range(10)) for s in "ab")  # oldest first
PREVIOUS = " ".join(f"p{i}" for i in range(10))
VARIABLES = {"topic": "tea", "outline": OUTLINE, "earlier": EARLIER, "previous": PREVIOUS}


def build(v: dict[str, Any]) -> list[Message]:
    content = f"{INSTRUCTIONS}O[{v['outline']}] E[{v['earlier']}] P[{v['previous']}]"
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}]


FULL = count_chars(build(VARIABLES))
BASE = count_chars(build({**VARIABLES, "outline": "", "earlier": "", "previous": ""}))


def fit(limit: int) -> Any:
    return fit_prompt(build, VARIABLES, count_chars, limit, "section 'part-4'")


def test_everything_fits() -> None:
    fitted = fit(FULL)
    assert (fitted.prompt_tokens, fitted.trimmed_tokens, fitted.trimmed) == (FULL, 0, {})
    assert fitted.messages == build(VARIABLES)


def test_earlier_sections_go_first_oldest_first() -> None:
    fitted = fit(FULL - 12)
    v = fitted.variables
    assert v["earlier"] == EARLIER[12:]  # the head (the oldest section) is cut
    assert v["earlier"].endswith("b9") and not v["earlier"].startswith("a0")
    assert (v["outline"], v["previous"]) == (OUTLINE, PREVIOUS)
    assert fitted.trimmed == {"earlier": 12}
    assert fitted.prompt_tokens == FULL - 12
    assert fitted.trimmed_tokens == FULL - fitted.prompt_tokens


def test_then_the_head_of_the_previous_section() -> None:
    fitted = fit(FULL - len(EARLIER) - 5)
    v = fitted.variables
    assert v["earlier"] == ""
    assert v["previous"] == PREVIOUS[5:]  # its tail, nearest the new text, stays
    assert v["outline"] == OUTLINE
    assert fitted.trimmed == {"earlier": len(EARLIER), "previous": 5}
    assert fitted.trimmed_tokens == FULL - fitted.prompt_tokens == len(EARLIER) + 5


def test_then_the_outline() -> None:
    fitted = fit(BASE + 7)
    v = fitted.variables
    assert (v["earlier"], v["previous"]) == ("", "")
    assert v["outline"] == OUTLINE[:7]  # an outline is read from the top
    assert fitted.trimmed == {"earlier": len(EARLIER), "previous": len(PREVIOUS), "outline": 22}
    assert fitted.prompt_tokens == BASE + 7
    assert fitted.trimmed_tokens == FULL - (BASE + 7)
    assert INSTRUCTIONS in fitted.messages[1]["content"]  # instructions are never cut


@pytest.mark.parametrize("limit", range(BASE, FULL + 1, 7))
def test_fitted_prompt_never_exceeds_the_limit(limit: int) -> None:
    fitted = fit(limit)
    assert fitted.prompt_tokens == count_chars(fitted.messages) <= limit
    assert fitted.trimmed_tokens == FULL - fitted.prompt_tokens
    assert fitted.messages[0] == {"role": "system", "content": "Be brief."}


def test_instructions_alone_too_long() -> None:
    with pytest.raises(ContextOverflowError) as info:
        fit(BASE - 1)
    err = info.value
    assert (err.prompt_tokens, err.limit) == (BASE, BASE - 1)
    assert f"take {BASE} tokens" in str(err) and f"use only {BASE - 1}" in str(err)
    assert "section 'part-4'" in str(err)


# -- through the orchestrator -----------------------------------------------------------

RESERVE = 20
BUDGET = """
name: budget
context: {{window: {window}, reserve: 20}}
defaults: {{max_tokens: 10, max_rounds: 1}}
sections:
  - {{id: outline, prompt: "[outline] o"}}
  - {{id: a, prompt: "[a] a", depends_on: [outline]}}
  - {{id: b, prompt: "[b] b", depends_on: [a]}}
  - {{id: c, prompt: "[c] c", depends_on: [b]}}
  - id: d
    context: [outline, previous, all]
    prompt: "[d] Write d. O[{{{{ outline }}}}] E[{{{{ earlier }}}}] P[{{{{ previous }}}}]"
"""
TEXTS = {k: " ".join(f"{k}{i}" for i in range(10)) for k in ("outline", "a", "b", "c")}
EARLIER_D = TEXTS["a"] + "\n\n" + TEXTS["b"]  # what d sees as `earlier`


def run_budget(tmp_path: Path, window: int) -> tuple[dict[str, Any], str, FakeBackend, Path]:
    scripts: dict[str, list[Reply]] = {k: [(t, "stop")] for k, t in TEXTS.items()}
    backend = FakeBackend(scripts)
    pipeline = pipeline_from(BUDGET.format(window=window))
    manifest, prepared = run(pipeline, backend, tmp_path / str(window))
    (call,) = backend.calls_for("d")
    return manifest, call.messages[-1]["content"], backend, prepared.run_dir.path


@pytest.fixture(scope="module")
def full_prompt(tmp_path_factory: pytest.TempPathFactory) -> str:
    _, prompt, _, _ = run_budget(tmp_path_factory.mktemp("full"), 10_000)
    assert prompt == f"[d] Write d. O[{TEXTS['outline']}] E[{EARLIER_D}] P[{TEXTS['c']}]"
    return prompt


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        (0, (EARLIER_D, TEXTS["c"])),
        (15, (EARLIER_D[15:], TEXTS["c"])),  # the head of the oldest section goes first
        (len(EARLIER_D), ("", TEXTS["c"])),
        (len(EARLIER_D) + 7, ("", TEXTS["c"][7:])),  # then the head of the previous one
    ],
)
def test_orchestrator_trims_to_the_window(
    tmp_path: Path, full_prompt: str, cut: int, kept: tuple[str, str]
) -> None:
    window = len(full_prompt) + RESERVE - cut
    manifest, prompt, _, run_dir = run_budget(tmp_path, window)
    assert manifest["status"] == "completed"
    earlier, previous = kept
    assert prompt == f"[d] Write d. O[{TEXTS['outline']}] E[{earlier}] P[{previous}]"
    assert len(prompt) <= window - RESERVE
    (rnd,) = sections_by_id(manifest)["d"]["rounds"]
    assert rnd["trimmed_tokens"] == len(full_prompt) - len(prompt) == cut
    assert rnd["prompt_tokens"] == len(prompt)
    started = [
        e
        for e in read_events(run_dir / "events.jsonl")
        if e["type"] == "section_started" and e["section"] == "d"
    ]
    assert started[0]["trimmed_tokens"] == cut
    assert manifest["metrics"]["trimmed_tokens"] == cut


def test_orchestrator_cuts_the_outline_last(tmp_path: Path, full_prompt: str) -> None:
    bare = len("[d] Write d. O[] E[] P[]")
    manifest, prompt, _, _ = run_budget(tmp_path, bare + 6 + RESERVE)
    assert prompt == "[d] Write d. O[outlin] E[] P[]"
    (rnd,) = sections_by_id(manifest)["d"]["rounds"]
    assert rnd["trimmed_tokens"] == len(full_prompt) - len(prompt)


def test_kv_rounds_stop_when_the_window_is_full(tmp_path: Path) -> None:
    text = (
        "name: full\ncontext: {window: 40, reserve: 0}\n"
        "defaults: {max_tokens: 10, max_rounds: 5}\n"
        'sections:\n  - {id: s, prompt: "[s] twenty-eight characters!"}\n'
    )
    backend = FakeBackend({"s": [("x" * 10, "length"), ("y" * 2, "length")]})
    manifest, _ = run(pipeline_from(text), backend, tmp_path)
    assert backend.calls[0].params.max_tokens == 10
    assert backend.resumes == [("s", 2)]  # only what is left of the window
    sec = manifest["sections"][0]
    assert (sec["status"], sec["truncated"], len(sec["rounds"])) == ("completed", True, 2)
    assert manifest["metrics"]["context_utilization_max"] == 1.0


@pytest.mark.parametrize(("strategy", "window"), [("prefix", 200), ("chat", 400)])
def test_resent_rounds_stop_when_the_budget_is_full(
    tmp_path: Path, strategy: str, window: int
) -> None:
    # each round re-sends the text so far; once it cannot fit, the section ends truncated
    text = (
        f"name: full\ncontext: {{window: {window}, reserve: 40}}\n"
        f"defaults: {{max_tokens: 40, max_rounds: 8, continuation: {strategy}}}\n"
        'sections:\n  - {id: s, prompt: "[s] go"}\n'
    )
    backend = FakeBackend({"s": [(f"abcdefgh{i} " * 4, "length") for i in range(1, 9)]})
    manifest, prepared = run(pipeline_from(text), backend, tmp_path)
    sec = manifest["sections"][0]
    assert (manifest["status"], sec["status"], sec["truncated"]) == (
        "completed",
        "completed",
        True,
    )
    assert 1 < len(sec["rounds"]) < 8
    for call in backend.calls:
        assert count_chars(call.messages) <= window - 40
    saved = (prepared.run_dir.sections_dir / "s.md").read_text("utf-8")
    written = "".join(f"abcdefgh{i} " * 4 for i in range(1, len(sec["rounds"]) + 1))
    assert saved == written.rstrip()


# -- instructions that cannot fit: exit code 2, located, before any generation ----------


def test_cli_instructions_too_long_exit_2(
    write_pipeline: WritePipeline,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = write_pipeline(
        """
        name: tight
        context:
          window: 60
          reserve: 20
        sections:
          - id: intro
            prompt: "[intro] Write a long, careful and detailed introduction to {{ topic }}."
        inputs:
          topic: the history of tea
        """
    )
    backend = FakeBackend()
    install(monkeypatch, backend)
    code = main(["run", str(path), "--out", str(path.parent / "out")])
    err = capsys.readouterr().err
    assert code == 2
    tokens = len("[intro] Write a long, careful and detailed introduction to the history of tea.")
    assert f"{path}:7:13: " in err
    assert f"{tokens} tokens" in err and "only 40" in err
    assert "7 |     prompt:" in err and "^" in err
    assert "Traceback" not in err
    assert backend.calls == []
    assert not (path.parent / "out").exists()
