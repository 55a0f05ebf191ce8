"""Tool calls through the official `openai` client against a real `gen serve` on loopback:
calls held to the tools' schemas (whole and streamed, the same call either way), a named
tool, "none" and "auto", the result sent back as a tool turn, and bad tools refused."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.server.conftest import MODEL

pytestmark = pytest.mark.real_model

WEATHER: Any = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
TIME: Any = {
    "type": "function",
    "function": {
        "name": "local_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "enum": ["Asia/Shanghai", "UTC"]}},
            "required": ["zone"],
        },
    },
}
ASK: Any = [{"role": "user", "content": "北京明天天气怎么样？🌧"}]


def _valid_weather(arguments: str) -> dict[str, Any]:
    args = json.loads(arguments)
    assert set(args) == {"city", "days"}
    assert isinstance(args["city"], str) and len(args["city"]) <= 12
    assert isinstance(args["days"], int) and 1 <= args["days"] <= 7
    return args


def test_a_required_call_round_trips(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=60,
        seed=1,
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "weather"  # type: ignore[union-attr]
    _valid_weather(call.function.arguments)  # type: ignore[union-attr]
    assert r.usage is not None and r.usage.completion_tokens > 0
    history: Any = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "小雨，12°C 🌧"},
    ]
    stream = client.chat.completions.create(
        model=MODEL, messages=history, tools=[WEATHER], max_tokens=12, stream=True, seed=1
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("stop", "length", "tool_calls")
    assert [f for f in finishes if f] == finishes[-1:]
    if finishes[-1] != "tool_calls":
        assert text  # auto: the model answered in text
    plain = client.chat.completions.create(
        model=MODEL, messages=history, max_tokens=12, stream=True, seed=1
    )
    ends = [c.choices[0].finish_reason for c in plain if c.choices and c.choices[0].finish_reason]
    assert ends in (["stop"], ["length"])


def test_a_streamed_call_is_the_whole_one(client: openai.OpenAI) -> None:
    kwargs: Any = {"model": MODEL, "messages": ASK, "tools": [WEATHER, TIME], "seed": 7}
    kwargs.update(tool_choice="required", parallel_tool_calls=False, max_tokens=80, temperature=0)
    whole = client.chat.completions.create(**kwargs)
    calls = whole.choices[0].message.tool_calls or []
    assert calls
    parts: dict[int, dict[str, str]] = {}
    finishes = []
    for chunk in client.chat.completions.create(**kwargs, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        finishes.append(chunk.choices[0].finish_reason)
        assert not delta.content
        for piece in delta.tool_calls or []:
            part = parts.setdefault(piece.index, {"name": "", "arguments": "", "id": ""})
            if piece.id:
                part["id"] = piece.id
            if piece.function and piece.function.name:
                part["name"] += piece.function.name
            if piece.function and piece.function.arguments:
                part["arguments"] += piece.function.arguments
    assert [f for f in finishes if f] == ["tool_calls"]
    assert [(p["name"], json.loads(p["arguments"])) for p in parts.values()] == [
        (c.function.name, json.loads(c.function.arguments))  # type: ignore[union-attr]
        for c in calls
    ]
    assert all(p["id"].startswith("call_") for p in parts.values())


def test_a_named_tool_is_called_with_chinese_arguments(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        tools=[TIME, WEATHER],
        tool_choice={"type": "function", "function": {"name": "weather"}},
        parallel_tool_calls=False,
        max_tokens=60,
        temperature=0,
    )
    (call,) = r.choices[0].message.tool_calls or []
    assert call.function.name == "weather"  # type: ignore[union-attr]
    args = _valid_weather(call.function.arguments)  # type: ignore[union-attr]
    # the arguments as they came, and as a history sends them back: the same characters
    assert json.loads(json.dumps(args, ensure_ascii=False)) == args
    assert "\\u" not in call.function.arguments  # type: ignore[union-attr]


def test_chinese_arguments_round_trip(client: openai.OpenAI) -> None:
    echo: Any = {
        "type": "function",
        "function": {
            "name": "echo",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "enum": ["你好，世界 🌏"]}},
                "required": ["text"],
            },
        },
    }
    for stream in (False, True):
        r: Any = client.chat.completions.create(
            model=MODEL, messages=ASK, tools=[echo], tool_choice="required", max_tokens=100,
            parallel_tool_calls=False, stream=stream, temperature=0,
        )  # fmt: skip
        if stream:
            arguments = "".join(
                p.function.arguments or ""
                for c in r if c.choices for p in c.choices[0].delta.tool_calls or []
            )  # fmt: skip
        else:
            assert r.choices[0].finish_reason == "tool_calls", r.choices[0].message.content
            arguments = r.choices[0].message.tool_calls[0].function.arguments
        assert json.loads(arguments) == {"text": "你好，世界 🌏"}


def test_none_answers_in_text_and_auto_in_either(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=6
    )
    assert r.choices[0].message.content and not r.choices[0].message.tool_calls
    for seed in range(3):
        r = client.chat.completions.create(
            model=MODEL, messages=ASK, tools=[WEATHER], max_tokens=40, seed=seed,
            parallel_tool_calls=False,
        )  # fmt: skip
        message = r.choices[0].message
        if message.tool_calls:
            assert r.choices[0].finish_reason == "tool_calls" and message.content is None
            _valid_weather(message.tool_calls[0].function.arguments)  # type: ignore[union-attr]
        else:
            assert message.content and not message.content.startswith("[")


@pytest.mark.parametrize(
    ("tools", "choice", "param"),
    [
        (
            [{"type": "function", "function": {"parameters": {}}}],
            "required",
            "tools.0.function.name",
        ),
        ([{"type": "function", "function": {"name": "a b"}}], "required", "tools.0.function.name"),
        (
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}],
            "required",
            "tools",
        ),
        ([WEATHER], {"type": "function", "function": {"name": "missing"}}, "tool_choice"),
        (None, "required", "tool_choice"),
    ],
)
def test_bad_tools_are_refused(client: openai.OpenAI, tools: Any, choice: Any, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model=MODEL, messages=ASK, tools=tools or openai.omit, tool_choice=choice,
            max_tokens=4,
        )  # fmt: skip
    body: Any = refused.value.body
    assert body["type"] == "invalid_request_error"
    assert body["param"] == param, body
