"""Glue for callers (CLI, server): open the run directory and event log, run the pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.backends.base import Backend
from gen.engine.config import EngineConfig
from gen.pipeline.run.events import EventLog, Subscriber
from gen.pipeline.run.orchestrator import Orchestrator, preflight
from gen.pipeline.run.rundir import RunDir
from gen.pipeline.run.section import RunContext
from gen.pipeline.run.timeline import write_timeline
from gen.pipeline.spec import Pipeline


@dataclass(slots=True)
class PreparedRun:
    run_dir: RunDir
    events: EventLog
    orchestrator: Orchestrator

    async def execute(self) -> dict[str, Any]:
        try:
            return await self.orchestrator.run()
        finally:
            self.events.close()
            write_timeline(self.run_dir.path)  # timeline.svg: where the run's time went


def open_pipeline_backend(
    pipeline: Pipeline, model: str, engine: EngineConfig | None = None
) -> Backend:
    """The backend a pipeline runs on: `model` (the pipeline's or --model's), with the
    pipeline's servers, key, tokenizer and remote settings for an `openai:` model."""
    from gen.backends import open_backend

    return open_backend(
        model,
        pipeline.base_url,
        pipeline.api_key_env,
        engine=engine,
        tokenizer=pipeline.tokenizer,
        **pipeline.remote.model_dump(),
    )


def context_window(pipeline: Pipeline, backend: Backend) -> int:
    return pipeline.context.window_for(backend.context_window)


def prepare_run(
    pipeline: Pipeline,
    backend: Backend,
    out: Path,
    *,
    model: str,
    resume: bool = False,
    run_id: str | None = None,
    subscribers: tuple[Subscriber, ...] = (),
    path: Path | None = None,
) -> PreparedRun:
    """Check the budget, then create (or, with resume, reopen) the run directory: the
    latest run of the pipeline, the run `run_id`, or the folder `path` (a batch record's)."""
    window = context_window(pipeline, backend)
    ctx_events = EventLog("pending")
    ctx = RunContext(pipeline, backend, ctx_events, window, pipeline.context.reserve)
    preflight(ctx)
    run_dir: RunDir | None = None
    if path is not None:
        run_dir = RunDir(path)
        run_dir.sections_dir.mkdir(parents=True, exist_ok=True)
    elif resume:
        run_dir = (
            RunDir(out / pipeline.name / run_id) if run_id else RunDir.latest(out, pipeline.name)
        )
    previous = None
    if run_dir is None:
        run_dir = RunDir.create(out, pipeline.name, run_id)
    elif resume:
        run_dir.remove_temp_files()
        previous = run_dir.read_manifest()
    events = EventLog(run_dir.run_id, run_dir.events_path)  # its seq goes on from the file's
    for fn in subscribers:
        events.subscribe(fn)
    ctx.events = events
    orchestrator = Orchestrator(ctx, run_dir, model=model, previous=previous)
    return PreparedRun(run_dir, events, orchestrator)
