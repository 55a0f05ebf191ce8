"""`gen batch --openai` as a user runs it: where the answers go, the options it refuses,
`--dry-run` (no model), and with the bundled model a small file of chat and text requests
(Chinese, emoji, a broken line) whose answers are gen serve's own, and 50 requests killed
with SIGKILL part way and run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai.types
import openai.types.chat
import pytest

from gen.cli import main
from gen.cli.openai_batch import output_paths
from gen.errors import ConfigError
from tests.server.conftest import MODEL, Server, running_server


def chat(custom_id: str, content: str, max_tokens: int = 8) -> dict[str, Any]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def text(custom_id: str, prompt: str) -> dict[str, Any]:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 8, "temperature": 0}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/completions", "body": body}


def write(path: Path, lines: list[dict[str, Any] | str]) -> Path:
    rows = [x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def gen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gen.cli", *args]
    environ = {**os.environ, **(env or {})}
    return subprocess.run(command, capture_output=True, text=True, timeout=900, env=environ)


# -- without a model --------------------------------------------------------------------------


def test_answers_go_beside_the_input_unless_told(tmp_path: Path) -> None:
    requests = tmp_path / "reqs.jsonl"
    assert output_paths(requests, None) == (
        tmp_path / "reqs.output.jsonl",
        tmp_path / "reqs.errors.jsonl",
    )
    assert output_paths(requests, str(tmp_path / "answers.jsonl")) == (
        tmp_path / "answers.jsonl",
        tmp_path / "answers.errors.jsonl",
    )
    folder = tmp_path / "out"
    folder.mkdir()
    assert output_paths(requests, str(folder)) == (
        folder / "reqs.output.jsonl",
        folder / "reqs.errors.jsonl",
    )
    assert output_paths(requests, "new/") == (
        Path("new") / "reqs.output.jsonl",
        Path("new") / "reqs.errors.jsonl",
    )
    with pytest.raises(ConfigError, match="is the input file itself"):
        output_paths(requests, str(requests))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--key", "id"], "--key is for pipeline batches"),
        (["--set", "topic=tea"], "--set is for pipeline batches"),
        (["-c", "0"], "--concurrency must be at least 1, got 0"),
        (["-m", "nowhere/model.gguf"], "no such GGUF file"),
        (["-m", "openai:gpt-4o-mini"], "--model openai:gpt-4o-mini needs a server"),
    ],
)
def test_options_an_openai_batch_refuses(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    requests = write(tmp_path / "r.jsonl", [chat("a", "hi")])
    assert main(["batch", "--openai", str(requests), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.output.jsonl").exists()


def test_a_batch_needs_a_pipeline_or_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["batch"]) == 2
    assert "gen batch --openai FILE.jsonl" in capsys.readouterr().err


def test_a_file_that_is_no_batch_file_fails_where_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = tmp_path / "r.jsonl"
    requests.write_text('{"custom_id": "a", "method": "POST",\n  "url": "/v1/completions"}\n')
    assert main(["batch", "--openai", str(requests)]) == 2
    err = capsys.readouterr().err
    assert f"{requests}:1:37: not an OpenAI batch file: not valid JSON" in err
    assert "(nor is its other line a request)" in err
    assert "^" in err and "Traceback" not in err


def test_a_dry_run_checks_every_line_and_body_without_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = write(
        tmp_path / "r.jsonl",
        [chat("a", "你好"), "{oops", chat("b", "hi", max_tokens=0), chat("a", "again")],
    )
    output = tmp_path / "r.output.jsonl"
    torn = b'{"id": "batch_req_1", "custom_id": "a", "response": null}\n{"id": "batch_'
    output.write_bytes(torn)
    assert main(["batch", "--openai", str(requests), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out.strip() == f"{requests}: 1 of 4 requests ok, 3 bad, 1 answered already"
    assert f"{requests}:2: not valid JSON" in err
    assert f"{requests}:3: 400 max_tokens: Input should be greater than or equal to 1" in err
    assert f"{requests}:4: custom_id 'a' is already on line 1" in err
    assert output.read_bytes() == torn  # a dry run changes no file
    assert not (tmp_path / "r.errors.jsonl").exists()


# -- with the bundled model -------------------------------------------------------------------

MIXED = [
    chat("zh", "用中文说早上好 🌅"),
    text("sea", "The sea 🌊 is"),
    '{"custom_id": "broken", "method": "POST"',
    chat("emoji", "Reply with three emoji: 🍵🌧️"),
    text("zh-text", "从前有一座山，"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as s:
        yield s


def served(server: Server, line: dict[str, Any]) -> dict[str, Any]:
    """What gen serve answers to the line's body."""
    reply = httpx.post(f"{server.url}{line['url']}", json=line["body"], timeout=300)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def without_ids(body: dict[str, Any]) -> dict[str, Any]:
    """An answer less what differs from one asking to the next: its id and time, and how
    much of its prompt the server's prefix cache held (which depends on what came before)."""
    usage = {k: v for k, v in body["usage"].items() if k != "prompt_tokens_details"}
    return {k: v for k, v in body.items() if k not in ("id", "created")} | {"usage": usage}


