"""The official `openai` client's Responses API against a real `gen serve`: a Response whole
and streamed (events in order, deltas adding up to the text, Chinese and emoji whole), the
stream helper, instructions and message items as the same prompt, max_output_tokens making
it incomplete, text.format json_schema held, and what is refused OpenAI-shaped."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import MODEL, Server, wait_until
from tests.test_structured_generate import MAX_TOKENS, PROMPT, SCHEMA, assert_valid

pytestmark = pytest.mark.real_model

# Chinese with emoji, ended by its stop string (as test_openai_client's chat)
FRUIT: dict[str, Any] = {
    "instructions": "你是一个只说中文的助手。",
    "input": "你好！请用中文回答：你最喜欢什么水果？🍎",
    "temperature": 0.7,
    "max_output_tokens": 160,
    "extra_body": {"seed": 5, "stop": ["🍋"]},
}
ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
ENDING = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


def create(client: openai.OpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("input", "Name three colours.")
    return client.responses.create(model=MODEL, **kwargs)


def test_a_whole_response(client: openai.OpenAI) -> None:
    r = create(client, temperature=0, max_output_tokens=24)
    assert r.object == "response" and r.model == MODEL and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete")
    (message,) = r.output
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_") and message.content[0].type == "output_text"
    assert r.output_text == message.content[0].text and r.output_text
    u = r.usage
    assert u.input_tokens > 0 and 0 < u.output_tokens <= 24
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert u.input_tokens_details.cached_tokens <= u.input_tokens


def test_streamed_events_add_up_to_the_whole_text(client: openai.OpenAI) -> None:
    whole = create(client, **FRUIT)
    assert whole.status == "completed"
    events = list(create(client, stream=True, **FRUIT))
    kinds = [e.type for e in events]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    ending = [*ENDING, "response.completed"]
    assert kinds == [*ORDER, *["response.output_text.delta"] * len(deltas), *ending]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    item_id = events[2].item.id
    assert all(e.item_id == item_id for e in events if hasattr(e, "item_id"))
    text = "".join(deltas)
    assert text == whole.output_text == events[-4].text
    assert all("\ufffd" not in d for d in deltas) and len(deltas) > 10
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)  # Chinese
    assert any(ord(ch) > 0xFFFF for ch in text)  # an emoji (4 UTF-8 bytes)
    final = events[-1].response
    assert final.output_text == text and final.usage.output_tokens == whole.usage.output_tokens


def test_the_stream_helper_gives_the_final_response(client: openai.OpenAI) -> None:
    whole = create(client, **FRUIT)
    with client.responses.stream(model=MODEL, **FRUIT) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == final.output_text == whole.output_text


def test_instructions_are_a_system_message_placed_first(client: openai.OpenAI) -> None:
    settings: dict[str, Any] = {"temperature": 0, "max_output_tokens": 16}
    told = create(client, instructions="Answer in French.", input="Say hello.", **settings)
    items = [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Say hello."},
    ]
    listed = create(client, input=items, **settings)
    assert told.output_text == listed.output_text
    assert told.usage.input_tokens == listed.usage.input_tokens
    assert told.instructions == "Answer in French."


def test_message_items_in_either_form_make_the_same_prompt(client: openai.OpenAI) -> None:
    settings: dict[str, Any] = {"temperature": 0, "max_output_tokens": 12}
    question = FRUIT["input"]
    plain = create(client, input=question, **settings)
    typed = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}
    ]
    assert create(client, input=typed, **settings).output_text == plain.output_text
    developer = create(
        client, input=[{"role": "developer", "content": "用中文。"}, *typed], **settings
    )
    system = create(client, input=[{"role": "system", "content": "用中文。"}, *typed], **settings)
    assert developer.output_text == system.output_text
    # an earlier answer sent back as its output item: a conversation in full
    history = [*typed, plain.output[0].model_dump(), {"role": "user", "content": "为什么？"}]
    r = create(client, input=history, **settings)
    assert r.usage.input_tokens > plain.usage.input_tokens + plain.usage.output_tokens


def test_max_output_tokens_makes_it_incomplete(client: openai.OpenAI) -> None:
    cut: dict[str, Any] = {"temperature": 0, "max_output_tokens": 4}
    cut["extra_body"] = {"ignore_eos": True}
    r = create(client, **cut)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output[0].status == "incomplete" and r.usage.output_tokens == 4
    events = list(create(client, stream=True, **cut))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == r.output_text == events[-1].response.output_text


def test_text_format_json_schema_is_held(client: openai.OpenAI) -> None:
    fmt = {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}
    settings: dict[str, Any] = {"input": PROMPT, "text": {"format": fmt}, "temperature": 0.9}
    settings |= {"max_output_tokens": MAX_TOKENS, "extra_body": {"seed": 3}}
    r = create(client, **settings)
    assert r.status == "completed", r
    assert_valid(r.output_text)
    assert r.text.format.type == "json_schema" and r.text.format.name == "city"
    streamed = list(create(client, stream=True, **settings))
    text = "".join(e.delta for e in streamed if e.type == "response.output_text.delta")
    assert text == r.output_text
    # greedy: at the default temperature an unseeded object ran past 64 tokens in 5 of 12 seeds
    any_object = {"format": {"type": "json_object"}}
    r = create(client, input=PROMPT, text=any_object, max_output_tokens=MAX_TOKENS, temperature=0)
    assert r.status == "completed" and isinstance(json.loads(r.output_text), dict)


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"previous_response_id": "resp_0123"}, "previous_response_id"),
        ({"input": [{"role": "tool", "content": "x"}]}, "input.0.role"),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": "x"}]},
            "input.0.type",
        ),
        ({"text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format"),
        ({"max_output_tokens": 10**6}, "max_output_tokens"),
    ],
)
def test_what_is_refused_is_an_openai_error(
    client: openai.OpenAI, kwargs: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        create(client, **kwargs)
    error = info.value.body
    assert isinstance(error, dict) and error["param"] == param, error
    assert error["type"] == "invalid_request_error" and error["message"].startswith(param)


def test_a_grammar_the_engine_refuses_is_a_400(client: openai.OpenAI) -> None:
    fmt = {"type": "json_schema", "name": "x", "schema": {"type": "string", "pattern": "("}}
    with pytest.raises(openai.BadRequestError) as info:
        create(client, text={"format": fmt}, stream=True)
    assert info.value.status_code == 400


def running(server: Server) -> float:
    return server.metrics()["gen_requests_running"]


def test_a_client_that_goes_away_frees_its_sequence(server: Server) -> None:
    wait_until(lambda: running(server) == 0, "the server is idle")
    long = {"model": MODEL, "input": "Count.", "max_output_tokens": 4000, "ignore_eos": True}
    streamed = {**long, "stream": True}
    with httpx.stream("POST", f"{server.v1}/responses", json=streamed, timeout=300) as r:
        lines = r.iter_lines()  # held: a dropped iterator closes the connection
        for line in lines:
            if line == "event: response.output_text.delta":
                break  # it is generating
        assert running(server) == 1
    wait_until(lambda: running(server) == 0, "the abandoned stream stops running")
    assert server.metrics()["gen_kv_cache_used_bytes"] == 0
