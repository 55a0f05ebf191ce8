"""`load_pipeline`: read, schema-check and cross-check a pipeline without loading a model:
ids, dependencies and cycles, fan-outs, inputs and `--set`, and every template."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from gen.errors import ConfigError
from gen.pipeline.inputs import apply_overrides
from gen.pipeline.references import (
    Origins,
    add_dependency,
    check_cycles,
    check_references,
    fail,
)
from gen.pipeline.schema_errors import schema_error
from gen.pipeline.setting_overrides import apply_settings, split_overrides
from gen.pipeline.snippet import decode_source
from gen.pipeline.sources import all_named, load_library
from gen.pipeline.spec import Pipeline
from gen.pipeline.templates.compiled import TemplateSet
from gen.pipeline.templates.env import make_environment, template_dirs
from gen.pipeline.templates.render import COUNT_FIELDS, DEFAULT_DOCUMENT, document_path
from gen.pipeline.templates.variables import RESERVED, document_scope, input_scope, prompt_scope
from gen.pipeline.yaml_loader import MAX_CHARS, SourceMap, YamlPath, load_yaml


def load_pipeline(path: str | Path, overrides: Mapping[str, object] | None = None) -> Pipeline:
    """Load and statically check the pipeline file at `path`; raises ConfigError/TemplateError.
    `overrides` (from --set or a batch record) replace declared inputs, and with a key
    `defaults.KEY` or `sections.ID.KEY` set a generation setting."""
    file, source = str(path), Path(path)
    try:
        with source.open("rb") as f:  # the YAML limit in UTF-8's widest: it may be /dev/zero
            data = f.read(4 * MAX_CHARS + 1)
    except FileNotFoundError:
        raise ConfigError(f"pipeline file not found: {file}", file=file) from None
    except OSError as exc:
        raise ConfigError(f"cannot read pipeline: {exc.strerror or exc}", file=file) from None
    text = decode_source(data, file, ConfigError)
    return load_pipeline_text(
        text, file=file, base_dir=source.parent, name=source.stem, overrides=overrides
    )


def load_pipeline_text(
    text: str,
    *,
    file: str = "<pipeline>",
    base_dir: Path | None = None,
    name: str | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Pipeline:
    """load_pipeline for YAML text (e.g. from the runs API); template files are looked up
    from `base_dir` and the project's templates/ folder."""
    data, smap = load_yaml(text, file)
    if data is None:
        raise smap.error_at(1, 1, "the pipeline is empty; it needs at least `sections:`")
    if not isinstance(data, dict):
        raise smap.error((), "a pipeline must be a mapping (name:, model:, sections:, ...)")
    if name is not None and "name" not in data:
        data["name"] = name
    try:
        pipeline = Pipeline.model_validate(data)
    except ValidationError as exc:
        raise schema_error(exc, data, smap) from None
    pipeline._file, pipeline._source = file, text
    _check_inputs(pipeline, smap)
    inputs, settings = split_overrides(overrides or {})
    apply_settings(pipeline, settings)
    if inputs:
        pipeline.inputs = apply_overrides(pipeline.inputs, inputs, smap)
    _check_context(pipeline, smap)
    _check_sections(pipeline, smap)
    origins = check_references(pipeline, smap)
    pipeline._templates = _compile_templates(pipeline, smap, base_dir, origins)
    check_cycles(pipeline, smap, origins)
    if base_dir is None and all_named(pipeline):  # text with no folder: e.g. sent to a server
        where, _ = all_named(pipeline)[0]
        raise smap.error(
            where,
            "a pipeline given as text has no folder to read sources from; save it beside "
            "them (on a server: in its pipelines folder, and name it)",
        )
    pipeline._library = load_library(pipeline, smap, base_dir or Path.cwd())
    return pipeline


def _check_inputs(pipeline: Pipeline, smap: SourceMap) -> None:
    """Input names are template variables: identifiers in any script (`topic`, `主题`)."""
    for key in pipeline.inputs:
        if not isinstance(key, str) or not key.isidentifier():
            message = "an input name must be letters, digits and _ (any script), not starting "
            raise fail(smap, ("inputs", key), f"{message}with a digit, got {key!r}", at="key")
        if key in RESERVED:
            raise fail(smap, ("inputs", key), f"{key!r} is a reserved name", at="key")


