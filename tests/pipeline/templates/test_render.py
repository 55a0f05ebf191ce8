from __future__ import annotations

from pathlib import Path

import pytest

from gen.pipeline import (
    SectionResult,
    document_title,
    foreach_items,
    load_pipeline,
    parse_list,
    prompt_variables,
    render_document,
    render_prompt,
    render_system,
    render_title,
)
from gen.pipeline.templates.render import CONTEXT_LABELS
from tests.pipeline.conftest import WritePipeline

GOOD = Path(__file__).parents[1] / "good" / "report.yaml"
OUTLINE = "1. 活字印刷的起源\n2. **Gutenberg's press**\n3. 对欧洲的影响\n"


def _outline() -> SectionResult:
    return SectionResult("outline", OUTLINE, parse_list(OUTLINE), "Outline")


def test_render_fan_out_with_chinese_text() -> None:
    pipeline = load_pipeline(GOOD, {"topic": "印刷术"})
    part = pipeline.section("part")
    outline = _outline()
    assert outline.items == ["活字印刷的起源", "Gutenberg's press", "对欧洲的影响"]
    assert foreach_items(pipeline, part, {"outline": outline}) == outline.items
    assert foreach_items(pipeline, pipeline.section("outline"), {}) == []
    variables = prompt_variables(
        pipeline,
        part,
        {"outline": outline},
        item=outline.items[0],
        loop_index=1,
        loop_length=3,
    )
    prompt = render_prompt(pipeline, part, variables)
    assert prompt.splitlines()[0] == "Topic: 印刷术"
    assert OUTLINE.strip() in prompt
    assert "Write part 1 of 3: 活字印刷的起源 (7 words in the title)." in prompt
    assert "previous part" not in prompt  # the section before is the outline, shown already
    assert render_title(pipeline, part, variables) == "活字印刷的起源"
    assert render_system(pipeline, part, variables) == "You are a careful writer on 印刷术."

    variables = prompt_variables(
        pipeline, part, {"outline": outline}, item=outline.items[1], loop_index=2,
        loop_length=3, previous="……第一部分结束。",
    )  # fmt: skip
    prompt = render_prompt(pipeline, part, variables)
    assert "Write part 2 of 3: Gutenberg's press" in prompt
    assert "The previous part ended with:\n……第一部分结束。" in prompt


def test_render_inline_prompt_and_context_all() -> None:
    pipeline = load_pipeline(GOOD)
    outline = _outline()
    parts = [SectionResult("part", f"正文 {i}", title=t) for i, t in enumerate(outline.items)]
    results = {"outline": outline, "part": SectionResult.fan_in("part", parts)}
    summary = pipeline.section("summary")
    variables = prompt_variables(pipeline, summary, results)
    assert variables["earlier"] == OUTLINE + "\n\n正文 0\n\n正文 1\n\n正文 2"
    # the prompt does not place {{ earlier }}: it comes first, as a labelled block
    labels = CONTEXT_LABELS["en"]
    assert render_prompt(pipeline, summary, variables) == (
        f"{labels['earlier']}:\n\n{variables['earlier'].strip()}\n\n{labels['task']}:\n\n"
        "Summarise the report on The printing press for students.\nParts: 3"
    )
    assert render_title(pipeline, summary, variables) == "Summary"


def test_render_document_with_template() -> None:
    pipeline = load_pipeline(GOOD)
    outline = _outline()
    parts = [SectionResult("part", f"正文 {i}", title=t) for i, t in enumerate(outline.items)]
    results = {
        "outline": outline,
        "part": SectionResult.fan_in("part", parts),
        "summary": SectionResult("summary", "总结。", title="Summary"),
    }
    assert document_title(pipeline) == "Report: The printing press"
    document = render_document(pipeline, results)
    assert document.startswith("# Report: The printing press\n\n## 1. 活字印刷的起源\n\n正文 0\n")
    assert "## 4. Summary\n\n总结。" in document
    assert "1. 活字印刷的起源\n2." not in document  # the outline is hidden (parse: list)


def test_default_document(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - {id: intro_part, prompt: A, title: "Intro to {{ topic }}"}
          - {id: body, prompt: B}
        inputs: {topic: 茶}
        """,
        name="tea.yaml",
    )
    pipeline = load_pipeline(path)
    intro, body = pipeline.sections
    title = render_title(pipeline, intro, prompt_variables(pipeline, intro, {}))
    assert title == "Intro to 茶"
    assert render_title(pipeline, body, prompt_variables(pipeline, body, {})) == "Body"
    results = {
        "intro_part": SectionResult("intro_part", "茶是一种饮料。\n", title=title),
        "body": SectionResult("body", "More text.", title="Body"),
    }
    assert render_document(pipeline, results) == (
        "# tea\n\n## Intro to 茶\n\n茶是一种饮料。\n\n## Body\n\nMore text.\n"
    )
    assert render_system(pipeline, intro, {}) is None


def test_section_system_overrides_default(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        defaults: {system: "Default for {{ topic }}"}
        inputs: {topic: tea}
        sections:
          - {id: a, prompt: A, system: "Own {{ topic }}"}
          - {id: b, prompt: B, system: null}
          - {id: c, prompt: C}
        """
    )
    pipeline = load_pipeline(path)
    a, b, c = pipeline.sections
    assert render_system(pipeline, a, prompt_variables(pipeline, a, {})) == "Own tea"
    assert render_system(pipeline, b, prompt_variables(pipeline, b, {})) is None
    assert render_system(pipeline, c, prompt_variables(pipeline, c, {})) == "Default for tea"


def test_sections_map_has_no_method_names(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        sections:
          - {id: items, prompt: A, parse: list}
          - {id: b, prompt: "{{ sections.items.items | join(',') }} {{ sections['items'] }}"}
        """
    )
    pipeline = load_pipeline(path)
    b = pipeline.section("b")
    results = {"items": SectionResult("items", "- x\n- y", ["x", "y"])}
    assert render_prompt(pipeline, b, prompt_variables(pipeline, b, results)) == "x,y - x\n- y"


def test_fan_out_over_an_input(write_pipeline: WritePipeline) -> None:
    path = write_pipeline(
        """
        inputs: {chapters: [茶, 咖啡]}
        sections:
          - id: chapter
            foreach: inputs.chapters
            prompt: "{{ loop_index }}/{{ loop_length }}: {{ item }} ({{ chapters | length }})"
        """
    )
    pipeline = load_pipeline(path, {"chapters": "[水, 茶, 酒]"})
    chapter = pipeline.section("chapter")
    items = foreach_items(pipeline, chapter, {})
    assert items == ["水", "茶", "酒"]
    rendered = [
        render_prompt(
            pipeline,
            chapter,
            prompt_variables(pipeline, chapter, {}, item=x, loop_index=i, loop_length=len(items)),
        )
        for i, x in enumerate(items, start=1)
    ]
    assert rendered == ["1/3: 水 (3)", "2/3: 茶 (3)", "3/3: 酒 (3)"]


def test_a_count_template_that_renders_inf_is_a_located_error() -> None:
    from gen.errors import GenError
    from gen.pipeline.templates.render import render_lengths
    from tests.pipeline.fake_backend import pipeline_from

    yaml = 'name: t\nmodel: fake\ninputs: {t: "1"}\nsections:\n  - id: s\n    prompt: x\n'
    yaml += '    target_words: "{{ t }}"\n'
    pipeline = pipeline_from(yaml)
    with pytest.raises(GenError, match=r"target_words: must render a number > 0, got 'inf'"):
        render_lengths(pipeline, pipeline.sections[0], {"t": "inf"})
