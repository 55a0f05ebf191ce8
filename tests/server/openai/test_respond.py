"""/v1/responses in process over the fake model (no weights): the Response whole, its events
streamed in the Responses API's order with `event:` names and sequence numbers, cut off by
max_output_tokens, an error mid-stream, text.format as the engine's constraint, and what is
refused before anything runs."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gen.backends.base import Message
from gen.sampling import Constraint
from tests.server.fakes import REPLY, FakeServed
from tests.server.test_app import run

ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * len(REPLY),
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


class Recording(FakeServed):
    """The fake model, keeping the turns each prompt was made of."""

    def __init__(self) -> None:
        super().__init__(context_window=256)
        self.turns: list[list[Message]] = []

    def encode(self, messages: list[Message], *args: Any, **kwargs: Any) -> list[int]:
        self.turns.append(messages)
        return super().encode(messages, *args, **kwargs)


def post(body: Any, backend: FakeServed | None = None, **config: Any) -> httpx.Response:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post("/v1/responses", json=body)

    result: httpx.Response = run(call, backend, **config)
    return result


def events(r: httpx.Response) -> list[tuple[str | None, str]]:
    """Each event's name and data, from the raw text."""
    out = []
    for block in r.text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            out.append((lines.get("event"), lines["data"]))
    return out


def test_a_whole_response() -> None:
    backend = Recording()
    r = post({"input": "hi", "instructions": "用中文回答。", "metadata": {"k": "v"}}, backend)
    assert r.status_code == 200
    body = r.json()
    assert body["id"].startswith("resp_") and body["object"] == "response"
    assert body["status"] == "completed" and body["incomplete_details"] is None
    (message,) = body["output"]
    assert message["id"].startswith("msg_") and message["role"] == "assistant"
    assert message["status"] == "completed"
    assert message["content"] == [{"type": "output_text", "text": REPLY, "annotations": []}]
    usage = body["usage"]
    assert usage["output_tokens"] == len(REPLY) and usage["input_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert body["instructions"] == "用中文回答。" and body["metadata"] == {"k": "v"}
    assert body["store"] is False and body["text"] == {"format": {"type": "text"}}
    assert backend.turns == [
        [{"role": "system", "content": "用中文回答。"}, {"role": "user", "content": "hi"}]
    ]


def test_message_items_become_the_turns() -> None:
    backend = Recording()
    answer = {"type": "output_text", "text": "🙂", "annotations": []}
    items = [
        {"role": "developer", "content": "Be brief."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "你好"}]},
        {"role": "assistant", "content": [answer]},
        {"role": "user", "content": [{"type": "input_text", "text": t} for t in "ab"]},
    ]
    r = post({"input": items, "instructions": "First."}, backend)
    assert r.status_code == 200, r.text
    assert backend.turns == [
        [
            {"role": "system", "content": "First."},
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "你好"},
            {"role": "assistant", "content": "🙂"},
            {"role": "user", "content": "ab"},
        ]
    ]


def test_streamed_events_come_in_order() -> None:
    r = post({"input": "hi", "stream": True})
    assert r.headers["content-type"].startswith("text/event-stream")
    sent = events(r)
    assert sent[-1] == (None, "[DONE]")
    data = [json.loads(d) for _, d in sent[:-1]]
    assert [name for name, _ in sent[:-1]] == [d["type"] for d in data]  # event: is the type
    assert [d["type"] for d in data] == [*ORDER, "response.completed"]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    item_id = data[2]["item"]["id"]
    deltas = [d for d in data if d["type"] == "response.output_text.delta"]
    assert all(
        d["item_id"] == item_id and d["output_index"] == d["content_index"] == 0 for d in deltas
    )
    assert "".join(d["delta"] for d in deltas) == REPLY
    assert data[-4]["text"] == REPLY and data[-3]["part"]["text"] == REPLY
    completed = data[-1]["response"]
    assert completed["id"] == data[0]["response"]["id"] and completed["status"] == "completed"
    assert completed["output"] == [data[-2]["item"]] and completed["usage"]["output_tokens"] == 7
    assert data[0]["response"]["status"] == "in_progress" and data[0]["response"]["output"] == []


