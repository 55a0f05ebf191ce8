"""The official `openai` client against a real `gen serve` on loopback (issue 11's
acceptance): completions whole and streamed, include_usage, stop, max_tokens, Chinese
with emoji streamed byte-correct; and issue 15's: response_format json_schema valid for 20
seeds, streamed or not."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.server.conftest import MODEL
from tests.test_structured_generate import MAX_TOKENS, PROMPT, SCHEMA, SEEDS, assert_valid

pytestmark = pytest.mark.real_model

FRUIT = [
    {"role": "system", "content": "你是一个只说中文的助手。"},
    {"role": "user", "content": "你好！请用中文回答：你最喜欢什么水果？🍎"},
]


def chat(client: openai.OpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("messages", [{"role": "user", "content": "Name three colours."}])
    return client.chat.completions.create(model=MODEL, **kwargs)


def test_models_lists_the_one_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]


def test_a_completion_without_streaming(client: openai.OpenAI) -> None:
    r = chat(client, temperature=0, max_tokens=24)
    assert r.object == "chat.completion" and r.model == MODEL and r.id.startswith("chatcmpl-")
    (choice,) = r.choices
    assert choice.message.role == "assistant" and choice.message.content
    assert choice.finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 0 and 0 < u.completion_tokens <= 24
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert u.prompt_tokens_details.cached_tokens <= u.prompt_tokens


def test_streaming_with_usage_gives_the_same_text(client: openai.OpenAI) -> None:
    whole = chat(client, temperature=0.8, seed=11, max_tokens=32)
    chunks = list(
        chat(
            client,
            temperature=0.8,
            seed=11,
            max_tokens=32,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c for c in chunks if c.choices and c.choices[0].finish_reason is not None]
    assert (
        len(finishes) == 1
        and finishes[0].choices[0].finish_reason == whole.choices[0].finish_reason
    )
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content


def test_streaming_without_include_usage_sends_no_usage(client: openai.OpenAI) -> None:
    chunks = list(chat(client, temperature=0, max_tokens=4, stream=True))
    assert all(c.usage is None for c in chunks) and all(c.choices for c in chunks)


def test_a_stop_string_ends_the_text_before_it(client: openai.OpenAI) -> None:
    free = chat(client, temperature=0, max_tokens=40).choices[0].message.content
    words = free.split()
    assert len(words) > 4
    stop = words[3]
    r = chat(client, temperature=0, max_tokens=40, stop=[stop, "never appears"])
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.model_extra["stop_reason"] == stop
    assert choice.message.content == free[: free.index(stop)]


def test_max_tokens_ends_with_length(client: openai.OpenAI) -> None:
    r = chat(client, temperature=0, max_tokens=3, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3
    r = chat(client, temperature=0, max_completion_tokens=2)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 2


def test_chinese_and_emoji_stream_without_replacement_characters(client: openai.OpenAI) -> None:
    settings: dict[str, Any] = {"temperature": 0.7, "seed": 5, "max_tokens": 160, "stop": ["🍋"]}
    whole = chat(client, messages=FRUIT, **settings).choices[0]
    deltas = [
        c.choices[0].delta.content
        for c in chat(client, messages=FRUIT, stream=True, **settings)
        if c.choices and c.choices[0].delta.content
    ]
    assert all("\ufffd" not in d for d in deltas)
    assert "".join(deltas) == whole.message.content
    assert any("\u4e00" <= ch <= "\u9fff" for ch in whole.message.content)  # Chinese
    assert any(ord(ch) > 0xFFFF for ch in whole.message.content)  # an emoji (4 UTF-8 bytes)
    assert len(deltas) > 10


def test_logprobs_whole_and_streamed(client: openai.OpenAI) -> None:
    settings: dict[str, Any] = {"temperature": 0, "max_tokens": 8, "logprobs": True}
    r = chat(client, top_logprobs=3, extra_body={"ignore_eos": True}, **settings)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 8
    assert b"".join(bytes(t.bytes) for t in content).decode() == r.choices[0].message.content
    for t in content:
        assert len(t.top_logprobs) == 3 and t.logprob <= 0
        assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == t.logprob
    streamed = [
        t
        for c in chat(
            client, top_logprobs=3, stream=True, extra_body={"ignore_eos": True}, **settings
        )
        if c.choices and c.choices[0].logprobs
        for t in c.choices[0].logprobs.content or []
    ]
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content]
    text = client.completions.create(
        model=MODEL, prompt="The sky is", max_tokens=4, temperature=0, logprobs=2
    ).choices[0]
    lp = text.logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 4
    assert "".join(lp.tokens) == text.text and lp.text_offset[0] == 0
    assert all(len(top) == 2 for top in lp.top_logprobs)


def test_text_completions(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0, echo=True
    )
    assert r.object == "text_completion"
    assert r.choices[0].text.startswith("Once upon a time") and r.usage.completion_tokens == 6
    streamed = client.completions.create(
        model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0, stream=True
    )
    text = "".join(c.choices[0].text for c in streamed if c.choices)
    assert "Once upon a time" + text == r.choices[0].text


def test_errors_are_openai_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        chat(client, n=2)
    assert bad.value.body["param"] == "n"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError) as long:
        chat(client, messages=[{"role": "user", "content": "word " * 9000}])
    assert "8192" in long.value.message and long.value.code == "context_length_exceeded"


CITY = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "rain": {"type": "boolean"}},
    "required": ["city", "rain"],
    "additionalProperties": False,
}


def test_structured_output_by_response_format_and_by_vllms_names(client: openai.OpenAI) -> None:
    import json
    import re

    messages = [{"role": "user", "content": "A city in Thailand 🇹🇭 and whether it rains, as JSON."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": CITY}}
    r = chat(client, messages=messages, temperature=0.7, seed=2, response_format=fmt)
    value = json.loads(r.choices[0].message.content)
    assert set(value) == {"city", "rain"} and isinstance(value["rain"], bool)
    assert r.choices[0].finish_reason == "stop"

    streamed = chat(
        client, messages=messages, temperature=0.7, seed=2, response_format=fmt, stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == r.choices[0].message.content  # streamed or not, the same constrained text

    regex = r"[0-9]{2}:[0-5][0-9]"
    r = chat(client, max_tokens=20, extra_body={"structured_outputs": {"regex": regex}})
    assert re.fullmatch(regex, r.choices[0].message.content)
    r = chat(client, extra_body={"structured_outputs": {"choice": ["是", "否"]}})
    assert r.choices[0].message.content in ("是", "否")

    with pytest.raises(openai.BadRequestError) as info:
        chat(client, stream=True, extra_body={"structured_outputs": {"regex": "("}})
    assert info.value.status_code == 400 and "bad regex" in str(info.value)


@pytest.mark.parametrize("seed", SEEDS)
def test_response_format_json_schema_is_valid_and_streams_the_same_text(
    client: openai.OpenAI, seed: int
) -> None:
    settings: dict[str, Any] = {
        "messages": [{"role": "user", "content": PROMPT}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "city", "schema": SCHEMA},
        },
        "temperature": 0.9,
        "seed": seed,
        "max_tokens": MAX_TOKENS,
    }
    whole = chat(client, **settings).choices[0]
    assert whole.finish_reason == "stop", whole
    assert_valid(whole.message.content)

    deltas = [
        c.choices[0].delta.content or "" for c in chat(client, stream=True, **settings) if c.choices
    ]
    assert "".join(deltas) == whole.message.content
