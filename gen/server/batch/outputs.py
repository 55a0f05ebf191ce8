"""The output and errors files of an OpenAI batch, as OpenAI writes them: one JSON line per
request, `{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}`.
Each line is appended whole and fsynced as its request ends, so a killed batch keeps every
line it finished; read back on the next run, a torn last line is cut off."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gen.errors import ConfigError
from gen.files import atomic_write

Entry = dict[str, Any]  # one line of an output or errors file
START = b'{"id": "batch_req_'  # how every line written here begins


def response_entry(custom_id: str, status: int, body: Any, request_id: str | None = None) -> Entry:
    """A request answered with an HTTP status and body (an error body for a 4xx or 5xx)."""
    response = {
        "status_code": status,
        "request_id": request_id or f"req_{uuid.uuid4().hex}",
        "body": body,
    }
    return {"id": _id(), "custom_id": custom_id, "response": response, "error": None}


def error_entry(
    custom_id: str | None,
    code: str,
    message: str,
    param: str | None = None,
    line: int | None = None,
) -> Entry:
    """A request that got no HTTP answer: a line of the input that is no request (its line
    number given), or one whose answer never came."""
    error: Entry = {"code": code, "message": message, "param": param}
    if line is not None:
        error["line"] = line
    return {"id": _id(), "custom_id": custom_id, "response": None, "error": error}


def _id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"


def succeeded(entry: Entry) -> bool:
    response = entry.get("response")
    return isinstance(response, dict) and response.get("status_code") == 200


class ResultFile:
    """One JSONL file of entries, written a whole line at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, repair: bool = True) -> list[Entry]:
        """The entries written so far. A last line cut short by a kill (no newline, or not
        JSON) is left out, and with `repair` cut off the file; any other line that is no
        entry is a ConfigError (the file is not this batch's), and so is a last line that
        is not the start of one of the lines written here."""
        if not self.path.is_file():
            return []
        data = self.path.read_bytes()
        rows = data.split(b"\n")
        entries: list[Entry] = []
        kept = 0  # bytes of the whole lines read
        for number, raw in enumerate(rows, 1):  # (the last row: what follows the last newline)
            last = number == len(rows) or (number == len(rows) - 1 and not rows[-1])
            entry = None if number == len(rows) else _entry(raw)
            if entry is None and last and _torn(raw):
                break  # cut short by a kill
            if entry is None:
                raise ConfigError(
                    "not a line of an OpenAI batch's output (no custom_id); is this another "
                    "file? Choose another output file, or move this one away",
                    file=str(self.path),
                    line=number,
                )
            entries.append(entry)
            kept += len(raw) + 1
        if repair and kept < len(data):
            with self.path.open("r+b") as f:
                f.truncate(kept)
                os.fsync(f.fileno())
        return entries

    def clear_stale(self) -> None:
        """Remove what a kill inside sort()'s rewrite left beside the file: the temporary
        file of gen.files.atomic_write."""
        for stale in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            stale.unlink(missing_ok=True)

    def append(self, entry: Entry) -> None:
        """One line, whole: written in one call, flushed and fsynced before the next."""
        data = json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n"
        with self.path.open("ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def sort(self, key: Callable[[Entry], int]) -> None:
        """Rewrite the file (atomically) with its lines in `key`'s order."""
        entries = self.read()
        ordered = sorted(entries, key=key)
        if ordered != entries:
            text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in ordered)
            atomic_write(self.path, text)


def _torn(raw: bytes) -> bool:
    """Whether `raw` can be the start of a line written here (or nothing)."""
    return raw.startswith(START) or START.startswith(raw)


def _entry(raw: bytes) -> Entry | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("custom_id"), str | None):
        return None
    return entry if "custom_id" in entry else None
