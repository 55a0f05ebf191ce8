"""Exports of a run's document.md (docs/design.md §9): `document.<ext>` beside it for html, docx and
pdf; md is the document itself. Every format is rendered before any file is written, and each
file is written atomically, so a failed export leaves no partial file and document.md as it was."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from gen.export.errors import ExportError
from gen.export.html import guess_lang, markdown_html
from gen.files import atomic_write
from gen.text.markdown import headings, parser

FORMATS = ("md", "html", "docx", "pdf")

__all__ = ["FORMATS", "ExportError", "export_document", "parse_formats"]


def parse_formats(values: Iterable[str]) -> list[str]:
    """`["html,docx", "pdf"]` as one list in the order given, each format once."""
    wanted: list[str] = []
    for value in values:
        for name in (part.strip().lower().lstrip(".") for part in value.split(",")):
            if name and name not in FORMATS:
                raise ExportError(
                    f"unknown export format {name!r}; choose from {', '.join(FORMATS)}",
                    exit_code=2,
                )
            if name and name not in wanted:
                wanted.append(name)
    return wanted


def export_document(run_dir: Path, formats: Sequence[str]) -> list[Path]:
    """Write `document.<ext>` for each format into `run_dir`; returns the paths, one per
    format in the order given (for md, document.md itself)."""
    wanted = parse_formats(formats)
    source = run_dir / "document.md"
    if not run_dir.is_dir():
        raise ExportError(f"{run_dir}: not a run directory (no such folder)", exit_code=2)
    if not source.is_file():
        raise ExportError(
            f"{run_dir}: no document.md here; gen run writes it once every section has completed",
            exit_code=2,
        )
    try:
        markdown = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"{source}: cannot read it: {exc}", exit_code=2) from None
    title = _title(run_dir, markdown)
    rendered = {fmt: _render(fmt, markdown, title) for fmt in wanted if fmt != "md"}
    for fmt, data in rendered.items():
        path = run_dir / f"document.{fmt}"
        try:
            atomic_write(path, data)
        except OSError as exc:
            raise ExportError(f"{path}: cannot write it: {exc.strerror or exc}") from None
    return [source if fmt == "md" else run_dir / f"document.{fmt}" for fmt in wanted]


def _title(run_dir: Path, markdown: str) -> str:
    """The manifest's title, else the document's first `#` heading, else the pipeline's name."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    if not isinstance(manifest, dict):
        manifest = {}
    if isinstance(manifest.get("title"), str) and manifest["title"].strip():
        return str(manifest["title"]).strip()
    first = next((h.text for h in headings(parser().parse(markdown)) if h.level == 1), "")
    return first or str(manifest.get("pipeline") or run_dir.name)


def _render(fmt: str, markdown: str, title: str) -> str | bytes:
    lang = guess_lang(markdown)
    try:
        if fmt == "html":
            return markdown_html(markdown, title, toc=True, lang=lang)
        if fmt == "docx":
            from gen.export.word import docx_bytes

            return docx_bytes(markdown, title, lang)
        from gen.export.pdf import pdf_bytes

        return pdf_bytes(markdown_html(markdown, title, toc=True, lang=lang))
    except ExportError:
        raise
    except Exception as exc:  # a renderer's own failure, told in one line
        raise ExportError(f"{fmt} export failed: {type(exc).__name__}: {exc}") from exc
