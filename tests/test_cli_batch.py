"""`gen batch` as a user runs it, with the bundled model: 6 records from a CSV, one of them
broken, killed part way and run again; and `--dry-run`, which loads no model."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model

PIPELINE = """
name: notes
defaults: {max_tokens: 24, max_rounds: 2, temperature: 0.7, seed: 3}
inputs:
  topic: tea
  words: 30
sections:
  - id: body
    prompt: "Write about {{ words }} words on {{ topic }}."
    target_words: 30
"""
TOPICS = ["茶", "rain in ไทย", "the sea 🌊", "bread", "bicycles", "rivers"]
BROKEN = 4  # its `words` is no number


def gen(*args: str) -> list[str]:
    return [sys.executable, "-m", "gen.cli", *args]


def write_inputs(tmp_path: Path) -> tuple[Path, Path]:
    pipeline = tmp_path / "notes.yaml"
    pipeline.write_text(PIPELINE, encoding="utf-8")
    records = tmp_path / "topics.csv"
    with records.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "topic", "words"])
        for n, topic in enumerate(TOPICS, 1):
            writer.writerow([f"r{n:02d}", topic, "lots" if n == BROKEN else "30"])
    return pipeline, records


def ledger(folder: Path) -> dict[str, dict[str, object]]:
    path = folder / "batch.json"
    if not path.is_file():
        return {}
    return {r["key"]: r for r in json.loads(path.read_text("utf-8"))["records"]}


def snapshot(folder: Path) -> dict[Path, tuple[bytes, int]]:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def test_a_batch_killed_part_way_finishes_on_the_next_run(tmp_path: Path) -> None:
    pipeline, records = write_inputs(tmp_path)
    out = tmp_path / "out"
    command = gen("batch", str(pipeline), "--inputs", str(records), "--key", "id",
                  "--concurrency", "3", "--out", str(out))  # fmt: skip
    folder = out / "notes" / "topics"

    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600  # a guard against hanging, not a timing check
    while sum(r["status"] == "completed" for r in ledger(folder).values()) < 3:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "no three records finished"
        time.sleep(0.2)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    finished = [k for k, r in ledger(folder).items() if r["status"] == "completed"]
    kept = {k: snapshot(folder / k) for k in finished}

    second = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert second.returncode == 1, second.stderr  # the broken record failed
    assert second.stdout.strip().splitlines()[-1] == str(folder / "batch.json")
    results = ledger(folder)
    assert len(results) == len(TOPICS)
    broken = f"r{BROKEN:02d}"
    assert {k for k, r in results.items() if r["status"] != "completed"} == {broken}
    error = str(results[broken]["error"])
    assert error.startswith(f"{records}:{BROKEN + 1}: words=lots:"), error
    assert f"✗ {broken}: " in second.stderr
    for key in finished:  # not generated again: same bytes, same times
        assert results[key]["reused"] is True
        assert snapshot(folder / key) == kept[key]
    for n, topic in enumerate(TOPICS, 1):
        key = f"r{n:02d}"
        if key == broken:
            continue
        document = (folder / key / "document.md").read_text("utf-8")
        manifest = json.loads((folder / key / "manifest.json").read_text("utf-8"))
        assert manifest["status"] == "completed" and manifest["inputs"]["topic"] == topic
        assert len(document.split()) >= 10
    rows = list(csv.DictReader((folder / "batch.csv").open(encoding="utf-8")))
    assert [r["key"] for r in rows] == [f"r{n:02d}" for n in range(1, len(TOPICS) + 1)]
    assert all(r["words"] and r["tokens"] for r in rows if r["key"] != broken)


def test_dry_run_names_each_bad_record_by_line_and_loads_no_model(tmp_path: Path) -> None:
    pipeline, _ = write_inputs(tmp_path)
    records = tmp_path / "more.jsonl"
    records.write_text(
        '{"topic": "茶"}\n{"topik": "x"}\n{"words": "many"}\nnot json\n', encoding="utf-8"
    )
    env = {**os.environ, "GEN_HOME": str(tmp_path / "empty-home")}  # no converted model
    r = subprocess.run(
        gen("batch", str(pipeline), "--inputs", str(records), "--dry-run"),
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stdout.strip() == f"{records}: 1 of 4 records ok, 3 bad"
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"{records}:2: topik: unknown input; did you mean 'topic'?")
    assert any(line.startswith(f"{records}:3: words=many:") for line in lines)
    assert any(line.startswith(f"{records}:4: not JSON") for line in lines)
    assert "loading" not in r.stderr
    assert not (tmp_path / "empty-home").exists() or not any((tmp_path / "empty-home").iterdir())
