"""Factories for source files the repository does not hold as they are: PDFs (WeasyPrint),
Word documents (python-docx), and any bytes under a name; and a GEN_HOME of each test's own,
so the extraction cache starts empty."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import docx
import pytest


@pytest.fixture(autouse=True)
def gen_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("GEN_HOME", str(home))
    return home


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """The pipeline's folder: what sources are named relative to."""
    folder = tmp_path / "pipeline"
    folder.mkdir()
    return folder


@pytest.fixture
def make_file(base: Path) -> Callable[[str, str | bytes], Path]:
    def make(name: str, content: str | bytes) -> Path:
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)
        return path

    return make


@pytest.fixture
def make_pdf(base: Path) -> Callable[[str, Sequence[str]], Path]:
    """A PDF with one page per given HTML body."""
    from weasyprint import HTML

    def make(name: str, pages: Sequence[str]) -> Path:
        breaks = "".join(f'<section style="break-after: page">{p}</section>' for p in pages[:-1])
        body = breaks + pages[-1]
        path = base / name
        HTML(string=f"<html><body>{body}</body></html>").write_pdf(path)
        return path

    return make


@pytest.fixture
def make_docx(base: Path) -> Callable[[str, Sequence[tuple[str, str | list[list[str]]]]], Path]:
    """A Word document from (style, text) items: `Title`, `Heading 1`.., `Normal`, or
    `Table` with rows of cells."""

    def make(name: str, items: Sequence[tuple[str, str | list[list[str]]]]) -> Path:
        document = docx.Document()
        for style, content in items:
            if style == "Table":
                assert isinstance(content, list)
                table = document.add_table(rows=len(content), cols=len(content[0]))
                for row, cells in zip(table.rows, content, strict=True):
                    for cell, text in zip(row.cells, cells, strict=True):
                        cell.text = text
            else:
                assert isinstance(content, str)
                document.add_paragraph(content, style=style)
        path = base / name
        document.save(str(path))
        return path

    return make
