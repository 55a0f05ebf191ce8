"""A resolved source's bytes as a Document: read once (never more than the size limit), hashed,
and extracted by its kind's reader, or taken from the extraction cache."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from gen.errors import SourceError
from gen.sources import cache
from gen.sources.document import Block, Document, Unreadable
from gen.sources.formats import csv, docx, html, jsonl, markdown, pdf, plaintext
from gen.sources.limits import MAX_CHARS, MAX_FILE_BYTES
from gen.sources.paths import Source, resolve

READERS: dict[str, Callable[[bytes], list[Block]]] = {
    "markdown": markdown.blocks,
    "text": plaintext.blocks,
    "html": html.blocks,
    "pdf": pdf.blocks,
    "docx": docx.blocks,
    "csv": csv.blocks,
    "jsonl": jsonl.blocks,
}


def load(specs: Sequence[str], base: Path) -> list[Document]:
    """The documents `specs` name (see gen.sources.paths.resolve), read in order."""
    return read_all(resolve(specs, base).sources)


def read_all(sources: Sequence[Source]) -> list[Document]:
    """Every source read; past MAX_CHARS of text in all, the file that crosses it is named."""
    documents, chars = [], 0
    for source in sources:
        document = read(source)
        chars += document.chars
        if chars > MAX_CHARS:
            raise SourceError(
                source.name, f"the sources hold more than {MAX_CHARS:,} characters of text together"
            )
        documents.append(document)
    return documents


def read(source: Source) -> Document:
    data = _bytes(source)
    sha256 = hashlib.sha256(data).hexdigest()
    blocks = cache.load(sha256, source.kind)
    if blocks is None:
        try:
            blocks = READERS[source.kind](data)
        except Unreadable as exc:
            raise SourceError(source.name, exc.message, exc.line) from None
        cache.store(sha256, source.kind, blocks)
    return Document(source.name, source.kind, sha256, tuple(blocks))


def _bytes(source: Source) -> bytes:
    try:
        with source.path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SourceError(source.name, f"cannot read it: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:  # grown since it was resolved
        raise SourceError(source.name, f"more than a source may be ({MAX_FILE_BYTES >> 20} MB)")
    return data
