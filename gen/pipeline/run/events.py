"""The run's event stream (DESIGN.md §5): numbered events, written to events.jsonl and
handed to every subscriber (progress display, --events, SSE).

The process writing a run holds an exclusive lock on its events.jsonl for as long as the
run goes on, so a reader (`gen serve`) can tell a live run from one whose writer died."""

from __future__ import annotations

import fcntl
import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from gen.errors import GenError

Event = dict[str, Any]
Subscriber = Callable[[Event], None]


class RunBusy(GenError):
    """Another process is writing this run (its events.jsonl is locked)."""


class EventLog:
    def __init__(self, run_id: str, path: Path | None = None, start_seq: int = 0) -> None:
        self.run_id = run_id
        self.seq = start_seq
        self.subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._file: IO[str] | None = _open_locked(path) if path else None

    def subscribe(self, fn: Subscriber) -> None:
        self.subscribers.append(fn)

    def emit(self, type_: str, **fields: Any) -> Event:
        with self._lock:
            self.seq += 1
            event: Event = {
                "seq": self.seq,
                "type": type_,
                "run_id": self.run_id,
                "time": round(time.time(), 3),
                **fields,
            }
            if self._file is not None:
                self._file.write(json.dumps(event, ensure_ascii=False) + "\n")
                self._file.flush()
        for fn in self.subscribers:
            fn(event)
        return event

    def close(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the lock
            self._file = None


def _open_locked(path: Path) -> IO[str]:
    """events.jsonl opened for appending, locked, and without a torn last line (a writer
    killed mid-line): its next event must start a line of its own."""
    f = path.open("a+b")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise RunBusy(
            f"another process is writing this run ({path.parent}); wait for it to end, "
            "or stop it first"
        ) from None
    size = f.seek(0, os.SEEK_END)
    if size:
        f.seek(0)
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end < size:
            f.truncate(end)
    return io.TextIOWrapper(f, encoding="utf-8", newline="")


def is_live(path: Path) -> bool:
    """Whether a process (this one included) is writing the run of this events.jsonl."""
    try:
        f = path.open("rb")
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


class EventReader:
    """Reads an events.jsonl as it grows: each call to `new()` gives the complete lines
    written since the last call (a line still being written waits for its newline)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> Iterator[Event]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a torn line a killed writer left: never an event
            if isinstance(event, dict) and isinstance(event.get("seq"), int):
                yield event


def read_events(path: Path) -> list[Event]:
    """Every complete event of an events.jsonl."""
    return list(EventReader(path).new())


def last_seq(path: Path) -> int:
    """The highest seq in an events.jsonl (0 if none); a torn last line is ignored."""
    return max((e["seq"] for e in read_events(path)), default=0)
