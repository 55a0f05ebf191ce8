"""Crash safety with the bundled model: `gen run` and `gen batch` killed with SIGKILL at
random points (a seeded choice of how many events to let through) always resume to a
complete document whose finished sections are byte-identical to before; no half-written
file is left, and a torn last line in events.jsonl (a kill mid-write) is no event. A batch
record that had completed before the kill is left as it was (its manifest still says what
its one run did); test_kill_points.py tries every kill point with a scripted backend.

GEN_CRASH_SEEDS sets how many kill points each test tries (1 in `make test`; `make soak`
tries 8)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.soak import record

pytestmark = pytest.mark.real_model

GEN = Path(sys.executable).parent / "gen"
SEEDS = range(int(os.environ.get("GEN_CRASH_SEEDS", "1")))
TIMEOUT = 300  # a guard against a hang, not a timing check

PIPELINE = """
name: crash
defaults: {max_tokens: 24, max_rounds: 2, temperature: 0.7, seed: 3}
inputs: {topic: 茶}
sections:
  - {id: first, prompt: "Write one sentence about {{ topic }} 🍵."}
  - {id: second, prompt: "Write one sentence about water and {{ topic }}."}
  - {id: third, prompt: "用一句话介绍{{ topic }}。", depends_on: [first]}
  - {id: fourth, prompt: "Write one sentence about cups.", depends_on: [second]}
"""
RECORDS = "id,topic\nthai,ชาไทย\nzh,绿茶\nmint,mint 🌿\n"


def events_in(out: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in out.rglob("events.jsonl") if p.is_file())


def kill_after(cmd: list[str], out: Path, events: int, log: Path) -> int:
    """Start `cmd`, SIGKILL it once `events` events are on disk (or when it ends); returns
    its exit status."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            if events_in(out) >= events:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait(timeout=30)
    return proc.returncode


def finished_sections(run_dir: Path) -> dict[str, bytes]:
    """The section files of the sections the manifest calls completed."""
    manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    done = {s["id"] for s in manifest["sections"] if s["status"] == "completed"}
    files = {p.stem: p.read_bytes() for p in (run_dir / "sections").glob("*.md")}
    assert set(files) <= done | set(files)  # (a file is only written once it is whole)
    return {k: v for k, v in files.items() if k in done}


def no_temp_files(out: Path) -> None:
    """After a resume: a kill mid-write leaves the write's temporary file (never a half
    target file); the resumed run clears it."""
    leftovers = [str(p) for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def whole_files(out: Path) -> None:
    """After a kill: every file in place is whole (JSON files parse)."""
    for path in out.rglob("*.json"):
        if not path.name.endswith(".tmp"):
            json.loads(path.read_text("utf-8"))


def files_of(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}


def tear_last_line(run_dir: Path) -> None:
    """What a kill in the middle of a write leaves: half a JSON line at the end."""
    with (run_dir / "events.jsonl").open("ab") as f:
        f.write(b'{"seq": 99999, "type": "delta", "text": "\xe8\x8c')


def check_resumed(run_dir: Path, before: dict[str, bytes]) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    assert manifest["status"] == "completed", manifest
    document = (run_dir / "document.md").read_text("utf-8")
    cached = {s["id"]: s["cached"] for s in manifest["sections"]}
    for key, data in before.items():
        assert (run_dir / "sections" / f"{key}.md").read_bytes() == data  # byte-identical
        assert data.decode("utf-8").strip() in document
        assert cached[key] is True  # taken as it was, not generated again
    assert not any(cached[key] for key in set(cached) - set(before))
    lines = (run_dir / "events.jsonl").read_text("utf-8", "replace").splitlines()
    events = [json.loads(line) for line in lines if line.endswith("}")]
    seqs = [e["seq"] for e in events]
    assert 99999 not in seqs and seqs == sorted(seqs)  # the torn line is no event
    deltas = {}
    for e in events:
        if e["type"] == "section_started":
            deltas[e["section"]] = ""
        elif e["type"] == "delta":
            deltas[e["section"]] += e["text"]
    for key in {s["id"] for s in manifest["sections"]} - set(before):
        text = (run_dir / "sections" / f"{key}.md").read_text("utf-8")
        assert deltas[key] == text  # the resumed run's deltas add up to its sections


@pytest.mark.parametrize("seed", SEEDS)
def test_a_killed_run_resumes_to_the_same_finished_sections(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "crash.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    out = tmp_path / "out"
    cmd = [str(GEN), "run", str(path), "--out", str(out)]
    # a run writes about 27 events: kill it somewhere in the first 20
    at = random.Random(seed).randint(3, 20)
    status = kill_after(cmd, out, at, tmp_path / "killed.log")
    assert status == -signal.SIGKILL, (tmp_path / "killed.log").read_text("utf-8", "replace")
    record("crashes injected")
    (run_dir,) = (out / "crash").iterdir()
    whole_files(out)
    killed = json.loads((run_dir / "manifest.json").read_text("utf-8"))
    assert killed["status"] == "running"  # it never got to say otherwise
    assert not (run_dir / "document.md").exists()
    before = finished_sections(run_dir)
    tear_last_line(run_dir)
    resumed = subprocess.run(
        [*cmd, "--resume"], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    check_resumed(run_dir, before)
    no_temp_files(out)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_killed_batch_resumes_every_record(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "crash.yaml"
    path.write_text(PIPELINE, encoding="utf-8")
    records = tmp_path / "teas.csv"
    records.write_text(RECORDS, encoding="utf-8")
    out = tmp_path / "out"
    cmd = [str(GEN), "batch", str(path), "--inputs", str(records), "--key", "id"]
    cmd += ["--out", str(out), "--concurrency", "2"]
    at = random.Random(100 + seed).randint(5, 60)  # of about 80 events in all
    status = kill_after(cmd, out, at, tmp_path / "killed.log")
    assert status == -signal.SIGKILL, (tmp_path / "killed.log").read_text("utf-8", "replace")
    record("crashes injected")
    whole_files(out)
    batch = out / "crash" / "teas"
    befores, whole = {}, {}
    for run_dir in (p for p in batch.iterdir() if (p / "manifest.json").is_file()):
        if json.loads((run_dir / "manifest.json").read_text("utf-8"))["status"] == "completed":
            whole[run_dir.name] = files_of(run_dir)  # it finished before the kill
            continue
        befores[run_dir.name] = finished_sections(run_dir)
        tear_last_line(run_dir)
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert again.returncode == 0, again.stderr
    report = json.loads((batch / "batch.json").read_text("utf-8"))
    assert {r["key"] for r in report["records"]} == {"thai", "zh", "mint"}
    assert all(r["status"] == "completed" for r in report["records"]), report
    reused = {r["key"] for r in report["records"] if r["reused"]}
    assert reused == set(whole)
    for key, files in whole.items():  # a finished record is not touched: its first run's files
        assert files_of(batch / key) == files
    for key, before in befores.items():
        check_resumed(batch / key, before)
    no_temp_files(out)
