"""Context that arrives: every section a `context:` lists reaches the model, placed by the
template where it reads the variable, else as a labelled block before the instructions,
and inside the budget."""

from __future__ import annotations

from pathlib import Path

from gen.pipeline.templates.render import CONTEXT_LABELS
from tests.pipeline.fake_backend import FakeBackend, pipeline_from, run

INTRO = "茶起源于中国 🍵. Tea began in China as a medicine."
OUTLINE = "1. Picking\n2. Rolling\n3. Drying"


def user_message(backend: FakeBackend, key: str) -> str:
    call = next(c for c in backend.calls if c.key == key)
    return next(m["content"] for m in call.messages if m["role"] == "user")


def test_previous_arrives_as_a_labelled_block_when_the_prompt_does_not_place_it(
    tmp_path: Path,
) -> None:
    yaml = """
name: tea
sections:
  - id: intro
    prompt: "[intro] Write an introduction."
  - id: steps
    prompt: "[steps] Explain the steps."
    context: [previous]
"""
    backend = FakeBackend({"intro": [(INTRO, "stop")]})
    run(pipeline_from(yaml), backend, tmp_path)
    labels = CONTEXT_LABELS["en"]
    assert user_message(backend, "steps") == (
        f"{labels['previous']}:\n\n{INTRO}\n\n{labels['task']}:\n\n[steps] Explain the steps."
    )


def test_a_template_that_places_the_variable_gets_no_block(tmp_path: Path) -> None:
    yaml = """
name: tea
sections:
  - id: intro
    prompt: "[intro] Write an introduction."
  - id: steps
    prompt: "[steps] After this: {{ previous }} -- explain the steps."
    context: [previous]
"""
    backend = FakeBackend({"intro": [(INTRO, "stop")]})
    run(pipeline_from(yaml), backend, tmp_path)
    assert user_message(backend, "steps") == f"[steps] After this: {INTRO} -- explain the steps."


def test_every_kind_of_context_in_plan_order_and_chinese_labels(tmp_path: Path) -> None:
    yaml = """
name: tea
sections:
  - id: plan
    prompt: "[plan] 写一个提纲。"
  - id: intro
    prompt: "[intro] 写一段引言。"
  - id: history
    prompt: "[history] 写茶的历史。"
  - id: body
    prompt: "[body] 请写正文，讲讲茶是怎么做的。"
    context: [plan, previous, all]
"""
    backend = FakeBackend(
        {
            "plan": [(OUTLINE, "stop")],
            "intro": [(INTRO, "stop")],
            "history": [("唐朝人喝茶。", "stop")],
        }
    )
    run(pipeline_from(yaml), backend, tmp_path)
    zh = CONTEXT_LABELS["zh"]
    assert user_message(backend, "body") == (
        f"{zh['outline']}:\n\n{OUTLINE}\n\n{zh['earlier']}:\n\n{INTRO}\n\n"
        f"{zh['previous']}:\n\n唐朝人喝茶。\n\n{zh['task']}:\n\n[body] 请写正文，讲讲茶是怎么做的。"
    )


def test_reading_the_sections_themselves_places_the_outline(tmp_path: Path) -> None:
    yaml = """
name: tea
sections:
  - id: plan
    prompt: "[plan] Plan it."
  - id: body
    prompt: "[body] Follow {{ sections.plan.text }} closely."
    context: [plan]
"""
    backend = FakeBackend({"plan": [(OUTLINE, "stop")]})
    run(pipeline_from(yaml), backend, tmp_path)
    assert user_message(backend, "body") == f"[body] Follow {OUTLINE} closely."


def test_the_block_is_trimmed_to_the_budget_keeping_the_tail(tmp_path: Path) -> None:
    long_intro = (
        "第一句话。 Tea reached Europe through Dutch traders early in the seventeenth century. "
        "At first it was sold by apothecaries as a remedy for headaches and gout. Coffee "
        "houses in London served it to merchants who argued about shipping and prices. "
        "Taxes made a pound of leaves cost more than a labourer earned in a week, so "
        "smugglers landed chests on quiet beaches at night. Porcelain cups came with the "
        "cargo, and potters in Staffordshire soon copied their shapes. By 1800 ordinary "
        "families drank it twice a day, sweetened with sugar from the Caribbean. "
        "The last words 😀."
    )
    yaml = """
name: tea
context: {window: 400, reserve: 100}
sections:
  - id: intro
    prompt: "[intro] Write an introduction."
  - id: steps
    prompt: "[steps] Explain the steps."
    context: [previous]
"""
    backend = FakeBackend({"intro": [(long_intro, "stop")]})
    manifest, _ = run(pipeline_from(yaml), backend, tmp_path)
    message = user_message(backend, "steps")
    assert len(message) <= 300  # the fake counts a token per character
    assert message.startswith(CONTEXT_LABELS["en"]["previous"] + ":\n\n")
    assert "The last words 😀." in message and "第一句话" not in message
    assert message.endswith("[steps] Explain the steps.")
    steps = next(s for s in manifest["sections"] if s["id"] == "steps")
    assert steps["rounds"][0]["trimmed_tokens"] > 0
