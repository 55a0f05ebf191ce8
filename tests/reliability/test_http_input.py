"""Bad input over HTTP against a real `gen serve` on loopback, sent as raw bytes: every JSON
body endpoint (chat completions, completions, runs) given invalid UTF-8, JSON that is not
an object, 100,000 nested arrays, numbers past any range (1e400, NaN, 2**70 tokens, 5,000
digits), negative limits, lone surrogates, an empty body and a 10 MB one. Each is a 4xx
OpenAI-shaped error that names what is wrong (its `param` where there is one): never a
500, a traceback or a hang; and the server goes on answering."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.soak import record
from tests.server.conftest import MODEL, Server, running_server

pytestmark = pytest.mark.real_model

TIMEOUT = 60  # a guard against a hang: every answer here is a refusal, at once
BODY_TIMEOUT = 2  # seconds a body may stall (gen serve --body-timeout)
PIPELINE = """\
name: tiny
defaults: {max_tokens: 3, max_rounds: 1, temperature: 0, system: Be brief.}
context: {window: auto, reserve: 4}
inputs: {topic: tea}
sections:
  - {id: a, prompt: "{{ topic }}?"}
"""
CHAT = "/v1/chat/completions"
TEXT = "/v1/completions"
RUNS = "/v1/runs"
BODIES: dict[str, dict[str, Any]] = {
    CHAT: {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
    TEXT: {"model": MODEL, "prompt": "Hi", "max_tokens": 2},
    RUNS: {"pipeline": "tiny", "inputs": {"topic": "tea"}},
}
# where each endpoint takes text, and a number it reads as is
TEXT_FIELD = {CHAT: ("messages", 0, "content"), TEXT: ("prompt",), RUNS: ("pipeline",)}
NUMBER_FIELD = {CHAT: ("temperature",), TEXT: ("top_p",), RUNS: ("inputs", "topic")}
FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CHOICES = [str(i) for i in range(20_000)]
JSON_TYPE = {"Content-Type": "application/json"}
RAW = "\x00RAW\x00"  # stands for JSON text no encoder writes (1e400, NaN, 5000 digits)


@dataclass(frozen=True)
class Bad:
    name: str
    body: bytes
    status: int
    says: str  # a fragment of the message
    param: str | None = None


def _set(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(body))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copy  # type: ignore[no-any-return]


def _raw(body: dict[str, Any], path: tuple[str | int, ...], text: str) -> bytes:
    """`body` with the JSON text `text` at `path`, as sent (not re-encoded)."""
    return json.dumps(_set(body, path, RAW)).replace(json.dumps(RAW), text).encode()


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


def cases(endpoint: str) -> list[Bad]:
    body, text, number = BODIES[endpoint], TEXT_FIELD[endpoint], NUMBER_FIELD[endpoint]

    def at(
        name: str, path: tuple[str | int, ...], raw: str, says: str, status: int = 400, **more: str
    ) -> Bad:
        """`body` with the JSON text `raw` at `path`: refused, naming `path` (its top where
        it nests too deep, or `param`)."""
        param = str(path[0]) if says == "nested more than" else _dotted(path)
        return Bad(name, _raw(body, path, raw), status, says, more.get("param", param))

    deep = 100_000
    bad = [
        Bad("invalid utf-8", b'{"model": "\xff\xfe", "prompt": "\xc3("}', 400, "not UTF-8"),
        Bad("an array", b"[1, 2]", 400, "must be a JSON object, got an array"),
        Bad("a string", b'"hello"', 400, "must be a JSON object, got a string"),
        Bad("null", b"null", 400, "must be a JSON object, got null"),
        Bad("a number", b"42", 400, "must be a JSON object, got a number"),
        Bad("empty", b"", 400, "not valid JSON"),
        Bad("truncated", json.dumps(body).encode()[:-3], 400, "not valid JSON"),
        Bad("100k nested arrays", b"[" * deep + b"]" * deep, 400, "nested more than"),
        Bad("100k nested objects", b'{"a":' * deep + b"1" + b"}" * deep, 400, "nested more than"),
        at("a field nested 200 deep", text, "[" * 200 + "]" * 200, "nested more than"),
        at("1e400", number, "1e400", "out of range"),
        at("-1e400", number, "-1e400", "out of range"),
        at("NaN", number, "NaN", "not a JSON number"),
        at("Infinity", number, "Infinity", "not a JSON number"),
        at("5000 digits", number, "9" * 5000, "5000 digits"),
        at("a lone surrogate", text, '"tea \\ud800"', "lone surrogate \\ud800"),
        at("a key with a lone surrogate", ("extra",), '{"\\udfff": 1}', "a key holds a lone"),
    ]
    if endpoint in (CHAT, TEXT):
        logprobs = "top_logprobs" if endpoint == CHAT else "logprobs"
        bad += [
            at("max_tokens=2**70", ("max_tokens",), str(2**70), "at most the context window"),
            at("max_tokens=0", ("max_tokens",), "0", "greater than or equal to 1"),
            at("max_tokens=-1", ("max_tokens",), "-1", "greater than or equal to 1"),
            at("max_tokens=-2**70", ("max_tokens",), str(-(2**70)), "greater than or equal"),
            at("min_tokens=-5", ("min_tokens",), "-5", "greater than or equal to 0"),
            at(f"{logprobs}=-1", (logprobs,), "-1", "greater than or equal to 0"),
            at("seed=-2**63-1", ("seed",), str(-(2**63) - 1), "greater than or equal to"),
            at("seed=2**63", ("seed",), str(2**63), "less than"),
            at(
                "stop_token_ids",
                ("stop_token_ids",),
                f"[1, {2**70}]",
                "token ids must be in",
                param="stop_token_ids.1",
            ),
            at("logit_bias", ("logit_bias",), '{"999999999": 5}', "token ids must be in"),
            # grammars that compile, then fail at the first token: the request's fault
            at(
                "a regex too costly",
                ("structured_outputs",),
                '{"regex": "a{99999999}"}',
                "the output cannot follow the structured_outputs",
                param="constraint",
            ),
        ]
        if endpoint == CHAT:
            schema = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
            fmt = {"type": "json_schema", "json_schema": {"name": "loop", "schema": schema}}
            bad.append(
                at(
                    "a schema of itself",
                    ("response_format",),
                    json.dumps(fmt),
                    "the output cannot follow the response_format",
                    param="constraint",
                )
            )
    else:
        bombs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n"
            for p, c in zip("abcdef", "bcdefg", strict=True)
        )
        deep_yaml = "a: " + "[" * 10_000 + "]" * 10_000 + "\n"
        bad += [
            at("an empty pipeline", ("pipeline",), '""', "at least 1 character"),
            at("inputs not an object", ("inputs",), "[1]", "valid dictionary"),
            at("an alias bomb", ("pipeline",), json.dumps(bombs), "aliases", 422),
            at("YAML 10k deep", ("pipeline",), json.dumps(deep_yaml), "nested more than", 422),
            at("an unknown input", ("inputs",), '{"colour": 1}', "unknown input", 422),
        ]
    return bad


ALL = [(endpoint, bad) for endpoint in BODIES for bad in cases(endpoint)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("http-input")
    (folder / "pipelines").mkdir()
    (folder / "pipelines" / "tiny.yaml").write_text(PIPELINE, "utf-8")
    args = ["--max-model-len", "64", "--pipelines", str(folder / "pipelines")]
    args += ["--body-timeout", str(BODY_TIMEOUT), "--max-queue", "4"]
    with running_server(*args, "-o", str(folder / "out")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as c:
        yield c


def assert_refused(r: httpx.Response, status: int, says: str, param: str | None) -> None:
    record("inputs tried")
    assert r.status_code == status, r.text[:500]
    assert r.headers["content-type"] == "application/json"
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert says in error["message"], error
    assert error["param"] == param, error
    assert "Traceback" not in r.text and 'File "' not in r.text


@pytest.mark.parametrize(("endpoint", "bad"), ALL, ids=[f"{e} {b.name}" for e, b in ALL])
def test_bad_bodies_are_refused_by_name(client: httpx.Client, endpoint: str, bad: Bad) -> None:
    r = client.post(endpoint, content=bad.body, headers={"Content-Type": "application/json"})
    assert_refused(r, bad.status, bad.says, bad.param)


@pytest.mark.parametrize("endpoint", [CHAT, TEXT])
def test_20000_choices_are_answered_with_one_of_them(client: httpx.Client, endpoint: str) -> None:
    """Each choice was once a parser alternative, and a sampled first token that kept
    more than 2,000 of them alive failed the request (or not, by the draw); as one lexeme
    the list is answered, whatever is drawn."""
    for seed in range(3):
        body = BODIES[endpoint] | {"structured_outputs": {"choice": CHOICES}, "seed": seed}
        r = client.post(endpoint, json=body | {"temperature": 1.0, "max_tokens": 8})
        assert r.status_code == 200, r.text[:500]
        record("inputs tried")
        choice = r.json()["choices"][0]
        text = choice["message"]["content"] if endpoint == CHAT else choice["text"]
        assert text in CHOICES and choice["finish_reason"] == "stop", choice


def test_a_grammar_failing_beside_other_streams_fails_only_its_request(server: Server) -> None:
    """A regex too costly to lex fails in the engine step it shares with others: its
    request is a 400 naming the constraint, and the streams decoding beside it go on to
    their end (once, the whole batch failed with it)."""
    costly = BODIES[CHAT] | {"structured_outputs": {"regex": "a{99999999}"}, "max_tokens": 8}
    body = BODIES[CHAT] | {"max_tokens": 24, "ignore_eos": True, "temperature": 0}
    body |= {"stream": True, "stream_options": {"include_usage": True}}

    async def stream(http: httpx.AsyncClient, decoding: asyncio.Event) -> list[dict[str, Any]]:
        async with http.stream("POST", CHAT, json=body) as r:
            assert r.status_code == 200
            chunks = []
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    chunks.append(json.loads(line.removeprefix("data: ")))
                    if len(chunks) == 3:
                        decoding.set()
            return chunks

    async def both() -> tuple[list[list[dict[str, Any]]], httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as http:
            decoding = [asyncio.Event() for _ in range(2)]
            streams = [asyncio.create_task(stream(http, d)) for d in decoding]
            for d in decoding:
                await d.wait()
            refused = await http.post(CHAT, json=costly)
            return list(await asyncio.gather(*streams)), refused

    streams, refused = asyncio.run(both())
    assert_refused(refused, 400, "the output cannot follow the structured_outputs", "constraint")
    for chunks in streams:
        assert all("error" not in c for c in chunks), chunks
        finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        assert [f for f in finishes if f] == ["length"], chunks
        assert chunks[-1]["usage"]["completion_tokens"] == 24


@pytest.mark.parametrize("endpoint", list(BODIES))
def test_a_10_mb_body_is_a_413_said_or_streamed(client: httpx.Client, endpoint: str) -> None:
    big = json.dumps(_set(BODIES[endpoint], ("padding",), "x" * 10 * 2**20)).encode()

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 2**16):
            yield big[i : i + 2**16]

    headers = {"Content-Type": "application/json"}
    for content in (big, chunked()):
        r = client.post(endpoint, content=content, headers=headers)
        assert_refused(r, 413, "--max-body-mb", None)
        assert r.json()["error"]["code"] == "body_too_large"


def test_runs_want_json_and_last_event_id_a_seq(client: httpx.Client) -> None:
    body = json.dumps(BODIES[RUNS]).encode()
    r = client.post(RUNS, content=body, headers={"Content-Type": "text/plain"})
    assert_refused(r, 415, "Content-Type: application/json", None)
    run = client.post(RUNS, content=body, headers={"Content-Type": "application/json"})
    assert run.status_code == 201, run.text
    events = f"{RUNS}/{run.json()['run_id']}/events"
    for value in ("-1", "x", "1e400", "9" * 5000):
        r = client.get(events, headers={"Last-Event-ID": value})
        assert_refused(r, 400, "Last-Event-ID", None)
        r = client.get(events, params={"last_event_id": value})
        assert_refused(r, 400, "Last-Event-ID", None)
    assert client.get(events).status_code == 200  # the whole run, once it is over


# the fields the endpoints read (and one they do not), to be given any JSON value
FIELDS = sorted(
    {k for body in BODIES.values() for k in body}
    | {
        "stream",
        "stream_options",
        "stop",
        "n",
        "seed",
        "temperature",
        "top_p",
        "top_k",
        "logit_bias",
        "logprobs",
        "response_format",
        "structured_outputs",
        "echo",
        "continue_final_message",
        "min_tokens",
        "stop_token_ids",
        "dry_multiplier",
        "unknown",
    }
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def assert_answered(r: httpx.Response) -> None:
    """Served, or refused in OpenAI's shape with a message: never a server error."""
    record("inputs tried")
    assert r.status_code < 500, r.text[:500]
    assert "Traceback" not in r.text
    if r.status_code >= 400:
        error = r.json()["error"]
        assert error["message"] and error["type"], error


