"""The runs API (docs/design.md §6): start a pipeline run, list runs, read a run's manifest,
watch its events over SSE, fetch its document and timeline, cancel and resume it. Runs a
`gen run` writes in the same outputs folder are listed and watched too."""

from __future__ import annotations

import os
import re
import signal
import socket
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gen.errors import ConfigError
from gen.pipeline.run.events import EventReader, is_live, process_start
from gen.pipeline.run.rundir import RunDir
from gen.pipeline.run.timeline import timeline_svg
from gen.server.errors import APIError
from gen.server.request import parse_body, require_json
from gen.server.runs.documents import markdown_html, wants_html
from gen.server.runs.events import follow, held, last_event_id, sse
from gen.server.runs.manager import RunManager
from gen.server.runs.models import CreateRun
from gen.server.runs.pipelines import describe, pipeline_files, run_request
from gen.server.runs.store import (
    RunRequest,
    all_runs,
    disk_status,
    find_run,
    read_manifest,
    regular_file,
    settle_dead_run,
    summary,
)
from gen.server.sse import EventStream


def manager(request: Request) -> RunManager:
    runs: RunManager | None = request.app.state.runs
    if runs is None:
        raise APIError(404, "this server runs no pipelines", code="not_found")
    return runs


def _run(request: Request) -> RunDir:
    run_id = request.path_params["run_id"]
    runs = manager(request)
    own = runs.runs.get(run_id)
    run = own.run_dir if own else find_run(runs.out, run_id)
    if run is None:
        raise APIError(404, f"no run {run_id!r} in {runs.out}", param="run_id", code="not_found")
    return run


def _status(runs: RunManager, run: RunDir, manifest: dict[str, Any]) -> str:
    own = runs.runs.get(run.run_id)
    if own is not None:
        return own.status
    if settle_dead_run(run, manifest):
        manifest |= read_manifest(run)
    return disk_status(run, manifest)


def _source(run: RunDir) -> str:
    return "server" if RunRequest.read(run) is not None else "cli"


# -- pipelines and runs --------------------------------------------------------------------


async def list_pipelines(request: Request) -> Response:
    folder = manager(request).pipelines
    return JSONResponse({"object": "list", "data": [describe(p) for p in pipeline_files(folder)]})


async def create_run(request: Request) -> Response:
    runs = manager(request)
    require_json(request)
    runs.check_queue()
    body = await parse_body(request, CreateRun)
    try:
        asked = run_request(runs.pipelines, body.pipeline, body.inputs)
        run = await runs.submit(asked)
    except ConfigError as exc:
        message, param = str(exc), "pipeline"
        if "--set " in message:  # an input, which over HTTP is not a --set but inputs.KEY
            message, param = message.replace("--set ", "inputs.", 1), "inputs"
        raise APIError(422, message, param=param, code="invalid_pipeline") from None
    payload = {"run_id": run.run_id, "pipeline": run.request.pipeline, "status": run.status}
    return JSONResponse(payload, status_code=201, headers={"Location": f"/v1/runs/{run.run_id}"})


async def list_runs(request: Request) -> Response:
    runs = manager(request)
    data = []
    for run in all_runs(runs.out):
        manifest = read_manifest(run)
        status = _status(runs, run, manifest)
        data.append(summary(run, manifest, status, _source(run)))
    return JSONResponse({"object": "list", "data": data})


async def get_run(request: Request) -> Response:
    runs = manager(request)
    run = _run(request)
    own = runs.runs.get(run.run_id)
    if own is not None and own.prepared is not None:
        manifest = own.prepared.orchestrator.manifest()  # the sections under way included
    else:
        manifest = read_manifest(run)
    manifest["status"] = _status(runs, run, manifest)
    manifest["source"] = _source(run)
    return JSONResponse(manifest)


async def run_events(request: Request) -> Response:
    runs = manager(request)
    run = _run(request)
    after = last_event_id(
        request.headers.get("last-event-id"), request.query_params.get("last_event_id")
    )
    run_id = run.run_id

    def active() -> bool:
        if run_id in runs.runs or is_live(run.events_path):
            return True
        settle_dead_run(run, read_manifest(run))  # a writer that died: its last events
        return False

    async def wait() -> None:
        own = runs.runs.get(run_id)
        if own is not None:
            await own.notifier.wait(runs.poll_seconds)
        else:
            await runs.sleep()

    def written() -> int | None:  # (this server's count of the run's events, if it writes it)
        own = runs.runs.get(run_id)
        return own.notifier.count if own is not None else None

    place = runs.watcher_place()  # (a 429 before anything is held)
    feed, leave = runs.feed(run)

    def release() -> None:
        place()
        leave()

    return EventStream(
        held(sse(follow(feed, after, active, wait, written)), release),
        ping=runs.ping_seconds,
        headers={"Cache-Control": "no-cache"},
    )


