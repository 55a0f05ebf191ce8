"""Running a batch file through gen serve's app in process, on a served model without a
model (tests/server/fakes.py): OpenAI's batch format, gen serve's bodies, the errors file,
the bound on requests in flight, and a resumed batch that runs only what is left."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import openai.types
import openai.types.chat
import pytest

from gen.errors import BackendError, ConfigError
from gen.sampling import SamplingParams
from gen.server.app import create_app
from gen.server.batch import OpenAIBatch, body_problem, local_client, read_requests
from tests.server.fakes import REPLY, FakeServed, FakeStream


def request(custom_id: str, content: str = "海", **body: Any) -> dict[str, Any]:
    chat = {"model": "fake", "messages": [{"role": "user", "content": content}], **body}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": chat}


def completion(custom_id: str, prompt: str) -> dict[str, Any]:
    body = {"model": "fake", "prompt": prompt, "max_tokens": 3}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/completions", "body": body}


def write(tmp_path: Path, lines: list[dict[str, Any] | str]) -> Path:
    path = tmp_path / "requests.jsonl"
    text = [x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


def entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def run(path: Path, backend: FakeServed, concurrency: int = 4) -> OpenAIBatch:
    output, errors = path.with_name("out.jsonl"), path.with_name("out.errors.jsonl")
    batch = OpenAIBatch(read_requests(path), path, output, errors)
    todo = batch.remaining()
    batch.start()

    async def go() -> None:
        async with local_client(backend) as client:
            await batch.run(client, todo, concurrency, lambda r, e: None)

    asyncio.run(go())
    batch.finish()
    return batch


def test_answers_are_gen_serves_bodies_in_openais_batch_format(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            request("zh", "你好 🙂", max_tokens=4),
            completion("text", "The sea 🌊"),
            '{"custom_id": "cut", ',
            request("streamed", stream=True),
            request("other-model", model="gpt-4o-mini"),
        ],
    )
    backend = FakeServed()
    batch = run(path, backend)
    out, errors = entries(batch.output.path), entries(batch.errors.path)
    assert [e["custom_id"] for e in out] == ["zh", "text"]
    chat = openai.types.chat.ChatCompletion.model_validate(out[0]["response"]["body"])
    assert chat.choices[0].message.content == REPLY[:4] and chat.model == "fake"
    text = openai.types.Completion.model_validate(out[1]["response"]["body"])
    assert text.choices[0].text == REPLY[:3] and text.usage is not None
    for e in out:
        assert e["id"].startswith("batch_req_") and e["error"] is None
        assert e["response"]["status_code"] == 200
    assert [(e["custom_id"], e["response"] and e["response"]["status_code"]) for e in errors] == [
        (None, None),
        ("streamed", 400),
        ("other-model", 404),
    ]
    assert errors[0]["error"]["code"] == "invalid_json_line" and errors[0]["error"]["line"] == 3
    assert errors[1]["response"]["body"]["error"]["param"] == "stream"
    assert errors[2]["response"]["body"]["error"]["code"] == "model_not_found"
    assert len(backend.streams) == 2  # the refused ones reached no engine

    # the same body sent to gen serve's app over HTTP gets the same answer
    async def served(body: dict[str, Any]) -> dict[str, Any]:
        transport = httpx.ASGITransport(app=create_app(FakeServed()))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return dict((await client.post("/v1/chat/completions", json=body)).json())

    direct = asyncio.run(served(read_requests(path)[0].body))
    assert without_ids(out[0]["response"]["body"]) == without_ids(direct)


def without_ids(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in ("id", "created")}


class Failing(FakeServed):
    """A model whose generation fails for prompts that hold `marker`."""

    marker = "boom"

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> FakeStream:
        if self.marker.encode() in bytes(prompt_ids):
            raise BackendError("generation failed: the engine stopped")
        return await super().generate(prompt_ids, params)


def test_a_resumed_batch_runs_only_what_the_output_lacks(tmp_path: Path) -> None:
    path = write(tmp_path, [request(f"r{i}", f"第{i}题", max_tokens=2) for i in range(6)])
    first = run(path, FakeServed())
    lines = first.output.path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 6
    # killed after two lines, in the middle of writing a third
    first.output.path.write_bytes(b"".join(lines[:2]) + lines[2][:30])
    stale = tmp_path / f".{first.output.path.name}.x1y2.tmp"  # a kill inside the final sort
    stale.write_bytes(b"".join(lines))

    again = FakeServed()
    resumed = run(path, again)
    assert len(again.streams) == 4 and resumed.kept == 2
    final = resumed.output.path.read_bytes().splitlines(keepends=True)
    assert final[:2] == lines[:2]  # not regenerated: the same ids, times and bytes
    assert [json.loads(x)["custom_id"] for x in final] == [f"r{i}" for i in range(6)]
    assert not resumed.errors.path.exists() and not stale.exists()


def test_failed_requests_go_to_the_errors_file_and_run_again(tmp_path: Path) -> None:
    path = write(tmp_path, [request("ok"), request("bad", "boom"), request("ok2")])
    batch = run(path, Failing())
    assert [e["custom_id"] for e in entries(batch.output.path)] == ["ok", "ok2"]
    (failed,) = entries(batch.errors.path)
    assert failed["custom_id"] == "bad" and failed["response"]["status_code"] == 500
    assert failed["response"]["body"]["error"]["code"] == "generation_failed"

    again = FakeServed()
    batch = run(path, again)
    assert len(again.streams) == 1  # only the failed one
    assert [e["custom_id"] for e in entries(batch.output.path)] == ["ok", "bad", "ok2"]
    assert not batch.errors.path.exists()


def test_concurrency_bounds_the_requests_in_flight(tmp_path: Path) -> None:
    path = write(tmp_path, [request(f"r{i}") for i in range(5)])
    batch = OpenAIBatch(read_requests(path), path, tmp_path / "o.jsonl", tmp_path / "e.jsonl")
    todo = batch.remaining()
    batch.start()

    async def go() -> list[int]:
        backend = FakeServed(gate=asyncio.Event())
        seen = []
        async with local_client(backend) as client:
            task = asyncio.ensure_future(batch.run(client, todo, 2, lambda r, e: None))
            for _ in range(50):
                await asyncio.sleep(0.01)
                seen.append(len(backend.streams))
            assert backend.gate is not None
            backend.gate.set()
            await task
        return seen

    seen = asyncio.run(go())
    assert max(seen) == 2 and seen[-1] == 2
    assert len(entries(tmp_path / "o.jsonl")) == 5


def test_an_output_file_of_another_batch_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, [request("a")])
    output = tmp_path / "out.jsonl"
    output.write_text('{"id": "batch_req_1", "custom_id": "zzz", "response": null}\n', "utf-8")
    batch = OpenAIBatch(read_requests(path), path, output, tmp_path / "e.jsonl")
    with pytest.raises(ConfigError, match=r"out.jsonl:1: custom_id 'zzz' is no request of"):
        batch.remaining()


def test_a_dry_run_names_what_a_body_gets_wrong_without_a_model(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            request("fine"),
            request("streamed", stream=True),
            request("no-messages", messages=[]),
            {**request("text"), "body": "hello"},
        ],
    )
    problems = [body_problem(r) for r in read_requests(path)]
    assert problems[0] is None
    assert problems[1] == "400 stream: a batch answers each request whole; leave stream out "\
        "or set it to false"  # fmt: skip
    assert problems[2] is not None and problems[2].startswith("400 messages: ")
    assert problems[3] == "400 the body must be a JSON object, got a string"
