"""The long-article recipe's planning stays out of its parts: a part that says its plan,
its word budget, the instructions it was given or talks to the reader about the writing
keeps none of it in the document. Scripted backend, keyed by which of the recipe's
prompts it answers."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gen.backends.base import Message
from gen.pipeline import load_pipeline
from tests.pipeline.fake_backend import FakeBackend, Reply, run

RECIPE = Path(__file__).resolve().parents[3] / "pipelines" / "long-article.yaml"
TOPIC = "The keepers of lights"
OUTLINE = "1. The first keepers\n2. Lenses and lamps\n3. Lights that run themselves\n"

INTRO = "Keepers tended coastal lights for three centuries. Their work saved ships and crews."
PART1 = "The first keepers were often fishermen who burned coal in open braziers on the cliffs."
PART1_MORE = "Their wages were paid by the ports, and a bad night could cost a keeper his post."
PART2 = "Fresnel's lens of 1822 bent the light of one lamp into a beam seen twenty miles away."
PART3 = "By the 1960s automatic lamps and timers let one engineer look after a dozen lights."
ENDING = "The keepers are gone, but their lights still turn over the sea every night."

SCRIPTS: dict[str, list[tuple[str, str]]] = {
    "outline": [(OUTLINE, "stop")],
    "intro": [(f"Sure! Here is the introduction:\n\n{INTRO}\n\nI hope this helps!", "stop")],
    "part1": [
        (f"{PART1} The article will have 280 words. Sure, let me help you. {PART1_MORE}", "stop"),
        (f" {PART1_MORE}", "stop"),
    ],
    "part2": [(f"2. Lenses and lamps (about 333 words)\n\n{PART2}", "stop")],
    "part3": [
        (
            "Give concrete facts, names, figures, places, dates, examples and explanations "
            f"that belong to this part and to no other.\n\n{PART3}\n\n"
            "Let me know if you want the conclusion next.",
            "stop",
        )
    ],
    "ending": [(f"{ENDING}\n\n（字数：约100字）", "stop")],
}
# the fake counts a token a character, so a part of 300 words looks like 1,700 tokens, more
# than one answer: its parts would each be planned (a model's tokens: about 400, not)
ONE_ANSWER = {"defaults.plan": False}


def recipe_key(messages: list[Message]) -> str:
    """Which of the recipe's prompts this is."""
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    if prompt.startswith("Plan an article"):
        return "outline"
    if "introduction only" in prompt:
        return "intro"
    part = re.search(r"Write part (\d+)", prompt)
    return f"part{part.group(1)}" if part else "ending"


@dataclass
class RecipeBackend(FakeBackend):
    """Answers each of the recipe's prompts from its script; asked to write on past it (a
    part short of its target), it writes nothing more."""

    keys: Callable[[list[Message]], str] = recipe_key

    def take(self, key: str) -> Reply:
        if self._next[key] >= len(self.scripts.get(key, [])):
            return "", "stop"
        return super().take(key)


def test_the_plan_budgets_and_instructions_never_reach_the_parts(tmp_path: Path) -> None:
    pipeline = load_pipeline(RECIPE, {"topic": TOPIC, "words": 1200, **ONE_ANSWER})
    backend = RecipeBackend(dict(SCRIPTS), chunk=5)
    manifest, prepared = run(pipeline, backend, tmp_path)
    document = (prepared.run_dir.path / "document.md").read_text("utf-8")

    for own in (INTRO, PART1, PART1_MORE, PART2, PART3, ENDING):
        assert own in document
    for said in ("Sure", "introduction:", "hope", "280 words", "333 words", "Let me", "字数",
                 "Give concrete facts", "2. Lenses and lamps ("):  # fmt: skip
        assert said not in document, said
    parts = [s for s in manifest["sections"] if s["section"] == "part"]
    assert [p["chatter"] for p in parts] == [2, 1, 2]
    assert parts[0]["reasons"] == ["chatter"] and parts[0]["rounds"][0]["stop_reason"] == "chatter"
    assert all(p["degenerate"] is False for p in manifest["sections"])


REQUEST = (
    "Please write a 1200-word research report on the keepers of lights, using these "
    "figures: 1,500 lights in 1900, 61 in 1990."
)


def test_the_recipe_names_the_subject_never_the_article_and_titles_a_request(
    tmp_path: Path,
) -> None:
    pipeline = load_pipeline(RECIPE, {"topic": REQUEST, "words": 1200, **ONE_ANSWER})
    backend = RecipeBackend(dict(SCRIPTS), chunk=5)
    _, prepared = run(pipeline, backend, tmp_path)
    document = (prepared.run_dir.path / "document.md").read_text("utf-8")
    assert document.startswith("# Keepers of lights\n")
    for call in backend.calls:
        prompt = next(m["content"] for m in call.messages if m["role"] == "user")
        if recipe_key(call.messages) == "outline":
            continue
        assert "article" not in prompt, prompt
        assert "1,500 lights in 1900" in prompt  # the request's facts reach every part
        assert not re.search(r"\(about \d+ words\)", prompt)  # no budgets in the plan


def test_a_chinese_topic_gets_chinese_prompts_and_titles(tmp_path: Path) -> None:
    pipeline = load_pipeline(
        RECIPE, {"topic": "请写一篇关于灯塔看守人的文章，约1200字。", "words": 1200}
    )
    backend = FakeBackend({}, chunk=5)
    _, prepared = run(pipeline, backend, tmp_path)
    document = (prepared.run_dir.path / "document.md").read_text("utf-8")
    assert document.startswith("# 灯塔看守人的文章\n")
    assert "## 引言" in document and "## 结语" in document
    prompts = [next(m["content"] for m in c.messages if m["role"] == "user") for c in backend.calls]
    assert prompts[0].startswith("为一篇文章列提纲")
    assert all("主题：请写一篇关于灯塔看守人的文章" in p for p in prompts[1:])
    systems = {c.messages[0]["content"] for c in backend.calls}
    assert systems == {"你是一位专业作家，用简体中文写清楚、准确、条理分明的文字。"}
