"""Extracted blocks kept on disk under $GEN_HOME/sources, keyed by the file's sha256, its kind
and the extractors' version, so a second run does not parse a PDF again. A missing or
damaged entry is a miss; a cache that cannot be written is skipped."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from gen.files import atomic_write
from gen.home import gen_home
from gen.sources.document import Block, Location

VERSION = 1  # of the readers' output: raise it when a reader changes what it extracts


def entry(sha256: str, kind: str) -> Path:
    return gen_home() / "sources" / sha256[:2] / f"{sha256}.{kind}.v{VERSION}.json"


def load(sha256: str, kind: str) -> list[Block] | None:
    try:
        raw = json.loads(entry(sha256, kind).read_text(encoding="utf-8"))
        return [_block(item) for item in raw["blocks"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(sha256: str, kind: str, blocks: list[Block]) -> None:
    data = {"version": VERSION, "kind": kind, "blocks": [_item(b) for b in blocks]}
    with contextlib.suppress(OSError):  # a read-only home only costs the next run a parse
        atomic_write(entry(sha256, kind), json.dumps(data, ensure_ascii=False))


def _item(block: Block) -> dict[str, object]:
    loc = block.location
    return {
        "text": block.text,
        "page": loc.page,
        "heading": list(loc.heading),
        "unit": loc.unit,
        "first": loc.first,
        "last": loc.last,
    }


def _block(item: dict[str, object]) -> Block:
    page, unit, first, last = item["page"], item["unit"], item["first"], item["last"]
    heading = item["heading"]
    if not (
        isinstance(item["text"], str)
        and (page is None or isinstance(page, int))
        and (unit is None or isinstance(unit, str))
        and isinstance(first, int)
        and isinstance(last, int)
        and isinstance(heading, list)
    ):
        raise TypeError("a damaged cache entry")
    location = Location(
        page=page, heading=tuple(map(str, heading)), unit=unit, first=first, last=last
    )
    return Block(item["text"], location)
