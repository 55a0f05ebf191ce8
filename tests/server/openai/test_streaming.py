"""Raw Server-Sent Events from a real `gen serve`: the exact chunk order, an error mid-stream
(injected with the test hook GEN_SERVE_FAULT), 16 concurrent streams equal to their solo
outputs, and a client that goes away freeing its sequence (seen through /metrics)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import MODEL, Server, running_server, wait_until

pytestmark = pytest.mark.real_model

FAULT = "inject-a-fault"  # a request whose `user` is this fails after two deltas


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server(env={"GEN_SERVE_FAULT": FAULT}) as s:
        yield s


def body(**kwargs: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "写一句关于春天的话。"}],
        "temperature": 0,
        **kwargs,
    }


def sse(server: Server, path: str, payload: dict[str, Any]) -> tuple[int, str, list[str]]:
    """Status, content type, and each event's data, read from the raw bytes."""
    with httpx.stream("POST", f"{server.v1}{path}", json=payload, timeout=300) as r:
        raw = r.read().decode("utf-8")
        status, ctype = r.status_code, r.headers["content-type"]
    assert "\r" not in raw and raw.endswith("\n\n")  # "data: …\n\n", as OpenAI frames it
    events = [e for e in raw.split("\n\n") if e]
    data = []
    for event in events:
        lines = [ln for ln in event.split("\n") if not ln.startswith(":")]  # pings
        if lines:
            assert all(ln.startswith("data: ") for ln in lines), event
            data.append("\n".join(ln[len("data: ") :] for ln in lines))
    return status, ctype, data


def test_chat_chunks_come_in_openai_order(server: Server) -> None:
    status, ctype, data = sse(
        server,
        "/chat/completions",
        body(max_tokens=12, stream=True, stream_options={"include_usage": True}),
    )
    assert status == 200 and ctype.startswith("text/event-stream")
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    first, *content, finish, usage = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert first["choices"][0]["finish_reason"] is None
    assert content and all(
        set(c["choices"][0]["delta"]) == {"content"} and c["choices"][0]["finish_reason"] is None
        for c in content
    )
    assert finish["choices"][0]["finish_reason"] == "length"
    assert finish["choices"][0]["delta"] == {}
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 12
    assert usage["usage"]["prompt_tokens_details"]["cached_tokens"] >= 0


def test_text_completion_chunks_end_the_same_way(server: Server) -> None:
    payload = {
        "model": MODEL,
        "prompt": "春天来了，",
        "max_tokens": 5,
        "temperature": 0,
        "stream": True,
    }
    status, _, data = sse(server, "/completions", payload)
    assert status == 200 and data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert reasons[-1] == "length" and reasons.count(None) == len(reasons) - 1
    assert all(c["object"] == "text_completion" and c["usage"] is None for c in chunks)


def test_an_error_mid_stream_is_an_error_event_then_done(server: Server) -> None:
    payload = body(max_tokens=64, min_tokens=64, stream=True, user=FAULT)
    status, _, data = sse(server, "/chat/completions", payload)
    assert status == 200  # the status line went out before the failure
    assert data[-1] == "[DONE]"
    *chunks, error = [json.loads(d) for d in data[:-1]]
    assert set(error) == {"error"}
    assert set(error["error"]) == {"message", "type", "param", "code"}
    assert "injected fault" in error["error"]["message"]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len(chunks) == 3 and all(c["choices"][0]["finish_reason"] is None for c in chunks)
    # without streaming the same failure is a 500 with an OpenAI-shaped body
    r = httpx.post(
        f"{server.v1}/chat/completions",
        json=body(user=FAULT, min_tokens=64, max_tokens=64),
        timeout=300,
    )
    assert r.status_code == 500 and "injected fault" in r.json()["error"]["message"]
    # and the server goes on serving
    ok = httpx.post(f"{server.v1}/chat/completions", json=body(max_tokens=2), timeout=300)
    assert ok.status_code == 200


PROMPTS = [
    "Name a colour.",
    "Count to five.",
    "Say hello in French.",
    "What is 2 + 2?",
    "Name a fruit.",
    "用中文说你好。",
    "Write one word about the sea.",
    "Name a planet.",
    "What colour is the sky?",
    "Give me a number.",
    "写一个关于猫的词。",
    "Name an animal 🐶.",
    "Spell 'cat'.",
    "Name a month.",
    "Say goodbye.",
    "What is the capital of France?",
]


async def stream_text(client: httpx.AsyncClient, prompt: str) -> tuple[str, str]:
    payload = body(messages=[{"role": "user", "content": prompt}], max_tokens=20, stream=True)
    text, finish = "", ""
    async with client.stream("POST", "/chat/completions", json=payload) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = json.loads(line[6:])["choices"][0]
            text += choice["delta"].get("content") or ""
            finish = choice["finish_reason"] or finish
    return text, finish


def test_sixteen_concurrent_streams_equal_their_solo_outputs(server: Server) -> None:
    solo = []
    for prompt in PROMPTS:
        r = httpx.post(
            f"{server.v1}/chat/completions",
            json=body(messages=[{"role": "user", "content": prompt}], max_tokens=20),
            timeout=300,
        )
        solo.append(r.json()["choices"][0]["message"]["content"])

    async def together() -> list[tuple[str, str]]:
        async with httpx.AsyncClient(base_url=server.v1, timeout=300) as client:
            return await asyncio.gather(*(stream_text(client, p) for p in PROMPTS))

    results = asyncio.run(together())
    assert all(finish in ("stop", "length") for _, finish in results)
    assert [text for text, _ in results] == solo


def running(server: Server) -> float:
    return server.metrics()["gen_requests_running"]


def test_a_client_that_goes_away_frees_its_sequence(server: Server) -> None:
    wait_until(lambda: running(server) == 0, "the server is idle")
    aborted = server.metrics().get(
        'gen_requests_total{finish_reason="abort",model="' + MODEL + '"}', 0
    )
    long = body(max_tokens=4000, ignore_eos=True, stream=True)
    with httpx.stream("POST", f"{server.v1}/chat/completions", json=long, timeout=300) as r:
        lines = r.iter_lines()  # held: a dropped iterator closes the connection
        for line in lines:
            if '"content":"' in line and '"role"' not in line:
                break  # it is generating
        m = server.metrics()
        assert m["gen_requests_running"] == 1 and m["gen_kv_cache_used_bytes"] > 0, m
    # the stream is closed: the engine drops the sequence and its KV memory
    wait_until(lambda: running(server) == 0, "the aborted stream stops running")
    m = server.metrics()
    assert m["gen_kv_cache_used_bytes"] == 0 and m["gen_http_requests_in_flight"] == 0
    assert m['gen_requests_total{finish_reason="abort",model="' + MODEL + '"}'] == aborted + 1

    # the same without streaming: a raw socket closed while the answer is being generated
    payload = json.dumps(body(max_tokens=4000, ignore_eos=True)).encode()
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )
        wait_until(lambda: running(server) == 1, "the request runs")
    wait_until(lambda: running(server) == 0, "the abandoned request stops running")
    assert server.metrics()["gen_kv_cache_used_bytes"] == 0
