"""The run's event stream (docs/design.md §5): numbered events, written to events.jsonl and
handed to every subscriber (progress display, --events, SSE).

The process writing a run holds an exclusive lock on its events.jsonl for as long as the
run goes on, so a reader (`gen serve`) can tell a live run from one whose writer died."""

from __future__ import annotations

import fcntl
import io
import json
import os
import stat
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
        self._file: IO[str] | None = None
        if path is not None:
            self._file, last = _open_locked(path)
            self.seq = max(start_seq, last)  # read under the lock: no other writer in between

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


LOCK_PATIENCE_SECONDS = 2.0  # a reader's probe (is_live) holds the lock for an instant


def _open_locked(path: Path) -> tuple[IO[str], int]:
    """events.jsonl opened for appending, locked, and without a torn last line (a writer
    killed mid-line): its next event must start a line of its own. Also the last seq in it."""
    f = path.open("a+b")
    deadline = time.monotonic() + LOCK_PATIENCE_SECONDS
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            f.close()
            raise RunBusy(
                f"another process is writing this run ({path.parent}); wait for it to end, "
                "or stop it first"
            ) from None
    f.seek(0)
    data = f.read()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        f.truncate(end)
    last = max((e["seq"] for e in _parse(data[:end])), default=0)
    return io.TextIOWrapper(f, encoding="utf-8", newline=""), last


def _parse(data: bytes) -> Iterator[Event]:
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn line a killed writer left: never an event
        if isinstance(event, dict) and isinstance(event.get("seq"), int):
            yield event


def open_regular(path: Path) -> IO[bytes] | None:
    """`path` opened for reading if it is a regular file (never a FIFO, which would block,
    or a folder); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def is_live(path: Path) -> bool:
    """Whether a process (this one included) is writing the run of this events.jsonl."""
    f = open_regular(path)
    if f is None:
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
        f = open_regular(self.path)
        if f is None:
            return
        with f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        yield from _parse(data[:end])


def read_events(path: Path) -> list[Event]:
    """Every complete event of an events.jsonl."""
    return list(EventReader(path).new())


def last_seq(path: Path) -> int:
    """The highest seq in an events.jsonl (0 if none); a torn last line is ignored."""
    return max((e["seq"] for e in read_events(path)), default=0)


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, from /proc), None where unknown:
    with its pid it names one process, never a later one that reuses the number."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        return int(stat_line.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None
