"""The `openai:` backend passes a constraint on: a JSON schema as OpenAI's response_format,
a regex or a grammar as vLLM's structured_outputs, so a real `gen serve` holds the output
to it. A constrained round never goes on past text already written (the server's grammar
would start again mid-output): a prefix, or a stream cut off mid-way, is an error. A server
that refuses the constraint is named with its own message. So is a pipeline section's
`format:` over a remote server."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gen.backends.base import Message
from gen.backends.collect import collect
from gen.backends.openai import OpenAIBackend
from gen.errors import BackendError
from gen.pipeline import load_pipeline_text
from gen.sampling import Constraint, SamplingParams
from tests.server.conftest import MODEL, Server, running_server

from .fault_server import FaultServer, running
from .remote import run_remote

SCHEMA = {
    "type": "object",
    "properties": {
        "fruit": {"type": "string", "enum": ["苹果", "香蕉", "橙子"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 99},
    },
    "required": ["fruit", "count"],
    "additionalProperties": False,
}
REGEX = r"[0-9]{3}-[A-Z]{2}"
ASK: list[Message] = [{"role": "user", "content": "你最喜欢什么水果？买几个？用 JSON 回答。"}]


async def generate(
    backend: OpenAIBackend, constraint: Constraint | None, messages: list[Message] = ASK
) -> str:
    params = SamplingParams(max_tokens=48, temperature=0, seed=1, constraint=constraint)
    try:
        stream = await backend.chat(messages, params)
        return (await collect(stream)).text
    finally:
        await backend.aclose()


# -- what is sent ---------------------------------------------------------------------


def captured(constraint: Constraint | None, answer: httpx.Response | None = None) -> dict[str, Any]:
    """The body the backend sends for `constraint`, caught by a mock transport."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if answer is not None:
            return answer
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        sse = f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n"
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})

    backend = OpenAIBackend("m", "http://server.test/v1", api_key="", max_retries=0)
    replica = backend.replicas.replicas[0]
    replica.client = httpx.AsyncClient(base_url=replica.url, transport=httpx.MockTransport(handler))
    asyncio.run(generate(backend, constraint))
    (body,) = bodies
    return body


def test_a_json_schema_goes_as_response_format() -> None:
    body = captured(Constraint("json_schema", json.dumps(SCHEMA, ensure_ascii=False)))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": SCHEMA, "strict": True},
    }
    assert "structured_outputs" not in body


@pytest.mark.parametrize(
    ("kind", "text", "field"),
    [
        ("regex", REGEX, "regex"),
        ("lark", 'start: "是" | "否"', "grammar"),
        ("gbnf", 'root ::= "是" | "否"', "grammar"),
    ],
)
def test_a_regex_or_grammar_goes_as_structured_outputs(kind: str, text: str, field: str) -> None:
    body = captured(Constraint(kind, text))
    assert body["structured_outputs"] == {field: text}
    assert "response_format" not in body


def test_an_unconstrained_request_carries_neither() -> None:
    body = captured(None)
    assert "structured_outputs" not in body and "response_format" not in body


def test_a_refused_constraint_names_the_servers_message() -> None:
    error = {"error": {"message": "bad regex: unclosed group", "param": "constraint"}}
    with pytest.raises(BackendError) as caught:
        captured(Constraint("regex", "("), httpx.Response(400, json=error))
    assert "answered 400: bad regex: unclosed group (param: constraint)" in str(caught.value)


def test_a_constraint_past_written_text_is_refused_before_any_request() -> None:
    with running(FaultServer()) as server:
        backend = OpenAIBackend("m", server.url, api_key="", max_retries=0)
        with pytest.raises(BackendError, match="cannot go on past text already written"):
            asyncio.run(generate(backend, Constraint("regex", REGEX, prefix="123")))
        assert server.requests == []


def test_a_constrained_stream_cut_off_mid_way_is_not_resumed() -> None:
    with running(FaultServer(faults=["drop"])) as server:
        backend = OpenAIBackend("m", server.url, api_key="", max_retries=3)
        with pytest.raises(BackendError, match="cannot go on from the text received"):
            asyncio.run(generate(backend, Constraint("regex", ".*")))
        assert len(server.requests) == 1  # not sent again as an open assistant message