def test_max_output_tokens_makes_it_incomplete() -> None:
    whole = post({"input": "hi", "max_output_tokens": 3}).json()
    assert whole["status"] == "incomplete"
    assert whole["incomplete_details"] == {"reason": "max_output_tokens"}
    assert whole["output"][0]["status"] == "incomplete"
    assert whole["output"][0]["content"][0]["text"] == REPLY[:3]
    streamed = events(post({"input": "hi", "max_output_tokens": 3, "stream": True}))
    last = json.loads(streamed[-2][1])
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert last["response"]["usage"]["output_tokens"] == 3


def test_an_error_mid_stream_is_an_error_event_then_failed() -> None:
    backend = FakeServed()
    body = {"input": "hi", "stream": True, "user": "boom"}
    sent = events(post(body, backend, fault_marker="boom"))
    assert sent[-1] == (None, "[DONE]")
    data = [json.loads(d) for _, d in sent[:-1]]
    assert [d["type"] for d in data] == [*ORDER[:6], "error", "response.failed"]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    error, failed = data[-2:]
    assert error["code"] == "generation_failed" and "injected" in error["message"]
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": error["code"], "message": error["message"]}
    assert failed["response"]["output"][0]["content"][0]["text"] == REPLY[:2]
    assert backend.streams[0].closed


@pytest.mark.parametrize(
    ("fmt", "constraint"),
    [
        ({"type": "json_object"}, Constraint("json_schema", '{"type": "object"}')),
        (
            {"type": "json_schema", "name": "n", "schema": {"type": "integer"}, "strict": True},
            Constraint("json_schema", '{"type": "integer"}'),
        ),
        ({"type": "text"}, None),
    ],
)
def test_text_format_is_the_engines_constraint(
    fmt: dict[str, Any], constraint: Constraint | None
) -> None:
    backend = FakeServed()
    r = post({"input": "hi", "text": {"format": fmt}}, backend)
    assert r.status_code == 200, r.text
    assert backend.params[0].constraint == constraint
    assert r.json()["text"] == {"format": fmt}  # echoed as sent


def test_store_is_accepted_and_nothing_stored() -> None:
    r = post({"input": "hi", "store": True})
    assert r.status_code == 200 and r.json()["store"] is False


UNSUPPORTED = "unsupported_parameter"
INVALID = "invalid_value"


def item(**fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": "x", **fields}


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id", UNSUPPORTED),
        ({"input": "hi", "conversation": "conv_1"}, "conversation", UNSUPPORTED),
        ({"input": "hi", "background": True}, "background", UNSUPPORTED),
        ({"input": "hi", "tools": [{"type": "function", "name": "f"}]}, "tools", UNSUPPORTED),
        ({}, "input", INVALID),
        ({"input": []}, "input", INVALID),
        ({"input": [item(role="tool")]}, "input.0.role", INVALID),
        ({"input": [item(type="function_call")]}, "input.0.type", INVALID),
        ({"input": [item(content=[{"type": "input_image"}])]}, "input.0.content.0.type", INVALID),
        ({"input": "hi", "text": {"format": {"type": "json_schema"}}}, "text.format", INVALID),
        ({"input": "hi", "max_output_tokens": 65}, "max_output_tokens", INVALID),
        ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens", INVALID),
        ({"input": "hi", "temperature": 3}, "temperature", INVALID),
        ({"input": "x" * 80}, "input", "context_length_exceeded"),
    ],
)
def test_what_is_refused_before_anything_runs(body: dict[str, Any], param: str, code: str) -> None:
    backend = FakeServed()
    r = post(body, backend)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert not backend.streams


def test_a_body_not_sent_as_json_is_a_415() -> None:
    async def call(client: httpx.AsyncClient) -> httpx.Response:
        return await client.post("/v1/responses", content=b'{"input": "hi"}')

    r = run(call)
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
