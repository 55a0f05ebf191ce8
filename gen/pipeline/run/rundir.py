"""The run directory (DESIGN.md §4): document.md, sections/<id>.md, manifest.json and
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


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(3)


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.sections_dir = path / "sections"

    @classmethod
    def create(cls, out: Path, pipeline_name: str, run_id: str | None = None) -> RunDir:
        run = cls(out / pipeline_name / (run_id or new_run_id()))
        run.sections_dir.mkdir(parents=True, exist_ok=True)
        return run

    @classmethod
    def latest(cls, out: Path, pipeline_name: str) -> RunDir | None:
        """The most recent run of this pipeline that has a manifest."""
        root = out / pipeline_name
        runs = (
            sorted(p for p in root.glob("*") if (p / "manifest.json").is_file())
            if root.is_dir()
            else []
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
