"""events.jsonl: one writer at a time (a lock readers can see), a torn last line left by a
killed writer dropped before the next event, and a reader that follows the file as it grows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gen.pipeline.run.events import EventLog, EventReader, RunBusy, is_live, last_seq


def test_the_writer_holds_a_lock_that_readers_see(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog("r1", path)
    log.emit("run_started")
    assert is_live(path)
    with pytest.raises(RunBusy, match="another process is writing"):
        EventLog("r1", path, start_seq=1)
    log.close()
    assert not is_live(path)
    EventLog("r1", path, start_seq=1).close()  # free again


def test_a_killed_writer_leaves_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    code = (
        "import os, sys; from pathlib import Path; from gen.pipeline.run.events import EventLog;"
        f"log = EventLog('r', Path({str(path)!r})); log.emit('run_started'); "
        "sys.stdout.write('ready\\n'); sys.stdout.flush(); os.kill(os.getpid(), 9)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout == "ready\n" and proc.returncode == -9
    assert not is_live(path)
    assert last_seq(path) == 1


def test_a_torn_last_line_is_dropped_before_the_next_event(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first = {"seq": 1, "type": "delta", "run_id": "r", "text": "水😀"}
    torn = json.dumps({"seq": 2, "type": "delta", "text": "ไทย"}, ensure_ascii=False)
    path.write_bytes((json.dumps(first, ensure_ascii=False) + "\n" + torn).encode()[:-7])
    assert last_seq(path) == 1
    log = EventLog("r", path, start_seq=last_seq(path))
    log.emit("delta", text="续")
    log.close()
    lines = path.read_text("utf-8").splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [1, 2]
    assert json.loads(lines[1])["text"] == "续"


def test_the_reader_gives_each_complete_line_once(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    reader = EventReader(path)
    assert list(reader.new()) == []  # no file yet
    with path.open("w", encoding="utf-8") as f:
        f.write('{"seq": 1, "type": "a"}\n{"seq": 2, "ty')
        f.flush()
        assert [e["seq"] for e in reader.new()] == [1]
        f.write('pe": "b"}\n')
        f.flush()
        assert [e["seq"] for e in reader.new()] == [2]
        assert list(reader.new()) == []
