"""Pipelines: the YAML spec, its static checks, and prompt/document rendering.

Static half only: nothing here loads a model or talks to a backend.
"""

from __future__ import annotations

from gen.pipeline.graph import DependencyCycle
from gen.pipeline.spec import (
    ContextSettings,
    DocumentSpec,
    GenerationSettings,
    Pipeline,
    Section,
)
from gen.pipeline.templates.render import (
    document_title,
    render_document,
    render_prompt,
    render_system,
    render_title,
)
from gen.pipeline.templates.variables import (
    SectionMap,
    SectionResult,
    document_variables,
    foreach_items,
    prompt_variables,
)
from gen.pipeline.validate import load_pipeline, load_pipeline_text
from gen.text.listparse import parse_list
from gen.text.words import count_words, length_score, slugify

__all__ = [
    "ContextSettings",
    "DependencyCycle",
    "DocumentSpec",
    "GenerationSettings",
    "Pipeline",
    "Section",
    "SectionMap",
    "SectionResult",
    "count_words",
    "document_title",
    "document_variables",
    "foreach_items",
    "length_score",
    "load_pipeline",
    "load_pipeline_text",
    "parse_list",
    "prompt_variables",
    "render_document",
    "render_prompt",
    "render_system",
    "render_title",
    "slugify",
]
