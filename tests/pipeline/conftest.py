"""Factories for pipeline tests: write a pipeline (and its templates) into a temp folder."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

WritePipeline = Callable[..., Path]


@pytest.fixture
def write_pipeline(tmp_path: Path) -> WritePipeline:
    """write_pipeline(yaml_text, name="p.yaml", templates={"x.j2": "..."}) -> path."""

    def write(text: str, name: str = "p.yaml", templates: dict[str, str] | None = None) -> Path:
        for file, body in (templates or {}).items():
            target = tmp_path / "templates" / file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write
