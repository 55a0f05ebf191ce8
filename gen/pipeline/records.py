"""Batch records (`gen batch --inputs`): a CSV, JSONL or YAML list of field mappings, each
with its line in the file and a key that names its folder. A record the file cannot give
(a line that is not JSON, a row with too many cells) is kept, with its error, so that the
others still run."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.errors import ConfigError
from gen.pipeline.snippet import decode_source
from gen.pipeline.words import slugify
from gen.pipeline.yaml_loader import load_yaml

FORMATS = (".csv", ".jsonl", ".yaml", ".yml")
_EXTRA = "\0extra"  # where csv puts the cells past the header's columns


@dataclass(slots=True)
class Record:
    number: int  # 1-based, in file order
    line: int  # where it starts in the file
    fields: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    error: str | None = None  # the file could not give this record

    def where(self, file: str) -> str:
        return f"{file}:{self.line}"


def read_records(path: Path, key_field: str | None = None) -> list[Record]:
    """The records of `path`, keyed by `key_field` (slugified, made unique) or by number."""
    file = str(path)
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"{file}: the records must be a .csv, .jsonl or .yaml file")
    try:
        text = decode_source(path.read_bytes(), file, ConfigError)
    except FileNotFoundError:
        raise ConfigError(f"records file not found: {file}") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the records: {exc.strerror}") from None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        records = _csv(text, file)
    else:
        records = _jsonl(text) if suffix == ".jsonl" else _yaml(text, file)
    if not records:
        raise ConfigError(f"{file}: there are no records in it")
    _assign_keys(records, key_field)
    return records


def _csv(text: str, file: str) -> list[Record]:
    reader = csv.DictReader(io.StringIO(text, newline=""), restkey=_EXTRA)
    if not reader.fieldnames:
        return []
    blank = [i for i, name in enumerate(reader.fieldnames, 1) if not name.strip()]
    if blank:
        raise ConfigError(f"{file}:1: column {blank[0]} has no name in the header")
    records, line = [], reader.line_num
    try:
        for number, row in enumerate(reader, 1):
            record = Record(number, line + 1)
            line = reader.line_num
            record.fields = {k: v for k, v in row.items() if k != _EXTRA and v is not None}
            if _EXTRA in row:
                record.error = f"{len(row[_EXTRA])} more cells than the header has columns"
            elif any(v is None for v in row.values()):
                record.error = "fewer cells than the header has columns"
            records.append(record)
    except csv.Error as exc:
        raise ConfigError(f"{file}:{reader.line_num}: not CSV: {exc}") from None
    return records


def _jsonl(text: str) -> list[Record]:
    records: list[Record] = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        record = Record(len(records) + 1, line_no)
        try:
            value = json.loads(line)
        except ValueError as exc:
            record.error = f"not JSON: {exc}"
        else:
            if isinstance(value, dict):
                record.fields = value
            else:
                record.error = f"a record must be a JSON object, got {type(value).__name__}"
        records.append(record)
    return records


def _yaml(text: str, file: str) -> list[Record]:
    data, smap = load_yaml(text, file)
    if data is None:
        return []
    if not isinstance(data, list):
        raise smap.error((), "the records must be a YAML list of mappings")
    records: list[Record] = []
    for index, value in enumerate(data):
        record = Record(index + 1, smap.value_span((index,)).line)
        if isinstance(value, dict):
            record.fields = {str(k): v for k, v in value.items()}
        else:
            record.error = f"a record must be a mapping, got {type(value).__name__}"
        records.append(record)
    return records


def _assign_keys(records: list[Record], key_field: str | None) -> None:
    width = max(4, len(str(len(records))))
    taken: set[str] = set()
    for record in records:
        key = f"{record.number:0{width}d}"
        if key_field is not None:
            value = record.fields.get(key_field)
            if value is not None and str(value).strip():
                key = slugify(str(value))[:80] or key
            elif record.error is None:
                record.error = f"--key {key_field}: the record has no {key_field!r}"
        unique, n = key, 2
        while unique in taken:
            unique, n = f"{key}-{n}", n + 1
        record.key = unique
        taken.add(unique)
