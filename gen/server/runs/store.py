"""Runs on disk, as the runs API sees them: find a run directory by id under the outputs
folder, read its manifest and request, and say whether a process is writing it. Knows
nothing of HTTP or of the runs this server is executing."""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gen.files import atomic_write
from gen.pipeline.run.events import EventLog, RunBusy, is_live, open_regular
from gen.pipeline.run.rundir import RunDir

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
ACTIVE = ("queued", "running")
SETTLE_AFTER_SECONDS = 5.0  # a run dir this fresh may be a `gen run` still taking its lock


@dataclass(slots=True)
class RunRequest:
    """What POST /v1/runs asked for, kept in the run directory as request.json so that the
    run can be resumed, by a call or by the next server, from the same text."""

    pipeline: str  # the pipeline's name
    text: str  # its YAML
    file: str  # where error messages point: pipelines/<name>.yaml, or "request.pipeline"
    named: bool  # from the pipelines folder (its templates may sit beside it)
    inputs: dict[str, Any] = field(default_factory=dict)
    created: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=2) + "\n"

    @classmethod
    def read(cls, run: RunDir) -> RunRequest | None:
        path = request_path(run)
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text("utf-8"))
            request = cls(**data)
        except (OSError, ValueError, TypeError):
            return None
        texts = (request.pipeline, request.text, request.file, request.created)
        if not all(isinstance(t, str) for t in texts) or not isinstance(request.inputs, dict):
            return None
        return request


def request_path(run: RunDir) -> Path:
    return run.path / "request.json"


def write_request(run: RunDir, request: RunRequest) -> None:
    atomic_write(request_path(run), request.to_json())


def check_run_id(run_id: str) -> bool:
    return RUN_ID.fullmatch(run_id) is not None and ".." not in run_id


def find_run(out: Path, run_id: str) -> RunDir | None:
    """The run directory <out>/<pipeline>/<run_id>, if the id is a plain name and one exists
    (never a path outside `out`: ids with '/' or '..' find nothing)."""
    if not check_run_id(run_id):
        return None
    for pipeline in _folders(out):
        candidate = pipeline / run_id
        if _is_folder(candidate) and _is_run(candidate):
            return RunDir(candidate)
    return None


def all_runs(out: Path) -> list[RunDir]:
    runs = [
        RunDir(run)
        for pipeline in _folders(out)
        for run in _folders(pipeline)
        if check_run_id(run.name) and _is_run(run)
    ]
    return sorted(runs, key=lambda r: r.run_id, reverse=True)  # ids start with the time


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _folders(path: Path) -> list[Path]:
    """The real folders in `path` (no symlinks); none where it cannot be read."""
    try:
        return sorted(p for p in path.iterdir() if _is_folder(p))
    except OSError:
        return []


def _is_run(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "events.jsonl").is_file()


def read_manifest(run: RunDir) -> dict[str, Any]:
    """The manifest, or {} where there is none yet or the file is not one."""
    try:
        data = run.read_manifest()
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def regular_file(path: Path) -> bool:
    """A file the API may read and serve: a regular one, not a link to elsewhere."""
    return path.is_file() and not path.is_symlink()


def disk_status(run: RunDir, manifest: dict[str, Any]) -> str:
    """A run's status as its files tell it: running while a process holds its event log."""
    if is_live(run.events_path):
        return "running"
    return str(manifest.get("status") or "running")


def settle_dead_run(run: RunDir, manifest: dict[str, Any]) -> bool:
    """A run that says it is running but whose writer is gone (killed, or a server that
    stopped): record it as failed, in the manifest and with a last event, so that watchers
    end and `--resume` can pick it up. False when it is live, fresh or already over."""
    status = manifest.get("status", "running")  # none yet: a gen run in its first section
    if status not in ACTIVE or is_live(run.events_path):
        return False
    events = run.events_path
    if events.exists() and not regular_file(events):
        return False  # not an event log: nothing gen wrote, nothing to settle
    if events.is_file() and time.time() - events.stat().st_mtime < SETTLE_AFTER_SECONDS:
        return False
    message = "the process writing this run stopped before it finished"
    return end_run(run, "failed", message, error=message, interrupted=True)


def end_run(run: RunDir, status: str, message: str | None = None, **fields: Any) -> bool:
    """Record that a run ended without its orchestrator saying so: `status` and `fields`
    into its manifest, then an `error` event (with a message) and `run_finished`, so that
    its watchers end. False, touching nothing, when another process writes the run."""
    try:
        log = EventLog(run.run_id, run.events_path)
    except (RunBusy, OSError):
        return False  # a writer took it just now (or it cannot be written)
    try:
        manifest = {**read_manifest(run), "status": status, **fields}
        run.write_manifest(manifest)
        if message:
            log.emit("error", message=message)
        metrics = manifest.get("metrics") or {}
        log.emit("run_finished", status=status, metrics=metrics, document=None)
    finally:
        log.close()
    return True


def summary(run: RunDir, manifest: dict[str, Any], status: str, source: str) -> dict[str, Any]:
    """A run as GET /v1/runs lists it."""
    metrics = manifest.get("metrics")
    metrics = metrics if isinstance(metrics, dict) else {}
    sections = manifest.get("sections")
    sections = [s for s in sections if isinstance(s, dict)] if isinstance(sections, list) else []
    return {
        "run_id": run.run_id,
        "pipeline": manifest.get("pipeline") or run.path.parent.name,
        "status": status,
        "source": source,
        "created": manifest.get("created") or _created(run),
        "model": manifest.get("model") or _first_event(run).get("model"),
        "words": metrics.get("words", 0),
        "sections": len(sections),
        "sections_completed": sum(s.get("status") == "completed" for s in sections),
        "length_score": manifest.get("length_score"),
        "document": bool(manifest.get("document")) and regular_file(run.document_path),
    }


def _first_event(run: RunDir) -> dict[str, Any]:
    """A run's run_started event (its first line), for a run without a manifest yet."""
    f = open_regular(run.events_path)
    if f is None:
        return {}
    try:
        with f:
            first = json.loads(f.readline())
    except (OSError, ValueError):
        return {}
    return first if isinstance(first, dict) else {}


def _created(run: RunDir) -> str:
    """When a run without a manifest yet (a `gen run` in its first section) was made."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(run.path.stat().st_mtime))