def test_a_constrained_request_failing_before_any_text_is_sent_again_whole() -> None:
    with running(FaultServer(faults=["500"])) as server:
        backend = OpenAIBackend("m", server.url, api_key="", max_retries=3)
        asyncio.run(generate(backend, Constraint("regex", ".*")))
        first, second = (r["body"] for r in server.requests)
        assert first == second and second["structured_outputs"] == {"regex": ".*"}


# -- against a real gen serve ---------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server() as s:
        yield s


def backend_for(server: Server) -> OpenAIBackend:
    return OpenAIBackend(MODEL, server.v1, api_key="", max_retries=0)


@pytest.mark.real_model
def test_gen_serve_holds_the_output_to_a_json_schema(server: Server) -> None:
    constraint = Constraint("json_schema", json.dumps(SCHEMA, ensure_ascii=False))
    text = asyncio.run(generate(backend_for(server), constraint))
    value = json.loads(text)
    assert set(value) == {"fruit", "count"}
    assert value["fruit"] in ("苹果", "香蕉", "橙子")
    assert isinstance(value["count"], int) and 1 <= value["count"] <= 99


@pytest.mark.real_model
def test_gen_serve_holds_the_output_to_a_regex(server: Server) -> None:
    ask: list[Message] = [{"role": "user", "content": "Give me a ticket code."}]
    text = asyncio.run(generate(backend_for(server), Constraint("regex", REGEX), ask))
    assert re.fullmatch(REGEX, text), text


@pytest.mark.real_model
def test_gen_serve_holds_the_output_to_a_lark_grammar(server: Server) -> None:
    ask: list[Message] = [{"role": "user", "content": "Is tea a drink? 用中文回答。"}]
    grammar = 'start: "是" | "否"'
    text = asyncio.run(generate(backend_for(server), Constraint("lark", grammar), ask))
    assert text in ("是", "否")


@pytest.mark.real_model
def test_a_constraint_gen_serve_refuses_is_named_with_its_message(server: Server) -> None:
    with pytest.raises(BackendError) as caught:
        asyncio.run(generate(backend_for(server), Constraint("regex", "(")))
    message = str(caught.value)
    assert "answered 400: bad regex" in message and "(param: constraint)" in message


PIPELINE = """
name: held
model: openai:smollm2-135m
base_url: {url}
remote: {{max_retries: 0}}
defaults: {{temperature: 0, seed: 1, max_rounds: 3}}
sections:
  - id: order
    prompt: 你最喜欢什么水果？买几个？用 JSON 回答。
    max_tokens: {max_tokens}
    format:
      json_schema: {schema}
"""


def run_pipeline(server: Server, out: Path, max_tokens: int) -> dict[str, Any]:
    schema = json.dumps(SCHEMA, ensure_ascii=False)
    text = PIPELINE.format(url=server.v1, max_tokens=max_tokens, schema=schema)
    pipeline = load_pipeline_text(text, file="held.yaml")
    return run_remote(pipeline, out)


@pytest.mark.real_model
def test_a_pipeline_section_with_a_format_is_held_to_it_over_gen_serve(
    server: Server, tmp_path: Path
) -> None:
    manifest = run_pipeline(server, tmp_path, max_tokens=64)
    assert manifest["status"] == "completed", manifest
    folder = tmp_path / "held" / manifest["run_id"] / "sections"
    value = json.loads((folder / "order.md").read_text("utf-8"))
    assert value["fruit"] in ("苹果", "香蕉", "橙子") and isinstance(value["count"], int)


@pytest.mark.real_model
def test_a_held_section_that_needs_a_second_round_fails_saying_why(
    server: Server, tmp_path: Path
) -> None:
    manifest = run_pipeline(server, tmp_path, max_tokens=4)
    (section,) = manifest["sections"]
    assert section["status"] == "failed"
    assert "cannot go on past text already written" in section["error"]
