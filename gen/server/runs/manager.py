"""The runs this server executes: a queue in front of a limit of concurrent runs, each a
pipeline run on the server's own engine writing the same run directory as `gen run`;
cancel, resume, and on start-up the runs a stopped server left unfinished."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.backends.base import Backend
from gen.errors import ConfigError, GenError
from gen.pipeline import Pipeline, load_pipeline_text
from gen.pipeline.run.events import EventLog, RunBusy, is_live
from gen.pipeline.run.orchestrator import preflight
from gen.pipeline.run.rundir import RunDir
from gen.pipeline.run.runner import PreparedRun, prepare_run
from gen.pipeline.run.section import RunContext
from gen.pipeline.templates.trial import trial_render
from gen.server.config import RunLimits
from gen.server.errors import APIError, busy
from gen.server.runs.events import Feed
from gen.server.runs.store import (
    ACTIVE,
    RunRequest,
    all_runs,
    end_run,
    read_manifest,
    write_request,
)

log = logging.getLogger("gen.serve")
STOPPED = "the server stopped during the run; it resumes when the server starts again"


class Notifier:
    """Wakes whoever waits for a run's next event (its SSE watchers)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.count = 0  # notifications so far: a Feed reads the file only once it moves

    def notify(self, _: object = None) -> None:
        self.count += 1
        self._event.set()
        self._event = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)


@dataclass(eq=False)
class ServerRun:
    run_dir: RunDir
    request: RunRequest
    status: str = "queued"  # queued | running (while the server holds it)
    task: asyncio.Task[None] | None = None
    prepared: PreparedRun | None = None
    notifier: Notifier = field(default_factory=Notifier)
    stopping: bool = False  # the server is shutting down: not a user's cancel
    cancelling: bool = False  # a user's cancel is under way: the run is not interrupted

    @property
    def run_id(self) -> str:
        return self.run_dir.run_id


