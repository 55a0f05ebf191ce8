"""The rest of OpenAI's surface, as the official `openai` client and the peers' own test
suites (vLLM's, llama.cpp's) use it, against a real `gen serve` on loopback: a model by its
id, up to 20 top logprobs, any int64 seed, a history with tool calls, JSON bodies only, and
a request that names no model (tool calls: test_tool_calls.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.server.conftest import MODEL, Server

pytestmark = pytest.mark.real_model

SPRING = [{"role": "user", "content": "写一句关于春天的话。🌸"}]


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
    without = [*messages[:1], {"role": "assistant", "content": ""}, *messages[2:]]
    bare = client.chat.completions.create(model=MODEL, messages=without, max_tokens=1)
    assert r.usage is not None and bare.usage is not None
    assert r.usage.prompt_tokens > bare.usage.prompt_tokens + 5  # the call is in the prompt


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/responses", "/runs"])
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


def text(client: openai.OpenAI, **kwargs: Any) -> Any:
    kwargs.setdefault("temperature", 0)
    return client.completions.create(model=MODEL, **kwargs)


PROMPTS = ["春天来了，花园里", "The moon is", "🌸 Cherry blossoms"]


def test_a_list_of_prompts_is_a_choice_each_whole_and_streamed(client: openai.OpenAI) -> None:
    alone = [text(client, prompt=p, max_tokens=8) for p in PROMPTS]
    together = text(client, prompt=PROMPTS, max_tokens=8)
    assert [c.index for c in together.choices] == [0, 1, 2]
    # batched together, each prompt's greedy text is its text alone
    assert [c.text for c in together.choices] == [a.choices[0].text for a in alone]
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        assert getattr(together.usage, name) == sum(getattr(a.usage, name) for a in alone)

    streamed = list(
        text(
            client,
            prompt=PROMPTS,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    texts = ["", "", ""]
    finished = []
    for chunk in streamed[:-1]:
        (choice,) = chunk.choices
        assert "\ufffd" not in choice.text
        texts[choice.index] += choice.text
        if choice.finish_reason is not None:
            finished.append(choice.index)
    assert texts == [c.text for c in together.choices] and sorted(finished) == [0, 1, 2]
    assert streamed[-1].choices == [] and streamed[-1].usage == together.usage


def test_prompts_as_token_ids(client: openai.OpenAI) -> None:
    first, second = [504, 3458, 314], [1073, 253]
    one = text(client, prompt=first, max_tokens=4)
    two = text(client, prompt=[first, second], max_tokens=4)
    assert len(one.choices) == 1 and [c.index for c in two.choices] == [0, 1]
    assert two.choices[0].text == one.choices[0].text
    assert two.choices[1].text == text(client, prompt=[second], max_tokens=4).choices[0].text


def test_echo_with_logprobs_scores_the_prompt(client: openai.OpenAI) -> None:
    prompt = "The capital of France is Paris, and the capital of Italy is"
    r = text(client, prompt=prompt, max_tokens=3, echo=True, logprobs=2)
    choice = r.choices[0]
    lp = choice.logprobs
    assert choice.text.startswith(prompt) and lp is not None
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None  # nothing before it
    n = r.usage.prompt_tokens
    assert len(lp.tokens) == n + r.usage.completion_tokens
    assert "".join(lp.tokens) == choice.text
    assert all(x is not None and x <= 0 for x in lp.token_logprobs[1:])
    assert all(2 <= len(top) <= 3 for top in lp.top_logprobs[1:])
    assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(len(lp.tokens))]
    # the prompt's scores are the model's: the text it generated, sent back as a prompt,
    # scores as it was generated
    again = text(client, prompt=choice.text, max_tokens=1, echo=True, logprobs=0).choices[0]
    assert again.logprobs is not None
    generated = lp.token_logprobs[n:]
    rescored = again.logprobs.token_logprobs[n : n + len(generated)]
    assert rescored == pytest.approx(generated, abs=0.05)
    streamed = list(text(client, prompt=prompt, max_tokens=3, echo=True, logprobs=2, stream=True))
    first = streamed[0].choices[0]
    assert first.text == prompt and first.logprobs is not None
    assert first.logprobs.token_logprobs == lp.token_logprobs[:n]


def _stream_with_offsets(client: openai.OpenAI, **kwargs: Any) -> tuple[str, list[Any]]:
    """The whole text of a streamed completion and each chunk's choice."""
    choices = [c.choices[0] for c in text(client, stream=True, logprobs=1, **kwargs)]
    return "".join(c.text for c in choices), choices


def test_streamed_text_offsets_past_held_back_text(client: openai.OpenAI) -> None:
    # every "\n" is held back (it may start the stop string "\nZZ") until the next token
    settings: dict[str, Any] = {
        "prompt": "Fruits:\n1. Apple\n2. Pear\n3.",
        "max_tokens": 30,
        "stop": ["\nZZ"],
        "extra_body": {"ignore_eos": True},
    }
    whole, choices = _stream_with_offsets(client, **settings)
    assert any(c.text.startswith("\n") and len(c.text) > 1 for c in choices)  # held, let go
    offsets: list[int] = []
    for choice in choices:
        if choice.logprobs is None:
            continue
        assert choice.text == "".join(choice.logprobs.tokens)  # a chunk's text is its tokens'
        offsets += choice.logprobs.text_offset
    tokens = [t for c in choices if c.logprobs for t in c.logprobs.tokens]
    assert offsets == [len("".join(tokens[:i])) for i in range(len(tokens))]
    assert whole == text(client, **settings).choices[0].text


def test_streamed_chinese_offsets_past_held_back_text(client: openai.OpenAI) -> None:
    settings: dict[str, Any] = {
        "prompt": "春天的诗：\n一、春风🌸\n二、",
        "max_tokens": 40,
        "stop": ["\n八"],
        "extra_body": {"ignore_eos": True},
    }
    whole, choices = _stream_with_offsets(client, **settings)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in whole)
    assert all("\ufffd" not in c.text for c in choices)
    tokens = [
        (t, o)
        for c in choices
        if c.logprobs
        for t, o in zip(c.logprobs.tokens, c.logprobs.text_offset, strict=True)
    ]
    assert [o for _, o in tokens] == sorted(o for _, o in tokens)
    for token, offset in tokens:
        if "\ufffd" not in token:  # a token that is whole characters is where it says
            assert whole.startswith(token, offset), (token, offset, whole)
