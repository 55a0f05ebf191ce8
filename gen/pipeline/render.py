"""Rendering for the orchestrator: a section's prompt, system prompt and title, and the
document. Takes a pipeline from load_pipeline, whose templates are already compiled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates import TemplateSet
from gen.pipeline.variables import SectionResult, document_variables
from gen.pipeline.yaml_loader import YamlPath

DEFAULT_DOCUMENT = """\
# {{ title }}
{% for part in parts %}

## {{ part.title }}

{{ part.text | trim }}
{% endfor %}
"""


def render_prompt(pipeline: Pipeline, section: Section, variables: dict[str, Any]) -> str:
    """The section's user prompt (`prompt:` or `template:`) rendered with `variables`
    (see variables.prompt_variables)."""
    field = "prompt" if section.prompt is not None else "template"
    return _templates(pipeline).render(_path(pipeline, section, field), variables)


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
    """`title:` rendered; else the fan-out item (when a string); else the id, humanised."""
    if section.title is not None:
        return _templates(pipeline).render(_path(pipeline, section, "title"), variables).strip()
    item = variables.get("item")
    if section.foreach and isinstance(item, str):
        return item
    return section.id.replace("_", " ").strip().capitalize()


LENGTH_FIELDS = ("target_words", "min_words", "max_words")


def render_lengths(
    pipeline: Pipeline, section: Section, variables: dict[str, Any]
) -> tuple[int | None, int | None, int | None]:
    """(target_words, min_words, max_words) of one instance: numbers as they are, templates
    rendered with its variables (a fan-out can give each part its own budget)."""
    out: list[int | None] = []
    for field in LENGTH_FIELDS:
        value = getattr(section, field)
        if isinstance(value, str):
            path = _path(pipeline, section, field)
            text = _templates(pipeline).render(path, variables).strip()
            try:
                value = int(float(text))
            except ValueError:
                value = 0
            if value <= 0:
                message = f"sections.{section.id}.{field}: must render a number > 0, got {text!r}"
                raise _templates(pipeline).smap.error(path, message)
        out.append(value)
    return out[0], out[1], out[2]


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