class RunManager:
    def __init__(
        self,
        backend: Backend,
        out: Path,
        pipelines: Path,
        limits: RunLimits | None = None,
        *,
        poll_seconds: float = 0.25,
        ping_seconds: float = 15.0,
    ) -> None:
        self.backend = backend
        self.poll_seconds = poll_seconds  # how often a watcher looks at another writer's file
        self.ping_seconds = ping_seconds  # SSE keep-alive comments
        self.out = out
        self.pipelines = pipelines
        self.limits = RunLimits() if limits is None else limits
        self.runs: dict[str, ServerRun] = {}  # queued or running here
        self.watchers = 0  # event streams open
        self.feeds: dict[str, Feed] = {}  # by run, while some stream follows it
        self._watch_lock = threading.Lock()  # (a stream may be collected on another thread)
        self._places: asyncio.Semaphore | None = None

    @property
    def model(self) -> str:
        return getattr(self.backend, "model", "model")

    # -- starting ---------------------------------------------------------------------

    def load(self, request: RunRequest) -> Pipeline:
        """The request's pipeline, checked as `gen validate` checks a file (ConfigError at
        FILE:LINE:COL), and its prompts against this model's window."""
        base = self.pipelines if request.named else None
        pipeline = load_pipeline_text(
            request.text,
            file=request.file,
            base_dir=base,
            name=request.pipeline if request.named else None,
            overrides=request.inputs,
        )
        trial_render(pipeline)  # what its templates would refuse once the run renders them
        if pipeline.model.startswith("openai:"):
            raise ConfigError(
                f"{request.file}: model: {pipeline.model}: a run here uses this server's own "
                f"model ({self.model}); send the pipeline to that server instead"
            )
        window = pipeline.context.window_for(self.backend.context_window)
        reserve = pipeline.context.reserve
        preflight(RunContext(pipeline, self.backend, EventLog("check"), window, reserve))
        return pipeline

    async def check(self, request: RunRequest) -> Pipeline:
        """load() off the event loop (templates render, prompts are counted): the API's
        other requests go on meanwhile. A pipeline nested past Python's limits is refused."""
        try:
            return await asyncio.to_thread(self.load, request)
        except RecursionError:
            raise ConfigError(f"{request.file}: the pipeline is nested too deeply") from None

    async def submit(self, request: RunRequest) -> ServerRun:
        """Check the request, make its run directory and queue it (429 past the queue)."""
        self.check_queue()
        pipeline = await self.check(request)
        self.check_queue()  # again: others may have come in while it was checked
        request.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        request.pipeline = pipeline.name
        run_dir = RunDir.create(self.out, pipeline.name)
        write_request(run_dir, request)
        run_dir.write_manifest(self._queued_manifest(run_dir, request))
        return self._start(ServerRun(run_dir, request))

    def check_queue(self) -> None:
        """A 429 when the run queue is full (before a request's body is even read)."""
        # (counted as a whole: a run just submitted is queued until its task takes a place)
        if len(self.runs) >= self.limits.max_runs + self.limits.max_waiting:
            raise busy(
                f"the run queue is full: {self.limits.max_runs} runs generate and "
                f"{self.limits.max_waiting} wait; retry when one has finished",
                code="run_queue_full",
                retry_after=10,
            )

    def watcher_place(self) -> Callable[[], None]:
        """Takes one of the max_watchers places for an event stream (each holds a
        connection, a task and an open file), or answers 429 when none is left. Returns
        the place's release, which may be called more than once."""
        with self._watch_lock:
            if self.watchers >= self.limits.max_watchers:
                raise busy(
                    f"too many event streams open ({self.limits.max_watchers}, "
                    f"--max-watchers); retry when one has closed",
                    code="too_many_watchers",
                    retry_after=5,
                )
            self.watchers += 1

        def release() -> None:
            self.watchers -= 1

        return self._once(release)

    def feed(self, run_dir: RunDir) -> tuple[Feed, Callable[[], None]]:
        """The feed of a run's events that its watchers share (made for the first), and
        this watcher's release of it, which may be called more than once (the last
        release drops it)."""
        run_id = run_dir.run_id
        with self._watch_lock:
            feed = self.feeds.get(run_id)
            if feed is None:
                feed = self.feeds[run_id] = Feed(run_dir.events_path)
            feed.watchers += 1

        def release() -> None:
            feed.watchers -= 1
            if feed.watchers == 0 and self.feeds.get(run_id) is feed:
                del self.feeds[run_id]

        return feed, self._once(release)

    def _once(self, release: Callable[[], None]) -> Callable[[], None]:
        """`release`, run under the watchers' lock the first time the result is called and
        never again (a stream's end and its collection, maybe on another thread, both call
        it)."""
        held = [True]

        def once() -> None:
            with self._watch_lock:
                if held.pop() if held else False:
                    release()

        return once

    def _queued_manifest(self, run_dir: RunDir, request: RunRequest) -> dict[str, Any]:
        return {
            "pipeline": request.pipeline,
            "run_id": run_dir.run_id,
            "status": "queued",
            "model": self.model,
            "backend": getattr(self.backend, "name", "local"),
            "created": request.created,
            "inputs": request.inputs,
            "sections": [],
            "metrics": {},
            "document": None,
        }

    def _start(self, run: ServerRun) -> ServerRun:
        self.runs[run.run_id] = run
        run.task = asyncio.create_task(self._execute(run), name=f"run {run.run_id}")
        return run

    async def _execute(self, run: ServerRun) -> None:
        if self._places is None:
            self._places = asyncio.Semaphore(self.limits.max_runs)
        try:
            async with self._places:
                run.status = "running"
                pipeline = await self.check(run.request)
                prepared = prepare_run(
                    pipeline,
                    self.backend,
                    self.out,
                    model=self.model,
                    resume=True,
                    run_id=run.run_id,
                    subscribers=(run.notifier.notify,),
                )
                run.prepared = prepared
                if run.stopping:
                    prepared.orchestrator.cancel_status = "failed"
                await prepared.execute()
        except asyncio.CancelledError:
            if run.prepared is None:  # cancelled in the queue: no orchestrator to say so
                self._finish_unstarted(run, "failed" if run.stopping else "cancelled")
        except RunBusy:  # a `gen run --resume` took it meanwhile: its files are not ours
            log.warning("run %s: another process is writing it; left to that one", run.run_id)
        except GenError as exc:  # its pipeline or templates changed under a resume
            self._finish_unstarted(run, "failed", str(exc))
        except Exception:
            log.exception("run %s failed", run.run_id)
            self._finish_unstarted(run, "failed", "internal error; see the server's log")
        finally:
            self.runs.pop(run.run_id, None)
            run.notifier.notify()

    def _finish_unstarted(self, run: ServerRun, status: str, message: str | None = None) -> None:
        """A run that ended before its orchestrator did: its manifest and a last event."""
        if run.prepared is not None:
            run.prepared.events.close()
        if run.stopping:
            end_run(run.run_dir, status, message, interrupted=True, error=STOPPED)
        else:
            end_run(run.run_dir, status, message, **({"error": message} if message else {}))

    # -- cancel, resume, stop --------------------------------------------------------------

    async def cancel(self, run: ServerRun) -> None:
        run.cancelling = True
        if run.task is not None:
            run.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(run.task)

    def resume(self, run_dir: RunDir) -> ServerRun:
        request = RunRequest.read(run_dir)
        if request is None:
            raise APIError(
                409,
                f"run {run_dir.run_id} was started by `gen run`, not by this server; resume "
                f"it there with `gen run <pipeline> --resume`",
                code="run_not_resumable",
            )
        self.check_queue()
        manifest = read_manifest(run_dir)
        manifest["status"] = "queued"
        manifest.pop("interrupted", None)
        run_dir.write_manifest(manifest)
        return self._start(ServerRun(run_dir, request))

    def resume_interrupted(self) -> list[str]:
        """On start-up: this server's runs that a stopped server left queued, running or
        interrupted go on where they were (finished sections are reused)."""
        resumed = []
        for run_dir in reversed(all_runs(self.out)):  # oldest first, as they were queued
            manifest = read_manifest(run_dir)
            interrupted = manifest.get("status") in ACTIVE or manifest.get("interrupted")
            if not interrupted or RunRequest.read(run_dir) is None or is_live(run_dir.events_path):
                continue  # over, not a server's, or another process is on it
            try:
                self.resume(run_dir)
                resumed.append(run_dir.run_id)
            except (APIError, OSError) as exc:
                log.warning("cannot resume run %s: %s", run_dir.run_id, exc)
        return resumed

    async def shutdown(self) -> None:
        """Stop every run; each is marked interrupted and resumes with the next server."""
        runs = [r for r in self.runs.values() if not r.cancelling]
        for run in runs:
            run.stopping = True
            if run.prepared is not None:
                run.prepared.orchestrator.cancel_status = "failed"
                run.prepared.orchestrator.cancel_note = STOPPED
        await asyncio.gather(*(self.cancel(r) for r in self.runs.values()))
        for run in runs:
            manifest = read_manifest(run.run_dir)
            manifest |= {"interrupted": True, "status": "failed", "error": STOPPED}
            run.run_dir.write_manifest(manifest)

    def counts(self) -> tuple[int, int]:
        """Runs (generating, queued) here."""
        running = sum(r.status == "running" for r in self.runs.values())
        return running, len(self.runs) - running

    async def sleep(self) -> None:
        await asyncio.sleep(self.poll_seconds)
