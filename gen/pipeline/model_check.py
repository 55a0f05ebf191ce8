"""The model a pipeline will run with, checked without loading it: the spec resolves (a
model path exists), a GGUF file's header asks for nothing gen does not run
(gen.models.gguf_support), context.reserve leaves room for a prompt in the window the run will
have (the model's context length read from its GGUF header or config.json), and each
length target fits that window, its max_words and an explicit max_rounds (length.py).

Not imported by `gen.pipeline`, which stays free of gen.models.
"""

from __future__ import annotations

import math

from gen.errors import GenError, ModelError
from gen.models import check, context_length, resolve
from gen.pipeline.length import Window, conservative_rate, plan_section, text_room
from gen.pipeline.references import fail
from gen.pipeline.spec import Pipeline, Section
from gen.pipeline.templates.render import render_lengths, render_prompt
from gen.pipeline.templates.variables import prompt_variables
from gen.text.words import count_words

Lengths = tuple[int | None, int | None, int | None]


def check_model(pipeline: Pipeline, spec: str | None = None) -> list[str]:
    """`spec` is `--model`, whose errors name the option; None checks the pipeline's
    `model:`, whose errors point at it in the file. Returns a warning per section whose
    length target is out of reach (length_warnings)."""
    smap = pipeline._templates.smap
    try:
        model = resolve(spec or pipeline.model)
        check(model)
        length = context_length(model)
    except ModelError as exc:
        if spec is not None:
            raise ModelError(f"--model: {exc}") from None
        raise fail(smap, ("model",), str(exc)) from None
    # None: a remote model, or metadata without it: known once it answers
    reserve = pipeline.context.reserve
    if length is not None and reserve >= pipeline.context.window_for(length):
        # the window is the model's: a smaller fixed one was checked with the file (validate.py)
        message = (
            f"{reserve} tokens kept for the answer leave none for the prompt: the model's "
            f"context length is {length} tokens"
        )
        raise fail(smap, ("context", "reserve"), message)
    return length_warnings(pipeline, length, remote=model.kind == "openai")


def length_warnings(pipeline: Pipeline, model_length: int | None, remote: bool) -> list[str]:
    """Each section's length plan at a conservative tokens per word for its prompt's
    script (there is no tokenizer here), and a warning where the target is out of reach.
    `model_length` None: the window is known only if the pipeline fixes it."""
    context, warnings = pipeline.context, []
    size = context.window if context.window != "auto" else None
    if model_length is not None:
        size = context.window_for(model_length)
    for section in pipeline.sections:
        settings = pipeline.settings_for(section)
        lengths, prompt = _known_lengths(pipeline, section)
        window: Window | None = None
        if size is not None:
            tokens = math.ceil(count_words(prompt) * conservative_rate(prompt).tokens_per_word)
            server_kv = remote and settings.continuation == "kv"  # a server goes on by chat
            strategy = "chat" if server_kv else settings.continuation
            window = text_room(size, tokens, strategy, context.reserve, settings.max_tokens)
        plan = plan_section(settings, lengths, prompt, conservative_rate, window)
        warning = plan.warning(f"sections.{section.id}")
        if warning is not None:
            warnings.append(warning)
    return warnings


def _known_lengths(pipeline: Pipeline, section: Section) -> tuple[Lengths, str]:
    """(target, min, max) words and the prompt as known before a run: rendered with the
    inputs where the section reads no other section's text, else its numbers and the
    prompt as written (a template's lengths are then known only per instance)."""
    numbers = tuple(
        value if isinstance(value, int) else None
        for value in (section.target_words, section.min_words, section.max_words)
    )
    given: Lengths = (numbers[0], numbers[1], numbers[2])
    if section.depends_on or section.foreach:
        return given, section.prompt or ""
    try:
        variables = prompt_variables(pipeline, section, {})
        return render_lengths(pipeline, section, variables), render_prompt(
            pipeline, section, variables
        )
    except GenError:
        return given, section.prompt or ""