@FUZZ
@given(endpoint=st.sampled_from(list(BODIES)), field=st.sampled_from(FIELDS), value=JSON_VALUES)
def test_any_value_in_any_field(
    client: httpx.Client, endpoint: str, field: str, value: Any
) -> None:
    body = json.dumps({**BODIES[endpoint], field: value}).encode()  # NaN and Infinity too
    assert_answered(client.post(endpoint, content=body, headers=JSON_TYPE))


@FUZZ
@given(endpoint=st.sampled_from(list(BODIES)), body=st.binary(max_size=200))
def test_any_bytes(client: httpx.Client, endpoint: str, body: bytes) -> None:
    r = client.post(endpoint, content=body, headers=JSON_TYPE)
    assert_answered(r)
    assert r.status_code == 400 or body.strip().startswith(b"{"), r.text


@pytest.mark.parametrize("endpoint", list(BODIES))
def test_a_stalled_body_is_a_408_and_holds_no_place(server: Server, endpoint: str) -> None:
    """Six uploads that stall, against four places in the queue (--max-queue 4): the four
    admitted are answered 408 once they have stalled for --body-timeout and give their
    places back, the other two a 429 at once (runs: a 408 each, their queue is another)."""
    host, port = server.url.removeprefix("http://").split(":")
    head = (
        f"POST {endpoint} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n"
    ).encode()
    socks = [socket.create_connection((host, int(port)), timeout=TIMEOUT) for _ in range(6)]
    statuses = []
    try:
        for sock in socks:
            sock.sendall(head + b'{"model": ')  # and nothing more
        for sock in socks:
            answer = _read_response(sock)
            record("inputs tried")
            status = int(answer.split(b" ", 2)[1])
            error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
            assert error["code"] == {408: "body_timeout", 429: "queue_full"}[status], error
            statuses.append(status)
    finally:
        for sock in socks:
            sock.close()
    assert sorted(statuses) == ([408] * 6 if endpoint == RUNS else [408] * 4 + [429] * 2)
    assert server.metrics()["gen_http_requests_in_flight"] == 0


def _read_response(sock: socket.socket) -> bytes:
    """One response, read until the server closes the connection (it does, its request's
    body unread) or the JSON body is whole."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = [ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
        if length and len(body) >= int(length[0].split(b":")[1]):
            break
    return data


def test_the_server_still_answers(server: Server, client: httpx.Client) -> None:
    body = {**BODIES[CHAT], "max_tokens": 3}
    r = client.post(CHAT, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] in ("stop", "length")
    assert server.metrics()["gen_http_requests_in_flight"] == 0
    assert "Traceback" not in server.output(), server.output()[-4000:]
