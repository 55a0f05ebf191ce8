"""A trial render of every template of a pipeline, before any model loads, with the sandbox
limits a run renders with: `gen validate` and `gen run` refuse here what the run would
refuse later (a macro calling itself, `range(10**9)`, a count that renders no number).

Text only a model can write (a section's text, an outline's items) is a placeholder. A
template that reads such text is refused only for breaking the sandbox: its other errors
(an attribute the placeholder lacks) may not happen with the model's text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from gen.errors import ConfigError, SandboxError
from gen.pipeline.sources import has_sources
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import (
    COUNT_FIELDS,
    document_path,
    document_title,
    render_count,
    render_document,
    render_prompt,
    render_system,
    render_title,
)
from gen.pipeline.templates.variables import (
    FANOUT_NAMES,
    SectionResult,
    foreach_items,
    prompt_variables,
)

T = TypeVar("T")
# what a section's templates can read that a model writes (or, for sources, that gen picks
# once it knows the window)
WRITTEN = frozenset({"sections", "outline", "previous", "earlier", "sources", "words_written"})


def placeholder(key: str) -> str:
    return f"[the text of section {key!r}, written by the model]"


def placeholder_item(section_id: str) -> str:
    return f"[an item of {section_id!r}, written by the model]"


def trial_render(pipeline: Pipeline) -> None:
    """Render each section's templates (every instance of a fan-out over an input's list,
    one placeholder item of a fan-out over a model's list) and the document; raises the
    first TemplateError or ConfigError the run would meet."""
    results = {
        s.id: SectionResult(
            s.id, placeholder(s.id), [placeholder_item(s.id)] if s.parse != "text" else []
        )
        for s in pipeline.sections
    }
    for index, section in enumerate(pipeline.sections):
        results[section.id] = _section(pipeline, index, section, results)
    document_title(pipeline)  # it reads the inputs only: its every error is the run's
    reads = pipeline._templates.reads(document_path(pipeline))
    _attempt(bool(reads & {"parts", "sections"}), render_document, pipeline, results)


def _section(
    pipeline: Pipeline, index: int, section: Section, results: dict[str, SectionResult]
) -> SectionResult:
    """Render one section's templates; returns its stand-in result (a fan-out's parts)."""
    target = section.foreach_target()
    try:
        items = foreach_items(pipeline, section, results) if target else [None]
    except (KeyError, TypeError):  # the run fails the section early, with its own message
        return results[section.id]
    guessed = _reads_written(pipeline, index, section)
    parts: list[SectionResult] = []
    previous: str | None = None
    for n, item in enumerate(items, 1):
        key = f"{section.id}-{n}" if target else section.id
        variables = prompt_variables(
            pipeline, section, results, item=item, loop_index=n, loop_length=len(items),
            previous=previous,
        )  # fmt: skip
        if has_sources(pipeline, section):
            variables["sources"] = "[1] [a passage of the sources]"
        title = _attempt(guessed, render_title, pipeline, section, variables)
        _attempt(guessed, render_system, pipeline, section, variables)
        _attempt(guessed, render_prompt, pipeline, section, variables)
        for field in COUNT_FIELDS:
            _attempt(guessed, render_count, pipeline, section, field, variables)
        parts.append(SectionResult(key, placeholder(key), title=title or key))
        previous = placeholder(key) if target else None
    if target:
        return SectionResult.fan_in(section.id, parts)
    stand_in = results[section.id]
    return SectionResult(section.id, stand_in.text, stand_in.items, title=parts[0].title)


def _reads_written(pipeline: Pipeline, index: int, section: Section) -> bool:
    """Does any of the section's templates read what a model writes?"""
    templates = pipeline._templates
    reads: set[str] = set()
    for field in ("title", "system", "prompt", "template", *COUNT_FIELDS):
        reads |= templates.reads(("sections", index, field))
    if "system" not in section.model_fields_set:
        reads |= templates.reads(("defaults", "system"))
    target = section.foreach_target()
    written = WRITTEN | (FANOUT_NAMES if target and target[0] == "sections" else set())
    return bool(reads & written)


def _attempt(guessed: bool, render: Callable[..., T], *args: Any) -> T | None:
    """`render(*args)`, its error raised unless it may come from a placeholder (`guessed`:
    the template reads model-written text) and is no sandbox violation."""
    try:
        return render(*args)
    except SandboxError:
        raise
    except ConfigError:
        if not guessed:
            raise
        return None
