"""The run directory (docs/design.md §4): document.md, sections/<id>.md, manifest.json and
events.jsonl, every file written atomically (temp file + rename)."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

from gen.errors import ConfigError
from gen.files import atomic_write


def check_out_dir(out: Path) -> None:
    """Refuse an output folder no run can be written in (a file, under a file, read-only)
    before a model loads; the folder itself is made later, with the run."""
    head = f"--out {out}: cannot write the run"
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if existing == out and not out.is_dir():
        raise ConfigError(f"{head}: {out} is a file, not a folder")
    if not existing.is_dir():
        raise ConfigError(f"{head}: {existing} is a file, so no folder can be made in it")
    try:
        _probe(existing)
    except OSError as exc:
        raise ConfigError(f"{head}: {exc.strerror}: {existing}") from None


def check_events_path(target: str | None) -> None:
    """Refuse an --events file that cannot be written (a folder, in a missing folder,
    read-only) before a model loads; None and "-" (stdout) need no check."""
    if target is None or target == "-":
        return
    head, path = f"--events {target}: cannot write", Path(target)
    if path.is_dir():
        raise ConfigError(f"{head}: it is a folder; give a file, or - for stdout")
    folder = path.absolute().parent
    if not folder.is_dir():
        problem = "is a file" if folder.exists() else "does not exist"
        raise ConfigError(f"{head}: the folder {folder} {problem}")
    try:
        if path.exists():
            path.open("a", encoding="utf-8").close()  # appending truncates nothing
        else:
            _probe(folder)
    except OSError as exc:
        raise ConfigError(f"{head}: {exc.strerror}: {exc.filename or path}") from None


def _probe(folder: Path) -> None:
    """Make and remove a file in `folder`: the honest test of writing there (os.access
    answers yes to root on folders it still cannot write, such as /sys)."""
    fd, name = tempfile.mkstemp(prefix=".gen-check-", dir=folder)
    os.close(fd)
    os.unlink(name)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.sections_dir = path / "sections"

    @classmethod
    def create(cls, out: Path, pipeline_name: str, run_id: str | None = None) -> RunDir:
        """A new run's folder under `out`; a run id or pipeline name that is not a plain
        folder name (a separator, "..", empty) is refused."""
        for name in (pipeline_name, run_id or "x"):
            if name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name:
                raise ConfigError(f"{name!r} is not a plain folder name")
        run = cls(out / pipeline_name / (run_id or new_run_id()))
        run.sections_dir.mkdir(parents=True, exist_ok=True)
        return run

    @classmethod
    def latest(cls, out: Path, pipeline_name: str) -> RunDir | None:
        """The most recent run of this pipeline that has a manifest; symlinked folders
        are no runs (a resume never writes outside `out`)."""
        root = out / pipeline_name
        if root.is_symlink() or not root.is_dir():
            return None
        runs = sorted(
            p for p in root.glob("*") if not p.is_symlink() and (p / "manifest.json").is_file()
        )
        return cls(runs[-1]) if runs else None

    def remove_temp_files(self) -> int:
        """Temp files left by a process killed mid-write (never read as results)."""
        stale = [p for p in self.path.rglob(".*.tmp") if p.is_file()]
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def document_path(self) -> Path:
        return self.path / "document.md"

    def section_path(self, key: str) -> Path:
        if not key or "/" in key or "\\" in key or key.startswith("."):
            raise ConfigError(f"section key {key!r} cannot name a file in the run directory")
        return self.sections_dir / f"{key}.md"

    def prompts_path(self, key: str) -> Path:
        return self.path / "prompts" / self.section_path(key).with_suffix(".json").name

    def write_prompts(self, key: str, rounds: list[dict[str, Any]]) -> None:
        """prompts/<key>.json: per round, what was sent to the model and what came back."""
        path = self.prompts_path(key)
        body = {"section": key, "rounds": rounds}
        atomic_write(path, json.dumps(body, ensure_ascii=False, indent=2) + "\n")

    def write_section(self, key: str, text: str) -> None:
        atomic_write(self.section_path(key), text)

    def read_section(self, key: str) -> str | None:
        path = self.section_path(key)
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write(self.manifest_path, json.dumps(manifest, ensure_ascii=False, indent=2) + "\n")

    def read_manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.is_file():
            return None
        data: dict[str, Any] = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        return data

    def write_document(self, text: str) -> None:
        atomic_write(self.document_path, text)
