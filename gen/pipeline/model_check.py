"""The model a pipeline will run with, checked without loading it: the spec resolves (a
model path exists), and context.reserve leaves room for a prompt in the window the run
will have, the model's context length read from its GGUF header or config.json.

Not imported by `gen.pipeline`, which stays free of gen.models.
"""

from __future__ import annotations

from gen.errors import ModelError
from gen.models import context_length, resolve
from gen.pipeline.references import fail
from gen.pipeline.spec import Pipeline


def check_model(pipeline: Pipeline, spec: str | None = None) -> None:
    """`spec` is `--model`, whose errors name the option; None checks the pipeline's
    `model:`, whose errors point at it in the file."""
    smap = pipeline._templates.smap
    try:
        length = context_length(resolve(spec or pipeline.model))
    except ModelError as exc:
        if spec is not None:
            raise ModelError(f"--model: {exc}") from None
        raise fail(smap, ("model",), str(exc)) from None
    if length is None:  # a remote model, or metadata without it: known once it answers
        return
    reserve = pipeline.context.reserve
    if reserve < pipeline.context.window_for(length):
        return
    # the window is the model's: a smaller fixed one was checked with the file (validate.py)
    message = (
        f"{reserve} tokens kept for the answer leave none for the prompt: the model's "
        f"context length is {length} tokens"
    )
    raise fail(smap, ("context", "reserve"), message)
