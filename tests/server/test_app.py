"""The app in process over a fake model (no weights): errors before streaming are
OpenAI-shaped 4xx naming the parameter, the chunk order, an error mid-stream, the queue
limit, the body limit, the key and CORS."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from gen.server.app import create_app
from gen.server.config import ServerConfig
from gen.server.security import is_loopback
from tests.server.fakes import REPLY, FakeServed

Call = Callable[[httpx.AsyncClient], Awaitable[Any]]


def run(call: Call, backend: FakeServed | None = None, **config: Any) -> Any:
    app = create_app(backend or FakeServed(), ServerConfig(**config))

    async def go() -> Any:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await call(client)

    return asyncio.run(go())


def post(path: str, body: Any, **kwargs: Any) -> httpx.Response:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post(path, json=body, **kwargs)

    result: httpx.Response = run(call)
    return result


JSON = {"Content-Type": "application/json"}


def chat(**kwargs: Any) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": "hi"}], **kwargs}


def events(r: httpx.Response) -> list[str]:
    return [e.removeprefix("data: ") for e in r.text.split("\n\n") if e.startswith("data: ")]


def test_a_chat_completion_and_its_usage() -> None:
    r = post("/v1/chat/completions", chat(seed=3))
    assert r.status_code == 200
    body = r.json()
    assert body["choices"][0]["message"] == {"role": "assistant", "content": REPLY}
    assert (
        body["choices"][0]["finish_reason"] == "stop" and body["choices"][0]["stop_reason"] is None
    )
    assert body["usage"] == {
        "prompt_tokens": len(b"user: hi\n"),
        "completion_tokens": len(REPLY),
        "total_tokens": len(b"user: hi\n") + len(REPLY),
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_a_reply_cut_inside_a_character_drops_its_half() -> None:
    async def call(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [
            await client.post("/v1/chat/completions", json=chat()),
            await client.post("/v1/chat/completions", json=chat(stream=True)),
        ]

    whole, streamed = run(call, FakeServed(tail="好\ufffd"))
    assert whole.json()["choices"][0]["message"]["content"] == REPLY + "好"
    assert "\ufffd" not in streamed.text and "好" in streamed.text


def test_the_request_becomes_the_engine_settings() -> None:
    backend = FakeServed()

    async def call(client: httpx.AsyncClient) -> None:
        body = chat(
            max_completion_tokens=7,
            temperature=0.5,
            top_k=-1,
            stop="END",
            stop_token_ids=[3],
            logit_bias={"5": -100},
            dry_multiplier=0.8,
            no_repeat_ngram_size=0,
        )
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        text = {"model": "fake", "prompt": "abc"}
        assert (await client.post("/v1/completions", json=text)).status_code == 200

    run(call, backend)
    chat_params, text_params = backend.params
    assert chat_params.max_tokens == 7 and chat_params.temperature == 0.5
    assert chat_params.top_k == 0 and chat_params.stop == ("END",)
    assert chat_params.stop_token_ids == (3,) and chat_params.logit_bias == ((5, -100.0),)
    assert chat_params.dry_multiplier == 0.8
    assert text_params.max_tokens == 16  # OpenAI's default for text completions
    # a chat without max_tokens may fill the window
    assert chat_params.seed is None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "fake"}, "messages"),
        (chat(messages=[]), "messages"),
        (chat(messages=[{"role": "robot", "content": "x"}]), "messages.0.role"),
        (
            chat(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
            "messages.0.content.0.type",
        ),
        (chat(n=2), "n"),
        (chat(temperature=-1), "temperature"),
        (chat(top_p=0), "top_p"),
        (chat(logprobs=True, top_logprobs=21), "top_logprobs"),
        (chat(top_logprobs=2), "top_logprobs"),  # without logprobs: true
        (chat(stream_options={"include_usage": True}), "stream_options"),  # without stream
        (chat(stop=["", "x"]), "stop.0"),
        (chat(max_tokens=0), "max_tokens"),
        (chat(seed=2**63), "seed"),
        (chat(logit_bias={"word": 1}), "logit_bias"),
        (chat(no_repeat_ngram_size=1), "no_repeat_ngram_size"),
        (chat(min_tokens=9, max_tokens=3), "min_tokens"),
        (chat(response_format={"type": "xml"}), "response_format.type"),
        (chat(response_format={"type": "json_schema"}), "response_format.json_schema"),
        (chat(structured_outputs={"regex": "a", "choice": ["a"]}), "structured_outputs"),
        (chat(continue_final_message=True), "continue_final_message"),
        (
            chat(
                messages=[{"role": "assistant", "content": "x"}],
                continue_final_message=True,
                add_generation_prompt=True,
            ),
            "add_generation_prompt",
        ),
        (chat(messages=[{"role": "user", "content": "x" * 80}]), "messages"),  # past the window
    ],
)
def test_bad_requests_are_400s_naming_the_parameter(body: dict[str, Any], param: str) -> None:
    r = post("/v1/chat/completions", body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_a_prompt_past_the_window_gives_the_numbers() -> None:
    r = post("/v1/chat/completions", chat(messages=[{"role": "user", "content": "x" * 80}]))
    message = r.json()["error"]["message"]
    assert "64 tokens" in message and f"{len('user: ' + 'x' * 80 + chr(10))} tokens" in message
    assert r.json()["error"]["code"] == "context_length_exceeded"


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "fake", "prompt": []}, 400, "prompt"),
        ({"model": "fake", "prompt": ["a", [97]]}, 400, "prompt.1"),
        ({"model": "fake", "prompt": ["a"] * 3}, 400, "prompt"),  # past --max-queue 2
        ({"model": "fake", "prompt": [999]}, 400, "prompt"),
        ({"model": "fake", "prompt": ""}, 400, "prompt"),
        ({"model": "other", "prompt": "a"}, 404, "model"),
    ],
)
def test_bad_text_completions(body: dict[str, Any], status: int, param: str) -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post("/v1/completions", json=body)

    r = run(call, max_queue=2)
    assert r.status_code == status and r.json()["error"]["param"] == param


@pytest.mark.parametrize("prompt", [["春", "天🌸"], [[230, 152, 165], [97, 98]]])
def test_a_list_of_prompts_is_a_choice_each(prompt: list[Any]) -> None:
    whole = post("/v1/completions", {"model": "fake", "prompt": prompt, "max_tokens": 3})
    choices = whole.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1] and all(c["text"] == REPLY[:3] for c in choices)
    sizes = [len(p.encode()) if isinstance(p, str) else len(p) for p in prompt]
    assert whole.json()["usage"]["prompt_tokens"] == sum(sizes)
    assert whole.json()["usage"]["completion_tokens"] == 6

    body = {"model": "fake", "prompt": prompt, "max_tokens": 3, "stream": True}
    streamed = post("/v1/completions", body | {"stream_options": {"include_usage": True}})
    chunks = [json.loads(d) for d in events(streamed)[:-1]]
    texts = ["", ""]
    for c in chunks[:-1]:
        (choice,) = c["choices"]
        texts[choice["index"]] += choice["text"]
    assert texts == [REPLY[:3]] * 2
    finishes = [c["choices"][0]["index"] for c in chunks[:-1] if c["choices"][0]["finish_reason"]]
    assert sorted(finishes) == [0, 1]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6


def test_echo_with_logprobs_scores_the_prompt() -> None:
    body = {"model": "fake", "prompt": "ab天", "max_tokens": 2, "echo": True, "logprobs": 1}
    choice = post("/v1/completions", body).json()["choices"][0]
    lp = choice["logprobs"]
    assert choice["text"].startswith("ab天")
    assert lp["token_logprobs"][:5] == [None, -1.0, -1.0, -1.0, -1.0]  # a, b, and 天's 3 bytes
    assert lp["top_logprobs"][0] is None and lp["top_logprobs"][1] == {"c": -2.0, "b": -1.0}
    assert lp["text_offset"][:5] == [0, 1, 2, 2, 2]


def test_bodies_that_are_not_json_objects() -> None:
    async def call(client: httpx.AsyncClient) -> list[httpx.Response]:
        return [
            await client.post("/v1/chat/completions", content=b"{not json", headers=JSON),
            await client.post("/v1/chat/completions", content=b"[1, 2]", headers=JSON),
            await client.post("/v1/chat/completions", content=b"\xff\xfe", headers=JSON),
            await client.get("/v1/chat/completions"),
            await client.get("/v1/nothing"),
        ]

    bad, array, binary, method, missing = run(call)
    assert [bad.status_code, array.status_code, binary.status_code] == [400, 400, 400]
    assert method.status_code == 405 and missing.status_code == 404
    assert all("error" in r.json() for r in (bad, array, binary, method, missing))


def test_streamed_chunks_come_in_order() -> None:
    r = post("/v1/chat/completions", chat(stream=True, stream_options={"include_usage": True}))
    assert r.headers["content-type"].startswith("text/event-stream")
    data = events(r)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks[1 : 1 + len(REPLY)]]
    assert "".join(pieces) == REPLY
    finish, usage = chunks[1 + len(REPLY) :]
    assert finish["choices"][0]["finish_reason"] == "stop" and finish["choices"][0]["delta"] == {}
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == len(REPLY)


def test_an_error_mid_stream_then_done() -> None:
    backend = FakeServed()

    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post("/v1/chat/completions", json=chat(stream=True, user="boom"))

    r = run(call, backend, fault_marker="boom")
    data = events(r)
    assert data[-1] == "[DONE]"
    error = json.loads(data[-2])
    assert error["error"]["code"] == "generation_failed" and "injected" in error["error"]["message"]
    assert len(data) == 1 + 2 + 1 + 1  # role, two pieces, the error, [DONE]
    assert backend.streams[0].closed


def test_past_the_queue_limit_a_429_with_retry_after() -> None:
    backend = FakeServed()

    async def call(client: httpx.AsyncClient) -> tuple[httpx.Response, httpx.Response, str]:
        backend.gate = asyncio.Event()
        first = asyncio.ensure_future(client.post("/v1/chat/completions", json=chat()))
        while not backend.streams:
            await asyncio.sleep(0.01)
        second = await client.post("/v1/chat/completions", json=chat())
        metrics = (await client.get("/metrics")).text
        backend.gate.set()
        return second, await first, metrics

    second, first, metrics = run(call, backend, max_queue=1)
    assert second.status_code == 429 and second.headers["retry-after"] == "1"
    assert second.json()["error"]["type"] == "rate_limit_error"
    assert first.status_code == 200
    assert 'gen_requests_rejected_total{model="fake"} 1.0' in metrics
    assert 'gen_requests_running{model="fake"} 1.0' in metrics


def test_a_body_past_the_limit_is_a_413() -> None:
    async def call(client: httpx.AsyncClient) -> list[httpx.Response]:
        big = json.dumps(chat(user="x" * 2000)).encode()

        async def chunked() -> Any:  # no Content-Length: counted as it arrives
            for i in range(0, len(big), 100):
                yield big[i : i + 100]

        return [
            await client.post("/v1/chat/completions", content=big, headers=JSON),
            await client.post("/v1/chat/completions", content=chunked(), headers=JSON),
            await client.post("/v1/chat/completions", json=chat()),
        ]

    declared, streamed, small = run(call, max_body_bytes=1000)
    assert declared.status_code == 413 and streamed.status_code == 413
    assert declared.json()["error"]["code"] == "body_too_large"
    assert small.status_code == 200


def test_a_key_guards_v1_only() -> None:
    async def call(client: httpx.AsyncClient) -> list[httpx.Response]:
        good = {"Authorization": "Bearer sekrit"}
        return [
            await client.get("/v1/models"),
            await client.get("/v1/models", headers={"Authorization": "Bearer wrong"}),
            await client.get("/v1/models", headers=good),
            await client.post("/v1/chat/completions", json=chat()),
            await client.post("/v1/chat/completions", json=chat(), headers=good),
            await client.get("/health"),
            await client.get("/openapi.json"),
        ]

    none, wrong, good, chat_none, chat_good, health, openapi = run(call, api_key="sekrit")
    assert [none.status_code, wrong.status_code, chat_none.status_code] == [401, 401, 401]
    assert none.json()["error"]["code"] == "invalid_api_key"
    assert [good.status_code, chat_good.status_code, health.status_code] == [200, 200, 200]
    assert openapi.json()["paths"]["/v1/models"]["get"]["security"] == [{"bearer": []}]


def test_cors_only_for_the_origins_given() -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }

    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.options("/v1/chat/completions", headers=preflight)

    closed = run(call)
    assert "access-control-allow-origin" not in closed.headers
    opened = run(call, cors_origins=("https://app.example",), api_key="k")
    assert opened.status_code == 200
    assert opened.headers["access-control-allow-origin"] == "https://app.example"


def test_openapi_describes_the_api() -> None:
    async def call(client: httpx.AsyncClient) -> dict[str, Any]:
        return (await client.get("/openapi.json")).json()  # type: ignore[no-any-return]

    doc = run(call)
    assert doc["openapi"].startswith("3.1")
    assert set(doc["paths"]) == {
        "/v1/models",
        "/v1/models/{model_id}",
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/health",
        "/metrics",
        "/openapi.json",
        "/v1/session",  # the dashboard's cookie; the runs API is only where runs are served
    }
    schemas = doc["components"]["schemas"]
    assert schemas["ChatCompletionRequest"]["properties"]["model"]["enum"] == ["fake"]
    assert {"ChatCompletion", "ChatCompletionChunk", "Completion", "ErrorResponse"} <= set(schemas)
    assert {"ResponseRequest", "ResponseObject", "TextDeltaEvent"} <= set(schemas)
    assert (
        schemas["ResponseRequest"]["properties"]["max_output_tokens"]["anyOf"][0]["maximum"] == 64
    )


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.8.0.1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.org"))