@pytest.mark.real_model
def test_a_small_batch_answers_as_gen_serve_does(tmp_path: Path, server: Server) -> None:
    requests = write(tmp_path / "mixed.jsonl", MIXED)
    done = gen("batch", "--openai", str(requests))
    assert done.returncode == 1, done.stderr  # the broken line
    output = tmp_path / "mixed.output.jsonl"
    assert done.stdout.splitlines()[-1] == str(output)
    assert f"{requests}:3: not valid JSON" in done.stderr
    assert "4 of 5 requests answered; 1 failed" in done.stderr

    answers = entries(output)
    (broken,) = entries(tmp_path / "mixed.errors.jsonl")
    assert broken["custom_id"] is None and broken["error"]["line"] == 3
    assert [e["custom_id"] for e in answers] == ["zh", "sea", "emoji", "zh-text"]
    by_id = {line["custom_id"]: line for line in MIXED if isinstance(line, dict)}
    for entry in answers:
        assert entry["error"] is None and entry["response"]["status_code"] == 200
        body = entry["response"]["body"]
        if by_id[entry["custom_id"]]["url"] == "/v1/chat/completions":
            reply = openai.types.chat.ChatCompletion.model_validate(body)
            assert reply.choices[0].message.content
        else:
            completion = openai.types.Completion.model_validate(body)
            assert completion.choices[0].text
        assert "\ufffd" not in json.dumps(body, ensure_ascii=False)
        assert without_ids(body) == without_ids(served(server, by_id[entry["custom_id"]]))

    # the same file through gen serve as a remote server: the same answers
    remote = gen(
        "batch", "--openai", str(requests), "-m", f"openai:{MODEL}",
        "-o", str(tmp_path / "remote.jsonl"),
        env={"OPENAI_BASE_URL": server.v1, "OPENAI_API_KEY": "unused"},
    )  # fmt: skip
    assert remote.returncode == 1, remote.stderr
    there = entries(tmp_path / "remote.jsonl")
    assert [without_ids(e["response"]["body"]) for e in there] == [
        without_ids(e["response"]["body"]) for e in answers
    ]


@pytest.mark.real_model
def test_fifty_requests_killed_part_way_finish_on_the_next_run(tmp_path: Path) -> None:
    lines = [chat(f"q{i:02d}", f"第{i}个问题：name a colour 🎨", max_tokens=8) for i in range(50)]
    requests = write(tmp_path / "fifty.jsonl", lines)
    output = tmp_path / "fifty.output.jsonl"
    command = [sys.executable, "-m", "gen.cli", "batch", "--openai", str(requests), "-c", "8"]

    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600  # a guard against hanging, not a timing check
    while not output.exists() or output.read_bytes().count(b"\n") < 5:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "no five requests answered"
        time.sleep(0.1)
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    before = output.read_bytes()
    kept = before.splitlines(keepends=True)
    assert 5 <= len(kept) < 50, "the kill came after the batch finished"
    output.write_bytes(before + b'{"id": "batch_req_torn", "custom_id": "q4')  # a torn write

    second = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr
    assert f"{len(kept)} requests answered by an earlier run are kept" in second.stderr
    assert f"[{50 - len(kept)}/{50 - len(kept)}]" in second.stderr
    final = output.read_bytes().splitlines(keepends=True)
    ids = [json.loads(x)["custom_id"] for x in final]
    assert ids == [f"q{i:02d}" for i in range(50)]  # one line each, in the input's order
    assert all(line in final for line in kept)  # the lines written before the kill, unchanged
    assert not (tmp_path / "fifty.errors.jsonl").exists()
    for line in final:
        body = json.loads(line)["response"]["body"]
        assert openai.types.chat.ChatCompletion.model_validate(body).usage.completion_tokens <= 8
