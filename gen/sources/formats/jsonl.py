"""JSON Lines: each line one record, a block `key: value; ...` located by its line number."""

from __future__ import annotations

import json
from typing import Any

from gen.sources.document import Block, Location, Unreadable
from gen.sources.formats.decode import decode


def blocks(data: bytes) -> list[Block]:
    out: list[Block] = []
    for number, line in enumerate(decode(data).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise Unreadable(f"not JSON: {exc.msg} (column {exc.colno})", line=number) from None
        text = _flat(record)
        if text:
            out.append(Block(text, Location(unit="line", first=number, last=number)))
    return out


def _flat(record: Any) -> str:
    """An object as `key: value; ...` (nested values as JSON), a string as itself."""
    if isinstance(record, dict):
        return "; ".join(f"{k}: {_value(v)}" for k, v in record.items() if v not in (None, ""))
    return _value(record)


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
