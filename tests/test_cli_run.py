"""`gen run` and `gen generate` as processes on the bundled SmolLM2: what reaches stdout and
stderr, and signals (SIGTERM is handled like Ctrl-C)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.real_model

GEN = Path(sys.executable).parent / "gen"

# `second` waits for `first` and cannot end before 1,500 tokens (over a minute on a CPU):
# once it has started, the run is certainly still going.
SLOW = """\
name: slow
defaults: {max_rounds: 1, seed: 7}
sections:
  - {id: first, prompt: 用一句话介绍茶。, max_tokens: 6}
  - id: second
    prompt: 写一篇关于茶的长文章。
    depends_on: [first]
    max_tokens: 2000
    min_tokens: 1500
"""


@pytest.mark.parametrize(
    ("stop", "code", "word"),
    [
        (signal.SIGTERM, 143, "terminated"),
        (signal.SIGINT, 130, "interrupted"),
        ("close", 141, "stdout closed"),  # `gen run ... --events - | head -3`
    ],
)
def test_a_signal_or_closed_stdout_cancels_the_run_and_keeps_finished_sections(
    tmp_path: Path, stop: signal.Signals | str, code: int, word: str
) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text(SLOW, encoding="utf-8")
    cmd = [str(GEN), "run", str(path), "--out", str(tmp_path / "out"), "--events", "-"]
    # a background job (CI, `make test &`) inherits SIGINT ignored, and then Python leaves
    # it ignored: give the child the default, as a terminal would
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    lines: list[bytes] = []
    try:
        for line in proc.stdout:  # one event a line, flushed as it happens
            lines.append(line)
            event = json.loads(line)
            if event["type"] == "section_started" and event["section"] == "second":
                break  # `first` is done, `second` under way
        if stop == "close":
            proc.stdout.close()
            proc.stdout = None  # nothing more is read from it
        else:
            proc.send_signal(stop)
        # a closed stdout is seen at the next event written (the first delta, sentences
        # into the second section): on a loaded machine that can take minutes
        rest, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
    lines += (rest or b"").splitlines()
    stderr = err.decode("utf-8")
    assert proc.returncode == code, stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in lines]
    if stop != "close":
        last = events[-1]
        assert (last["type"], last["status"], last["document"]) == (
            "run_finished",
            "cancelled",
            None,
        )
    (manifest_path,) = (tmp_path / "out" / "slow").glob("*/manifest.json")
    manifest = json.loads(manifest_path.read_text("utf-8"))
    assert manifest["status"] == "cancelled"
    assert {s["id"]: s["status"] for s in manifest["sections"]} == {
        "first": "completed",
        "second": "cancelled",
    }
    run_dir = manifest_path.parent
    assert [p.name for p in (run_dir / "sections").iterdir()] == ["first.md"]
    assert not (run_dir / "document.md").exists()
    assert f"{word}: finished sections are kept; `gen run {path} --resume` continues" in stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr


# A titled document with a hidden section between two shown ones, in Chinese.
STREAMED = """\
name: zh_stream
document: {title: "茶 🍵 指南"}
defaults: {temperature: 0, max_rounds: 1, max_tokens: 24}
sections:
  - {id: intro, title: 引言 🌏, prompt: 用中文介绍茶。}
  - {id: notes, hidden: true, prompt: 用中文写一个关于茶的词。}
  - {id: history, prompt: 用中文写茶的历史。}
"""


def test_stream_redirected_is_the_document(tmp_path: Path) -> None:
    path = tmp_path / "zh.yaml"
    path.write_text(STREAMED, encoding="utf-8")
    cmd = [str(GEN), "run", str(path), "--out", str(tmp_path / "out"), "--stream"]
    proc = subprocess.run(cmd, capture_output=True, timeout=240, check=False)
    stderr = proc.stderr.decode("utf-8")
    assert proc.returncode == 0, stderr
    document = Path(stderr.splitlines()[-1])  # `> doc.md` keeps only the document
    assert document.name == "document.md"
    assert proc.stdout == document.read_bytes()
    assert proc.stdout.decode("utf-8").startswith("# 茶 🍵 指南\n\n## 引言 🌏\n\n")
    notes = (document.parent / "sections" / "notes.md").read_text("utf-8").strip()
    assert notes and notes not in proc.stdout.decode("utf-8")


SUMMARY = re.compile(
    r"finish_reason: (stop|length)(, stop_reason: (\"[^\"]*\"|token \d+))?, "
    r"\d+ prompt \+ \d+ completion tokens"
)


def test_generate_from_stdin_ends_its_text_with_a_newline(tmp_path: Path) -> None:
    cmd = [str(GEN), "generate", "-", "--max-tokens", "8", "--temperature", "0"]
    proc = subprocess.run(
        cmd,
        input="用中文说早上好 🌅\n".encode(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # as on a terminal: the summary must start on its own line
        timeout=240,
        check=False,
    )
    combined = proc.stdout.decode("utf-8")
    assert proc.returncode == 0, combined
    *_, text, summary = combined.rstrip("\n").rsplit("\n", 2)
    assert text.strip()
    assert SUMMARY.fullmatch(summary), summary
    assert "None" not in summary and "'" not in summary


def test_generate_into_a_closed_pipe_stops_quietly() -> None:
    cmd = [str(GEN), "generate", "写一个很长的故事。", "--max-tokens", "200", "--min-tokens", "200"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        assert proc.stdout.read(1)  # `| head -c 1`
        proc.stdout.close()
        proc.stdout = None  # nothing more is read from it
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    stderr = err.decode("utf-8")
    assert proc.returncode == 141, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