async def run_document(request: Request) -> Response:
    run = _run(request)
    manifest = read_manifest(run)
    if not manifest.get("document") or not run.document_path.is_file():
        raise APIError(
            409,
            f"run {run.run_id} has no document yet (status {manifest.get('status', 'queued')}); "
            "it is written when every section has completed",
            code="document_not_ready",
        )
    if not regular_file(run.document_path):
        raise APIError(409, f"run {run.run_id}: document.md is not a file", code="run_broken")
    text = run.document_path.read_text("utf-8", errors="replace")
    name = f"{manifest.get('pipeline', 'document')}-{run.run_id}"
    if wants_html(request.headers.get("accept", "")):
        return Response(markdown_html(text, name), media_type="text/html; charset=utf-8")
    return Response(
        text,
        media_type="text/markdown; charset=utf-8",
        headers={"Content-Disposition": content_disposition(f"{name}.md")},
    )


def content_disposition(filename: str) -> str:
    """RFC 6266: a plain ASCII name for old clients, the UTF-8 name for the rest."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", filename)
    return f"inline; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


async def run_timeline(request: Request) -> Response:
    run = _run(request)
    svg = timeline_svg(EventReader(run.events_path).new())
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-cache"})


async def cancel_run(request: Request) -> Response:
    runs = manager(request)
    require_json(request)
    run = _run(request)
    own = runs.runs.get(run.run_id)
    if own is not None:
        await runs.cancel(own)
    elif is_live(run.events_path):
        _stop_other_process(run)
    else:
        status = _status(runs, run, read_manifest(run))
        raise APIError(409, f"run {run.run_id} is already over ({status})", code="run_over")
    return JSONResponse({"run_id": run.run_id, "status": read_manifest(run).get("status")})


def _stop_other_process(run: RunDir) -> None:
    """A live run another process writes (a `gen run` here): SIGTERM, which gen run takes
    as a cancel (finished sections kept). Only a gen run on this host can be reached."""
    started = [e for e in EventReader(run.events_path).new() if e.get("type") == "run_started"]
    last = started[-1] if started else {}
    pid = last.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool):
        pid = 0
    same = (
        pid > 1
        and pid != os.getpid()
        and last.get("host") == socket.gethostname()
        and RunRequest.read(run) is None  # a server's run: stop that server, not this way
        and last.get("pid_start") is not None
        and last.get("pid_start") == process_start(pid)  # the very process, not a reused pid
    )
    if not same:
        raise APIError(
            409, f"run {run.run_id} is written by a process this server cannot stop",
            code="run_not_cancellable",
        )  # fmt: skip
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass  # it ended meanwhile
    except PermissionError:
        raise APIError(
            409, f"run {run.run_id}: no permission to stop process {pid}",
            code="run_not_cancellable",
        ) from None  # fmt: skip


async def resume_run(request: Request) -> Response:
    runs = manager(request)
    require_json(request)
    run = _run(request)
    if run.run_id in runs.runs or is_live(run.events_path):
        raise APIError(409, f"run {run.run_id} is still going", code="run_active")
    status = read_manifest(run).get("status")
    if status == "completed":
        raise APIError(409, f"run {run.run_id} has completed", code="run_over")
    resumed = runs.resume(run)
    return JSONResponse({"run_id": resumed.run_id, "status": resumed.status})


ROUTES = [
    Route("/v1/pipelines", list_pipelines, methods=["GET"]),
    Route("/v1/runs", create_run, methods=["POST"]),
    Route("/v1/runs", list_runs, methods=["GET"]),
    Route("/v1/runs/{run_id}", get_run, methods=["GET"]),
    Route("/v1/runs/{run_id}/events", run_events, methods=["GET"]),
    Route("/v1/runs/{run_id}/document", run_document, methods=["GET"]),
    Route("/v1/runs/{run_id}/timeline.svg", run_timeline, methods=["GET"]),
    Route("/v1/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
    Route("/v1/runs/{run_id}/resume", resume_run, methods=["POST"]),
]
