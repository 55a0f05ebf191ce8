"""The length plan in a run, with a scripted backend whose tokenizer spends two tokens a
word: a target gets the rounds it needs, an explicit max_rounds wins, and the manifest
and the dry run say when and why a target is out of reach."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

from gen.backends.base import Message
from gen.cli.dryrun import write_plan
from gen.pipeline.run.dryrun import plan_prompts
from gen.text.words import count_words
from tests.pipeline.fake_backend import FakeBackend, Reply, pipeline_from, run


class TwoTokensAWord(FakeBackend):
    """count_text: two tokens a word (prompts are still counted in characters)."""

    def count_text(self, text: str) -> int:
        return 2 * count_words(text)

    def render(self, messages: list[Message], continue_final: bool = False) -> str:
        return "".join(f"<{m['role']}>{m['content']}\n" for m in messages)


def one_section(prompt: str = "[s] Write the section.", **fields: Any) -> str:
    extra = "".join(f"    {k}: {v}\n" for k, v in fields.items())
    return (
        "name: plan\n"
        "defaults: {max_tokens: 10}\n"
        "sections:\n"
        "  - id: s\n"
        f'    prompt: "{prompt}"\n' + extra
    )


def rounds_of_three_words(n: int) -> list[Reply]:
    """Rounds cut off at max_tokens, each three new words (no loop to cut)."""
    return [(f"w{i}a w{i}b w{i}c ", "length") for i in range(n)]


def section_of(manifest: dict[str, Any]) -> dict[str, Any]:
    section: dict[str, Any] = manifest["sections"][0]
    return section


def test_a_target_gets_the_rounds_it_needs(tmp_path: Path) -> None:
    # 30 words x 2 tokens = 60 tokens, 1.5 times over in rounds of 10: 9 rounds, not 4
    backend = TwoTokensAWord({"s": rounds_of_three_words(9)})
    manifest, _ = run(pipeline_from(one_section(target_words=30)), backend, tmp_path)
    section = section_of(manifest)
    assert len(section["rounds"]) == 9
    plan = section["length_plan"]
    assert {k: plan[k] for k in ("rounds", "rounds_from", "words", "tokens_per_word")} == {
        "rounds": 9,
        "rounds_from": "target",
        "words": 30,
        "tokens_per_word": 2.0,
    }
    assert plan["script"] == "latin" and plan["tokens"] == 60
    # 27 words when the rounds ran out: the plan says so after the run
    assert section["truncated"] and section["words"] == 27
    assert plan["reachable"] is False
    assert plan["why"].startswith("it stopped at 27 words when its 9 rounds ran out")
    assert manifest["settings"]["s"]["max_rounds"] is None


def test_an_explicit_max_rounds_wins(tmp_path: Path) -> None:
    backend = TwoTokensAWord({"s": rounds_of_three_words(2)})
    manifest, _ = run(pipeline_from(one_section(target_words=30, max_rounds=2)), backend, tmp_path)
    section = section_of(manifest)
    assert len(section["rounds"]) == 2
    plan = section["length_plan"]
    assert (plan["rounds"], plan["rounds_from"], plan["reachable"]) == (2, "max_rounds", False)
    assert plan["why"].startswith("max_rounds 2 x max_tokens 10 = 20 tokens hold about 10 words")
    assert plan["why"].endswith("leave max_rounds unset to plan 9 rounds")


def test_a_section_without_a_target_keeps_four_rounds(tmp_path: Path) -> None:
    backend = TwoTokensAWord({"s": rounds_of_three_words(4)})
    manifest, _ = run(pipeline_from(one_section()), backend, tmp_path)
    section = section_of(manifest)
    assert len(section["rounds"]) == 4 and section["truncated"]
    assert section["length_plan"] == {
        "rounds": 4,
        "rounds_from": "default",
        "words": None,
        "script": None,
        "tokens_per_word": None,
        "tokens": None,
        "room": None,
        "reachable": True,
        "why": None,
    }


def test_a_target_the_window_cannot_hold_is_reported(tmp_path: Path) -> None:
    backend = TwoTokensAWord({"s": [("Done.", "stop")]}, context_window=600)
    yaml = one_section(target_words=1000, plan="false") + "context: {window: auto, reserve: 64}\n"
    manifest, prepared = run(pipeline_from(yaml), backend, tmp_path)
    plan = section_of(manifest)["length_plan"]
    assert plan["reachable"] is False and plan["tokens"] == 2000
    room = 600 - section_of(manifest)["rounds"][0]["prompt_tokens"]
    assert plan["room"] == room
    assert f"more than the {room} the 600-token context window leaves" in plan["why"]
    # no more rounds than the window can take: not the 300 that 2000 tokens would get
    assert plan["rounds"] == math.ceil(room * 1.5 / 10)
    saved = json.loads((prepared.run_dir.path / "manifest.json").read_text("utf-8"))
    assert saved["sections"][0]["length_plan"] == plan


def test_a_chinese_prompt_is_planned_on_the_cjk_sample(tmp_path: Path) -> None:
    class TwoTokensACharacter(TwoTokensAWord):
        def count_text(self, text: str) -> int:
            cjk = sum("\u4e00" <= ch <= "\u9fff" for ch in text)
            return 2 * cjk + count_words(text) - cjk

    backend = TwoTokensACharacter({"s": [("好。", "stop")]})
    yaml = one_section("[s] 请写一篇关于河流的文章。", target_words=40, max_tokens=20)
    manifest, _ = run(pipeline_from(yaml), backend, tmp_path)
    plan = section_of(manifest)["length_plan"]
    assert plan["script"] == "cjk" and 1.9 < plan["tokens_per_word"] <= 2.0
    assert plan["rounds"] == 6  # ceil(40 x ~1.96 x 1.5 / 20)


def test_the_dry_run_shows_the_plan_and_the_warning() -> None:
    backend = TwoTokensAWord()
    pipeline = pipeline_from(
        "defaults: {max_tokens: 10}\n"
        "sections:\n"
        "  - {id: a, prompt: '[a] Write.', target_words: 30}\n"
        "  - {id: b, prompt: '[b] Write.', target_words: 30, max_rounds: 2}\n"
        "  - {id: c, prompt: '[c] Write.'}\n"
    )
    plans = plan_prompts(pipeline, backend)
    assert [p.to_json()["length_plan"]["rounds"] for p in plans] == [9, 2, 4]
    out = io.StringIO()
    for plan in plans:
        write_plan(plan, out)
    text = out.getvalue()
    assert "# 9 rounds for 30 words, about 60 tokens at 2.00 tokens a word (latin script" in text
    assert "# 2 rounds (max_rounds) for 30 words" in text
    assert "# 4 rounds (no length target)" in text
    warnings = [line for line in text.splitlines() if line.startswith("# warning:")]
    assert warnings == [
        "# warning: sections.b: a target of 30 words cannot be reached: max_rounds 2 x "
        "max_tokens 10 = 20 tokens hold about 10 words at 2.00 tokens a word (latin script, "
        "measured with the model's tokenizer), and 30 words take about 60; leave max_rounds "
        "unset to plan 9 rounds"
    ]
