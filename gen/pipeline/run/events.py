"""The run's event stream (DESIGN.md §5): numbered events, written to events.jsonl and
handed to every subscriber (progress display, --events, SSE)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

Event = dict[str, Any]
Subscriber = Callable[[Event], None]


class EventLog:
    def __init__(self, run_id: str, path: Path | None = None, start_seq: int = 0) -> None:
        self.run_id = run_id
        self.seq = start_seq
        self.subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._file: IO[str] | None = path.open("a", encoding="utf-8") if path else None

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
            self._file.close()
            self._file = None


def last_seq(path: Path) -> int:
    """The highest seq in an events.jsonl (0 if none); a torn last line is ignored."""
    if not path.is_file():
        return 0
    seq = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            seq = max(seq, int(json.loads(line)["seq"]))
        except (ValueError, KeyError, TypeError):
            continue
    return seq
