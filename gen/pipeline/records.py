"""Batch records (`gen batch --inputs`): a CSV, JSONL or YAML list of field mappings, each
with its line in the file and a key that names its folder. A record the file cannot give
(a line that is not JSON, a row with too many cells) is kept, with its error, so that the
others still run."""

from __future__ import annotations

import csv
import io
import json
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.errors import ConfigError
from gen.pipeline.inputs import unusable
from gen.pipeline.snippet import decode_source
from gen.pipeline.yaml_loader import load_yaml
from gen.text.words import slugify

FORMATS = (".csv", ".jsonl", ".yaml", ".yml")
_EXTRA = "\0extra"  # where csv puts the cells past the header's columns
KEY_CHARS, KEY_BYTES = 80, 200  # a record's folder name; file systems allow 255 bytes


@dataclass(slots=True)
class Record:
    number: int  # 1-based, in file order
    line: int  # where it starts in the file
    fields: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    error: str | None = None  # the file could not give this record

    def where(self, file: str) -> str:
        return f"{file}:{self.line}"


def read_text(path: Path, what: str) -> str:
    """The text of a user's file of `what` (records, requests), decoded as gen decodes a
    source; a ConfigError naming the file where it cannot be read."""
    file = str(path)
    try:
        if stat.S_ISCHR(path.stat().st_mode):  # /dev/zero would be read for ever
            raise ConfigError(f"{file}: the {what} must be a file, not a device")
        return decode_source(path.read_bytes(), file, ConfigError)
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found: {file}") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the {what}: {exc.strerror}") from None


def read_records(path: Path, key_field: str | None = None) -> list[Record]:
    """The records of `path`, keyed by `key_field` (slugified, made unique) or by number."""
    file = str(path)
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"{file}: the records must be a .csv, .jsonl or .yaml file")
    text = read_text(path, "records").removeprefix("\ufeff")  # (the mark spreadsheets write)
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
    first_at: dict[str, int] = {}
    for i, name in enumerate(reader.fieldnames, 1):
        if not name.strip():
            raise ConfigError(f"{file}:1: column {i} has no name in the header")
        if name in first_at:
            raise ConfigError(f"{file}:1: columns {first_at[name]} and {i} are both {name!r}")
        first_at[name] = i
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
    except csv.Error as exc:  # the record that starts after the last one read
        problem = f"not CSV: {exc}"
        if "field limit" in str(exc):
            problem = f"a cell is longer than {csv.field_size_limit():,} characters"
        raise ConfigError(f"{file}:{line + 1}: {problem}") from None
    return records


def _jsonl(text: str) -> list[Record]:
    records: list[Record] = []
    for line_no, line in enumerate(text.split("\n"), 1):  # JSON strings may hold U+2028
        if not line.strip():
            continue
        record = Record(len(records) + 1, line_no)
        try:
            value = json.loads(line, parse_constant=_no_constant)
        except ValueError as exc:
            too_long = "integer string conversion" in str(exc)  # Python's 4300-digit limit
            record.error = "a number has too many digits" if too_long else f"not JSON: {exc}"
        except RecursionError:
            record.error = "not JSON this program can read: it is nested too deeply"
        else:
            if not isinstance(value, dict):
                record.error = f"a record must be a JSON object, got {type(value).__name__}"
            elif (problem := unusable(value)) is not None:
                record.error = f"cannot be an input: {problem}"
            else:
                record.fields = value
        records.append(record)
    return records


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON (Python writes it; JSON has no such number)")


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
                slug = slugify(str(value))[:KEY_CHARS].encode()[:KEY_BYTES]
                key = slug.decode(errors="ignore").strip("-") or key
            elif record.error is None:
                record.error = f"--key {key_field}: the record has no {key_field!r}"
        unique, n = key, 2
        while unique in taken:
            unique, n = f"{key}-{n}", n + 1
        record.key = unique
        taken.add(unique)
