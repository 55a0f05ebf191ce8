"""Rendering for the orchestrator: a section's prompt, system prompt and title, and the
document. Takes a pipeline from load_pipeline, whose templates are already compiled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gen.pipeline.sources import has_sources
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.compiled import TemplateSet
from gen.pipeline.templates.variables import SectionResult, context_ids, document_variables
from gen.pipeline.yaml_loader import YamlPath
from gen.text.listparse import item_title

DEFAULT_DOCUMENT = """\
# {{ title }}
{% for part in parts %}

## {{ part.title }}

{{ part.text | trim }}
{% endfor %}
"""


# the labelled block a context variable gets when the section's templates do not place it
CONTEXT_LABELS = {
    "en": {
        "sources": (
            "Sources (after a sentence that uses one, write its number in brackets, like [1])"
        ),
        "outline": "The plan of the document",
        "previous": "The end of the previous section",
        "earlier": "Earlier sections",
        "task": "Your task",
    },
    "zh": {
        "sources": "资料（用到某条资料的句子末尾，用方括号写出它的编号，如 [1]）",
        "outline": "文章的提纲",
        "previous": "上一节的结尾",
        "earlier": "前面的章节",
        "task": "你的任务",
    },
}
# the nearest text last, next to the task
CONTEXT_ORDER = ("sources", "outline", "earlier", "previous")


def render_prompt(pipeline: Pipeline, section: Section, variables: dict[str, Any]) -> str:
    """The section's user prompt (`prompt:` or `template:`) rendered with `variables`
    (see variables.prompt_variables), after a labelled block for each context variable its
    templates do not place themselves (see unplaced_context)."""
    field = "prompt" if section.prompt is not None else "template"
    prompt = _templates(pipeline).render(_path(pipeline, section, field), variables)
    missing = unplaced_context(pipeline, section)
    blocks = [(name, str(variables.get(name) or "").strip()) for name in missing]
    blocks = [(name, text) for name, text in blocks if text]
    if not blocks:
        return prompt
    labels = CONTEXT_LABELS["zh" if _mostly_cjk(prompt) else "en"]
    parts = [f"{labels[name]}:\n\n{text}" for name, text in blocks]
    return "\n\n".join([*parts, f"{labels['task']}:\n\n{prompt.strip()}"])


def unplaced_context(pipeline: Pipeline, section: Section) -> list[str]:
    """The context variables (`sources`, `outline`, `earlier`, `previous`) the section's
    `sources:` and `context:` provide but none of its templates (prompt, template, system)
    reads: gen delivers
    those as a labelled block before the instructions. `outline` counts as placed when
    the templates read every section it joins as `sections.<id>`."""
    templates = _templates(pipeline)
    reads: set[str] = set()
    for field in ("prompt", "template", "system"):
        path = _path(pipeline, section, field)
        reads |= templates.reads(path)
    if "system" not in section.model_fields_set:
        reads |= templates.reads(("defaults", "system"))
    wanted = {
        "sources": has_sources(pipeline, section),
        "outline": bool(context_ids(section)),
        "earlier": "all" in section.context,
        "previous": "previous" in section.context,
    }
    ids = context_ids(section)
    if ids and all(f"sections.{i}" in reads for i in ids):
        reads.add("outline")
    return [name for name in CONTEXT_ORDER if wanted[name] and name not in reads]


def _mostly_cjk(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    cjk = sum(1 for c in letters if "\u2e80" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af")
    return bool(letters) and 2 * cjk >= len(letters)


def render_system(pipeline: Pipeline, section: Section, variables: dict[str, Any]) -> str | None:
    """The section's system prompt, else `defaults.system`, rendered; None when neither."""
    if "system" in section.model_fields_set:
        if section.system is None:
            return None
        return _templates(pipeline).render(_path(pipeline, section, "system"), variables)
    if pipeline.defaults.system is None:
        return None
    return _templates(pipeline).render(("defaults", "system"), variables)


def render_title(pipeline: Pipeline, section: Section, variables: dict[str, Any]) -> str:
    """`title:` rendered; else the fan-out item's title (the item, or an object's `title`);
    else the id, humanised."""
    if section.title is not None:
        return _templates(pipeline).render(_path(pipeline, section, "title"), variables).strip()
    title = item_title(variables.get("item")) if section.foreach else ""
    if title:
        return title
    return section.id.replace("_", " ").strip().capitalize()


LENGTH_FIELDS = ("target_words", "min_words", "max_words")
COUNT_FIELDS = (*LENGTH_FIELDS, "max_items", "min_items")  # numbers or templates


def render_lengths(
    pipeline: Pipeline, section: Section, variables: dict[str, Any]
) -> tuple[int | None, int | None, int | None]:
    """(target_words, min_words, max_words) of one instance: numbers as they are, templates
    rendered with its variables (a fan-out can give each part its own budget)."""
    target, least, most = (render_count(pipeline, section, f, variables) for f in LENGTH_FIELDS)
    return target, least, most


def render_count(
    pipeline: Pipeline, section: Section, field: str, variables: dict[str, Any]
) -> int | None:
    """A count field (a length, `max_items`): a number as it is, a template rendered."""
    value = getattr(section, field)
    if not isinstance(value, str):
        return value  # type: ignore[no-any-return]
    path = _path(pipeline, section, field)
    text = _templates(pipeline).render(path, variables).strip()
    try:
        number = int(float(text))
    except (ValueError, OverflowError):  # not a number, or "inf"
        number = 0
    if number <= 0:
        message = f"sections.{section.id}.{field}: must render a number > 0, got {text!r}"
        raise _templates(pipeline).smap.error(path, message)
    return number


def document_title(pipeline: Pipeline) -> str:
    if pipeline.document.title is None:
        return pipeline.name
    inputs = {**pipeline.inputs, "inputs": dict(pipeline.inputs)}
    return _templates(pipeline).render(("document", "title"), inputs).strip()


def render_document(pipeline: Pipeline, results: Mapping[str, SectionResult]) -> str:
    """The document from the finished sections (`results`: section id -> result)."""
    variables = document_variables(pipeline, results, document_title(pipeline))
    return _templates(pipeline).render(document_path(pipeline), variables)


def document_path(pipeline: Pipeline) -> YamlPath:
    """The key of the document template: the file, the inline text, or the built-in one."""
    return ("document", "template") if pipeline.document.template else ("document", "inline")


def _path(pipeline: Pipeline, section: Section, field: str) -> YamlPath:
    for index, candidate in enumerate(pipeline.sections):
        if candidate.id == section.id:
            return ("sections", index, field)
    raise KeyError(f"section {section.id!r} is not in pipeline {pipeline.name!r}")


def _templates(pipeline: Pipeline) -> TemplateSet:
    templates = pipeline._templates
    if not isinstance(templates, TemplateSet):
        raise ValueError("pipeline templates are not compiled; build it with load_pipeline()")
    return templates
