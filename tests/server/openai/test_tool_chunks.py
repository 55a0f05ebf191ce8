"""How a chat answer with tools offered is worded: a call list held to its end and sent as
OpenAI's tool_calls deltas (several calls indexed in order), text streamed as it comes, a
list cut short sent as the text it got to."""

from __future__ import annotations

import json
from typing import Any

from gen.backends.base import Delta
from gen.server.openai.chat import ChatChunks

CALLS = '[{"name": "天气", "arguments": {"城市": "北京"}}, {"name": "time", "arguments": {}}]'


def _chunks() -> ChatChunks:
    return ChatChunks("m", lambda i: b"", logprobs=False, calling=True)


def _deltas(chunks: list[Any]) -> list[dict[str, Any]]:
    data = [json.loads(c) if isinstance(c, str) else c.model_dump(mode="json") for c in chunks]
    return [d["choices"][0] for d in data]


def test_a_call_list_goes_out_as_tool_call_deltas() -> None:
    chunks = _chunks()
    pieces = [chunks.piece(Delta(CALLS[i : i + 7])) for i in range(0, len(CALLS), 7)]
    assert pieces == [[]] * len(pieces)  # held until the list ends
    sent = _deltas(chunks.finish(Delta("", finish_reason="stop")))
    heads = [d["delta"]["tool_calls"][0] for d in sent[0:4:2]]
    assert [(h["index"], h["type"], h["function"]) for h in heads] == [
        (0, "function", {"name": "天气", "arguments": ""}),
        (1, "function", {"name": "time", "arguments": ""}),
    ]
    assert all(h["id"].startswith("call_") for h in heads)
    arguments = [d["delta"]["tool_calls"][0] for d in sent[1:4:2]]
    assert [(a["index"], json.loads(a["function"]["arguments"])) for a in arguments] == [
        (0, {"城市": "北京"}),
        (1, {}),
    ]
    assert "id" not in arguments[0] and "name" not in arguments[0]["function"]
    assert sent[-1]["finish_reason"] == "tool_calls" and sent[-1]["delta"] == {}


def test_text_streams_once_its_first_character_is_not_a_list() -> None:
    chunks = _chunks()
    assert chunks.piece(Delta("")) == []
    (first,) = _deltas(chunks.piece(Delta("晴")))
    assert first["delta"] == {"content": "晴"}
    (second,) = _deltas(chunks.piece(Delta("天 ☀")))
    assert second["delta"] == {"content": "天 ☀"}
    (end,) = _deltas(chunks.finish(Delta("", finish_reason="stop")))
    assert end["finish_reason"] == "stop"


def test_a_list_cut_short_is_sent_as_text() -> None:
    chunks = _chunks()
    chunks.piece(Delta(CALLS[:20]))
    text, end = _deltas(chunks.finish(Delta("", finish_reason="length")))
    assert text["delta"] == {"content": CALLS[:20]}
    assert end["finish_reason"] == "length"
