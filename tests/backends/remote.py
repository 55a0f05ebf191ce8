"""Running a pipeline whose model is an `openai:` server, as `gen run` opens it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gen.pipeline import Pipeline
from gen.pipeline.run.runner import open_pipeline_backend, prepare_run


def run_remote(pipeline: Pipeline, out: Path) -> dict[str, Any]:
    """Run `pipeline` to the end over its remote backend; returns the manifest."""

    async def go() -> dict[str, Any]:
        backend = open_pipeline_backend(pipeline, pipeline.model)
        try:
            prepared = prepare_run(pipeline, backend, out, model=pipeline.model)
            return await prepared.execute()
        finally:
            await backend.aclose()

    return asyncio.run(go())
