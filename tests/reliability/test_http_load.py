"""Limits under load, against a real `gen serve` on loopback: 64 concurrent streaming chat
requests (half of them walking away mid-stream) on a server that decodes 4 and admits 8.
Each answer is a whole, well-formed stream or a 429 with Retry-After (never an unbounded
wait, never a 5xx); afterwards the engine is idle, holds no KV memory, and answers again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.reliability.soak import record
from tests.server.conftest import MODEL, Server, running_server, wait_until

pytestmark = pytest.mark.real_model

CLIENTS = 64
MAX_QUEUE = 8
MAX_TOKENS = 8
LEAVE_EVERY = 2  # every other client goes away after its first piece of text
TIMEOUT = 120  # per request: a guard against a hang
BODY = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Tell me about tea."}],
    "max_tokens": MAX_TOKENS,
    "ignore_eos": True,  # each admitted request holds its place for all its tokens
    "temperature": 0,
    "stream": True,
    "stream_options": {"include_usage": True},
}


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)  # the data: payloads
    body: str = ""
    left: bool = False  # the client went away mid-stream


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    args = ["--max-model-len", "128", "--max-slots", "4", "--max-queue", str(MAX_QUEUE)]
    with running_server(*args) as s:
        yield s


async def _client(http: httpx.AsyncClient, n: int) -> Answer:
    async with http.stream("POST", "/v1/chat/completions", json=BODY) as r:
        answer = Answer(r.status_code, dict(r.headers))
        if r.status_code != 200:
            answer.body = (await r.aread()).decode()
            return answer
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                answer.events.append(line.removeprefix("data: "))
            if n % LEAVE_EVERY == 0 and '"content":"' in line and '"role"' not in line:
                answer.left = True
                return answer  # the connection closes: the server must drop the sequence
        return answer


async def _flood(url: str) -> list[Answer]:
    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT, limits=limits) as http:
        return await asyncio.gather(*(_client(http, n) for n in range(CLIENTS)))


def assert_whole_stream(events: list[str]) -> None:
    """OpenAI's order: the role, text, exactly one finish_reason, usage, [DONE]."""
    assert events[-1] == "[DONE]", events
    chunks = [json.loads(e) for e in events[:-1]]
    assert all("error" not in c for c in chunks), chunks
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert [f for f in finishes if f is not None] == ["length"], finishes
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == MAX_TOKENS
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text.strip(), chunks


def engine_idle(server: Server) -> bool:
    """Nothing in flight: no request admitted, running or waiting, no KV memory held."""
    m = server.metrics()
    return (
        m["gen_http_requests_in_flight"] == 0
        and m["gen_requests_running"] == 0
        and m["gen_requests_waiting"] == 0
        and m["gen_kv_cache_used_bytes"] == 0
    )


def assert_busy(answer: Answer) -> None:
    assert int(answer.headers["retry-after"]) >= 1, answer.headers
    error = json.loads(answer.body)["error"]
    assert error["code"] == "queue_full" and error["type"] == "rate_limit_error", error
    assert "--max-queue" in error["message"]


def test_past_the_queue_a_429_and_afterwards_idle(server: Server) -> None:
    rejected_before = server.metrics().get("gen_requests_rejected_total", 0)
    answers = asyncio.run(asyncio.wait_for(_flood(server.url), timeout=5 * TIMEOUT))
    record("requests served", len(answers))

    statuses = sorted({a.status for a in answers})
    assert set(statuses) <= {200, 429}, [(a.status, a.body[:300]) for a in answers]
    served = [a for a in answers if a.status == 200]
    busy = [a for a in answers if a.status == 429]
    assert len(served) >= MAX_QUEUE and busy, statuses  # the first 8 are admitted; the cap bit
    for answer in served:
        if not answer.left:
            assert_whole_stream(answer.events)
    for answer in busy:
        assert_busy(answer)

    wait_until(lambda: engine_idle(server), "the engine is idle after the flood")
    m = server.metrics()
    assert m["gen_requests_rejected_total"] - rejected_before == len(busy)
    assert sum(a.left for a in served) >= 1  # some walked away mid-stream, and were dropped

    # and it answers again
    whole = {k: v for k, v in BODY.items() if k != "stream_options"} | {"stream": False}
    again = httpx.post(f"{server.v1}/chat/completions", json=whole, timeout=TIMEOUT)
    assert again.status_code == 200, again.text
    assert again.json()["usage"]["completion_tokens"] == MAX_TOKENS
