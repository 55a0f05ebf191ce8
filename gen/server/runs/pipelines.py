"""The pipelines a run may name (the server's pipelines folder), and what POST /v1/runs
sends: a name there, or a pipeline's own YAML text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gen.errors import ConfigError
from gen.pipeline import load_pipeline_text
from gen.pipeline.snippet import decode_source
from gen.server.runs.store import RunRequest

_NAME = re.compile(r"[\w.-]+")


def pipeline_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def _description(text: str) -> str:
    """The comment lines a pipeline file opens with."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines).strip()


def describe(path: Path) -> dict[str, Any]:
    """A pipeline as GET /v1/pipelines lists it: its inputs with their defaults."""
    entry: dict[str, Any] = {"name": path.stem, "file": path.name, "error": None}
    try:
        text = decode_source(path.read_bytes(), path.name, ConfigError)
        entry["description"] = _description(text)
        pipeline = load_pipeline_text(text, file=path.name, base_dir=path.parent, name=path.stem)
    except (ConfigError, OSError, RecursionError) as exc:
        message = str(exc) if not isinstance(exc, RecursionError) else "nested too deeply"
        return entry | {"inputs": {}, "sections": [], "error": message}
    return entry | {
        "name": pipeline.name,
        "inputs": pipeline.inputs,
        "sections": [s.id for s in pipeline.sections],
    }


def run_request(folder: Path, pipeline: str, inputs: dict[str, Any]) -> RunRequest:
    """A request's pipeline: a name from `folder` (one line, no ':'), else YAML text."""
    if "\n" not in pipeline and ":" not in pipeline and _NAME.fullmatch(pipeline.strip()):
        name = pipeline.strip().removesuffix(".yaml").removesuffix(".yml")
        by_stem = {p.stem: p for p in pipeline_files(folder)}
        path = by_stem.get(name)
        if path is None:
            known = ", ".join(sorted(by_stem)) or "none"
            raise ConfigError(
                f"request.pipeline: no pipeline named {name!r} in {folder} (there: {known}); "
                "send a name from there, or the pipeline's YAML text"
            )
        text = decode_source(path.read_bytes(), path.name, ConfigError)
        return RunRequest(path.stem, text, f"{folder.name}/{path.name}", True, inputs)
    return RunRequest("", pipeline, "request.pipeline", False, inputs)
