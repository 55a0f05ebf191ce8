"""The rest of OpenAI's surface, as the official `openai` client and the peers' own test
suites (vLLM's, llama.cpp's) use it, against a real `gen serve` on loopback: a model by its
id, up to 20 top logprobs, any int64 seed, a history with tool calls, tools refused until
gen serve calls them, JSON bodies only, and a request that names no model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import MODEL, Server, running_server

pytestmark = pytest.mark.real_model

SPRING = [{"role": "user", "content": "写一句关于春天的话。🌸"}]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key="unused", max_retries=0, timeout=300)


def test_a_model_by_its_id(client: openai.OpenAI) -> None:
    model = client.models.retrieve(MODEL)
    assert model.id == MODEL and model.object == "model"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-4o")
    error = missing.value.body
    assert isinstance(error, dict)
    assert error["message"].startswith("The model `gpt-4o` does not exist")
    assert error["type"] == "invalid_request_error" and error["code"] == "model_not_found"


def test_twenty_top_logprobs_in_chat_and_text(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=SPRING, max_tokens=3, logprobs=True, top_logprobs=20
    )
    content = r.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content and all(len(t.top_logprobs) == 20 for t in content)
    text = client.completions.create(model=MODEL, prompt="Spring is", max_tokens=3, logprobs=20)
    lp = text.choices[0].logprobs
    assert lp is not None and lp.top_logprobs
    # the 20 (by their text: pieces of one character may share U+FFFD), and the sampled one
    assert all(len(top) in (20, 21) for top in lp.top_logprobs), lp.top_logprobs


def test_logprobs_zero_gives_the_sampled_token(client: openai.OpenAI) -> None:
    text = client.completions.create(
        model=MODEL, prompt="The sky is", max_tokens=4, logprobs=0, temperature=0.8, seed=3
    )
    lp = text.choices[0].logprobs
    assert lp is not None and lp.tokens and lp.top_logprobs and lp.token_logprobs
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, strict=True):
        assert top == {token: logprob}


def test_any_int64_seed_and_minus_one_is_random(client: openai.OpenAI) -> None:
    def story(seed: int) -> str:
        r = client.completions.create(
            model=MODEL, prompt="从前有一只猫，", max_tokens=12, temperature=1.0, seed=seed
        )
        return r.choices[0].text

    for seed in (-(2**63), -5, 2**63 - 1):
        assert story(seed) == story(seed)  # a negative seed is a seed like any other
    assert len({story(-1) for _ in range(4)}) > 1  # -1: a fresh draw each time


def test_a_history_with_tool_calls_is_accepted(client: openai.OpenAI) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": json.dumps({"city": "北京"})},
    }
    messages: list[Any] = [
        {"role": "user", "content": "北京天气怎么样？"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "Say it in one word."},
    ]
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8)
    assert r.choices[0].message.content is not None
    assert r.usage is not None and r.usage.prompt_tokens > 20  # the call is in the prompt


def test_tools_are_refused_until_gen_serve_calls_them(client: openai.OpenAI) -> None:
    tool = {
        "type": "function",
        "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
    }
    for choice in ("required", "auto"):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(
                model=MODEL,
                messages=SPRING,
                tools=[tool],
                tool_choice=choice,  # type: ignore[arg-type]
            )
        assert "tool calls are not supported yet" in refused.value.message
        assert refused.value.body["param"] == "tools"  # type: ignore[index]
    r = client.chat.completions.create(
        model=MODEL,
        messages=SPRING,
        tools=[tool],
        tool_choice="none",
        max_tokens=4,  # type: ignore[list-item]
    )
    assert r.choices[0].message.content


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/runs"])
@pytest.mark.parametrize("kind", ["application/x-www-form-urlencoded", "text/plain", None])
def test_bodies_must_be_sent_as_json(server: Server, path: str, kind: str | None) -> None:
    body = json.dumps({"model": MODEL, "prompt": "hi", "messages": SPRING, "max_tokens": 2})
    headers = {"Content-Type": kind} if kind else {}
    r = httpx.post(f"{server.v1}{path}", content=body.encode(), headers=headers, timeout=60)
    assert r.status_code == 415, r.text
    error = r.json()["error"]
    assert error["code"] == "unsupported_media_type" and set(error) >= {"message", "type"}


def test_a_request_without_a_model_is_served_by_the_one_model(server: Server) -> None:
    chat = httpx.post(
        f"{server.v1}/chat/completions", json={"messages": SPRING, "max_tokens": 4}, timeout=300
    )
    assert chat.status_code == 200, chat.text
    assert chat.json()["model"] == MODEL
    text = httpx.post(
        f"{server.v1}/completions", json={"prompt": "春天", "max_tokens": 4}, timeout=300
    )
    assert text.status_code == 200 and text.json()["model"] == MODEL