def _check_context(pipeline: Pipeline, smap: SourceMap) -> None:
    """A fixed window must leave room for a prompt beside the reserve; a window of `auto`
    is checked against the model's context length before it loads (model_check.py)."""
    window, reserve = pipeline.context.window, pipeline.context.reserve
    if window == "auto" or reserve < window:
        return
    if "reserve" in pipeline.context.model_fields_set:
        message = f"must be less than context.window ({window}), got {reserve}"
        raise fail(smap, ("context", "reserve"), f"{message}: no token is left for the prompt")
    message = f"{window} leaves no room for the prompt beside the default reserve of {reserve}"
    raise fail(smap, ("context", "window"), f"{message} tokens; raise it or set context.reserve")


def _check_sections(pipeline: Pipeline, smap: SourceMap) -> None:
    first_at: dict[str, int] = {}
    for i, section in enumerate(pipeline.sections):
        at: YamlPath = ("sections", i)
        if section.id in first_at:
            line = smap.value_span(("sections", first_at[section.id], "id")).line
            raise fail(
                smap, (*at, "id"), f"duplicate section id {section.id!r} (first on line {line})"
            )
        first_at[section.id] = i
        if section.prompt is not None and section.template is not None:
            raise fail(smap, (*at, "template"), "give either prompt: or template:, not both", "key")
        if section.prompt is None and section.template is None:
            raise fail(
                smap, at, f"section {section.id!r} needs a prompt: (inline) or a template: (file)"
            )
        for field in COUNT_FIELDS:
            value = getattr(section, field)
            if isinstance(value, str) and "{" not in value and not _count(value):
                message = f"must be a number > 0, or a template that renders one, got {value!r}"
                raise fail(smap, (*at, field), message)
        bounds = [("min_words", section.min_words), ("target_words", section.target_words),
                  ("max_words", section.max_words)]  # fmt: skip
        for j, (low_name, low) in enumerate(bounds):
            for high_name, high in bounds[j + 1 :]:
                if isinstance(low, int) and isinstance(high, int) and low > high:
                    message = f"must be >= {low_name} ({low}), got {high}"
                    raise fail(smap, (*at, high_name), message)
    document = pipeline.document
    if document.template is not None and document.inline is not None:
        raise fail(
            smap, ("document", "inline"), "give either template: or inline:, not both", "key"
        )


def _count(text: str) -> bool:
    """Would render_count read `text` as a count? (a number > 0, in digits)"""
    try:
        number = float(text)
    except ValueError:
        return False
    return math.isfinite(number) and number >= 1


def _compile_templates(
    pipeline: Pipeline,
    smap: SourceMap,
    base_dir: Path | None,
    origins: Origins,
) -> TemplateSet:
    """Compile and check every template; `sections.<id>` reads become dependencies."""
    templates = TemplateSet(make_environment(template_dirs(base_dir)), smap)
    if pipeline.defaults.system is not None:
        scope = input_scope(pipeline, "defaults.system")
        templates.add_inline(("defaults", "system"), pipeline.defaults.system, scope)
    for i, section in enumerate(pipeline.sections):
        scope = prompt_scope(pipeline, section)
        for field in ("title", "system", "prompt", "template", *COUNT_FIELDS):
            value = getattr(section, field)
            if value is None or isinstance(value, int):
                continue
            where = ("sections", i, field)
            if field == "template":
                refs = templates.add_file(where, value, scope)
            else:
                refs = templates.add_inline(where, value, scope)
            for ref in refs:
                add_dependency(section, ref, where, origins)
    for where, spec in all_named(pipeline):
        templates.add_inline(where, spec, input_scope(pipeline, "sources"))
    document = pipeline.document
    if document.title is not None:
        scope = input_scope(pipeline, "document.title")
        templates.add_inline(("document", "title"), document.title, scope)
    path = document_path(pipeline)
    if document.template is not None:
        templates.add_file(path, document.template, document_scope(pipeline))
    else:
        templates.add_inline(path, document.inline or DEFAULT_DOCUMENT, document_scope(pipeline))
    return templates
