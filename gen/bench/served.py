"""`gen bench`'s served figure: the mixed workload sent to a `gen serve` that the bench
starts on loopback, one concurrent streaming HTTP client per request. `running` starts,
polls and stops such a server (a peer's too, and the tests' gen serve)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import SplitResult, urlsplit

import httpx

from gen.backends.base import Message

START_SECONDS = 600.0  # loading the model (converting it, the first time)


@dataclass(frozen=True, slots=True)
class Single:
    """One stream alone: seconds to its first text, and tokens a second after it."""

    first_token: float
    decode_tokens_per_second: float


@dataclass(frozen=True, slots=True)
class Served:
    """The mixed batch over HTTP and in process, taken in turns (served, then in process,
    `rounds` times) so that the machine's drift falls on both alike; and single streams
    in turns the same way, each pair on a prompt neither side has seen."""

    seconds: list[float]  # each round: from the first request sent to the last stream's end
    in_process_seconds: list[float]  # each round: the same batch in process, just after
    tokens: int  # completion tokens, as the server's usage chunks count them (last round)
    identical: int  # streams whose text equals the in-process text for the same request
    single: list[Single]  # single streams, one after another, after the mixed batch
    single_here: list[Single]  # each of the same prompts in process, just after its served one


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Started:
    """A server `running` started: its process, and what it has written so far."""

    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


@contextlib.contextmanager
def running(
    command: list[str], url: str, name: str, start_seconds: float, env: dict[str, str] | None = None
) -> Iterator[Started]:
    """The server `command` as a subprocess, until `url`/health answers 200; stopped (and
    killed if it will not stop) when the block ends. Its output goes to a temporary file,
    shown if it exits or does not answer within start_seconds (a guard against hanging,
    not a timing check)."""
    with tempfile.TemporaryFile() as log:
        started = Started(subprocess.Popen(command, stdout=log, stderr=log, env=env), log)
        try:
            _wait_for_health(started, url, name, start_seconds)
            yield started
        finally:
            started.process.terminate()
            try:
                started.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                started.process.kill()
                started.process.wait()


def _wait_for_health(started: Started, url: str, name: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        code = started.process.poll()
        if code is not None:
            raise RuntimeError(f"{name} exited with {code}:\n{started.output()[-8000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer /health:\n{started.output()[-8000:]}")
        time.sleep(0.2)


@contextlib.contextmanager
def serving(model: str, dtype: str | None, slots: int) -> Iterator[str]:
    """A `gen serve` subprocess on a free loopback port; yields its /v1 URL."""
    port = free_port()
    command = [sys.executable, "-m", "gen.cli", "serve", "--port", str(port), "--model", model]
    command += ["--max-slots", str(slots), *(["--dtype", dtype] if dtype else [])]
    env = {k: v for k, v in os.environ.items() if k != "GEN_API_KEY"}
    url = f"http://127.0.0.1:{port}"
    with running(command, url, "gen serve", START_SECONDS, env):
        yield f"{url}/v1"


class ServedError(Exception):
    """A streamed request that failed: refused, dropped mid-stream, or an error event."""


def _request(url: SplitResult, path: str, body: dict[str, Any], keep_alive: bool = False) -> bytes:
    """A streamed POST of body as JSON; the connection closed after its answer unless
    kept alive."""
    payload = json.dumps(body).encode()
    head = (
        f"POST {url.path}{path} HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        f"Accept: text/event-stream\r\nConnection: {'keep-alive' if keep_alive else 'close'}"
        "\r\n\r\n"
    )
    return head.encode() + payload


class _Answer:
    """The `data:` fields of a streamed HTTP/1.1 answer, parsed from its bytes as they
    come, whichever client reads them off the socket (feed(b"") when it closes)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.buffer = b""  # bytes not yet parsed
        self.body = b""  # the body's bytes past its last whole event
        self.status: int | None = None
        self.chunked = False
        self.length: int | None = None  # the body's, where the headers give it
        self.ended = False

    def feed(self, piece: bytes) -> list[bytes]:
        """The data fields of the events that piece completes."""
        self.buffer += piece
        if self.status is None and (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            headers = self.buffer[:end].decode("latin-1").lower()
            self.status = int(headers.split(" ", 2)[1])
            self.chunked = "transfer-encoding: chunked" in headers
            length = re.search(r"^content-length:\s*(\d+)", headers, re.M)
            self.length = int(length.group(1)) if length else None
            self.buffer = self.buffer[end + 4 :]
        if self.status is None and not piece:
            raise ServedError(f"the stream from {self.base} broke off before its answer")
        if self.status != 200:
            whole = self.length is not None and len(self.buffer) >= self.length
            if whole or not piece:  # (its whole answer has come: it says why)
                said = self.buffer.decode("utf-8", "replace")
                raise ServedError(f"{self.base} answered {self.status}: {said}")
            return []
        if not self.chunked:
            self.body, self.buffer = self.body + self.buffer, b""
        while self.chunked and not self.ended and (end := self.buffer.find(b"\r\n")) >= 0:
            size = int(self.buffer[:end].split(b";")[0], 16)
            if size == 0:
                self.ended = True
            elif len(self.buffer) < end + size + 4:
                break
            self.body += self.buffer[end + 2 : end + 2 + size]
            self.buffer = self.buffer[end + size + 4 :]
        if not piece:
            if self.chunked and not self.ended:
                raise ServedError(f"the stream from {self.base} broke off mid-answer")
            self.ended = True
        *events, self.body = self.body.replace(b"\r\n", b"\n").split(b"\n\n")
        lines = [line for event in events for line in event.split(b"\n")]
        return [line[5:].lstrip(b" ") for line in lines if line.startswith(b"data:")]


async def _data_lines(base: str, path: str, body: dict[str, Any]) -> AsyncIterator[bytes]:
    """The `data:` fields of a streamed POST's events, read off the socket as they come.
    A bare HTTP/1.1 client: httpx's line reader cost ~0.45 ms of CPU an event, so 32
    clients on the server's own two cores took a sixth of what the engine had."""
    url = urlsplit(base)
    try:
        reader, writer = await asyncio.open_connection(url.hostname, url.port or 80)
    except OSError as exc:
        raise ServedError(f"cannot connect to {base}: {exc}") from exc
    try:
        writer.write(_request(url, path, body))
        answer = _Answer(base)
        while not answer.ended:
            for line in answer.feed(await reader.read(65536)):
                yield line
    except (OSError, ValueError) as exc:
        raise ServedError(f"the stream from {base} broke: {exc!r}") from exc
    finally:
        writer.close()


def _chunk(data: bytes) -> tuple[str, int | None]:
    """A streamed chat chunk's text, and the completion tokens where it carries the
    usage; ServedError for an error event. ([DONE]: no text, no usage.)"""
    if data == b"[DONE]":
        return "", None
    chunk = json.loads(data)
    if "error" in chunk:
        raise ServedError(f"the server: {chunk['error']}")
    text = "".join(choice["delta"].get("content") or "" for choice in chunk["choices"])
    usage = chunk.get("usage")
    return text, usage["completion_tokens"] if usage else None


async def _stream(base: str, body: dict[str, Any]) -> tuple[str, int]:
    """The text and completion tokens of one streamed chat request."""
    text, tokens = "", 0
    async for data in _data_lines(base, "/chat/completions", body):
        piece, used = _chunk(data)
        text += piece
        tokens = tokens if used is None else used
    return text, tokens


class Client:
    """Requests one after another on one kept-alive HTTP/1.1 connection (as an OpenAI
    client keeps its connections), read on this thread with a blocking socket. (An
    asyncio client took ~0.3 ms of CPU a token from the two cores the server decodes on:
    the same stream measured 7% slower through it than through this one, in one run.)"""

    def __init__(self, base: str) -> None:
        self.base = base
        self.url = urlsplit(base)
        self.sock: socket.socket | None = None

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _data_lines(self, path: str, body: dict[str, Any]) -> Iterator[bytes]:
        """_data_lines on this thread. A kept connection that the server has closed
        meanwhile is opened again for the request."""
        request = _request(self.url, path, body, keep_alive=True)
        for _ in range(2):
            kept = self.sock is not None
            try:
                if self.sock is None:
                    address = (self.url.hostname, self.url.port or 80)
                    self.sock = socket.create_connection(address, timeout=600)
                self.sock.sendall(request)
                piece = self.sock.recv(65536)
            except OSError as exc:
                self.close()
                if kept:
                    continue
                raise ServedError(f"cannot send to {self.base}: {exc!r}") from exc
            if piece or not kept:
                break
            self.close()  # (closed by the server while kept)
        sock, answer = self.sock, _Answer(self.base)
        assert sock is not None
        try:
            yield from answer.feed(piece)
            while not answer.ended:
                yield from answer.feed(sock.recv(65536))
        except OSError as exc:
            self.close()
            raise ServedError(f"the stream from {self.base} broke: {exc!r}") from exc
        except BaseException:
            self.close()
            raise

    def send_one(self, body: dict[str, Any]) -> Single:
        """One body alone: its time to first text and its decode speed (tokens after the
        first over the time after the first)."""
        times: list[float] = []
        tokens = 0
        start = time.perf_counter()
        for data in self._data_lines("/chat/completions", body):
            piece, used = _chunk(data)
            if piece:
                times.append(time.perf_counter())
            tokens = tokens if used is None else used
        return Single(times[0] - start, (tokens - 1) / (times[-1] - times[0]))


async def send_all(url: str, bodies: list[dict[str, Any]]) -> tuple[list[tuple[str, int]], float]:
    """Each body as its own streaming client, all at once: each stream's text and
    completion tokens, and the seconds for all."""
    start = time.perf_counter()
    results = await asyncio.gather(*(_stream(url, b) for b in bodies))
    return list(results), time.perf_counter() - start


def mixed_bodies(
    model_name: str, messages: list[list[Message]], lengths: list[int]
) -> list[dict[str, Any]]:
    """The mixed workload as chat requests: greedy, EOS ignored, streamed with usage."""
    return [
        {
            "model": model_name,
            "messages": m,
            "max_tokens": n,
            "temperature": 0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for m, n in zip(messages, lengths, strict=True)
    ]


def run_served(
    model: str,
    dtype: str | None,
    model_name: str,
    messages: list[list[Message]],
    lengths: list[int],
    expected: list[str],
    here: Callable[[], float],
    single: list[list[Message]],
    single_tokens: int,
    here_single: Callable[[list[Message]], Single],
    rounds: int = 2,
) -> Served:
    """Greedy, EOS ignored, request i asking for lengths[i] tokens, all sent at once:
    once untimed (the server warm: its KV memory grown, its prompts' prefixes kept, as
    the in-process figure is taken), then `rounds` times each followed by `here()`, the
    same batch in process (its seconds). Then each of `single` alone, single_tokens
    tokens each, followed by `here_single` on the same messages."""
    bodies = mixed_bodies(model_name, messages, lengths)
    alone = [
        b | {"min_tokens": single_tokens}
        for b in mixed_bodies(model_name, single, [single_tokens] * len(single))
    ]
    seconds: list[float] = []
    in_process: list[float] = []
    with serving(model, dtype, max(16, len(bodies))) as url:
        asyncio.run(send_all(url, bodies))
        for _ in range(rounds):
            results, took = asyncio.run(send_all(url, bodies))
            seconds.append(took)
            in_process.append(here())
        singles, singles_here = [], []
        with contextlib.closing(Client(url)) as client:  # (opened by an untimed request)
            client.send_one(alone[0] | {"messages": messages[0], "max_tokens": 2, "min_tokens": 2})
            for body, m in zip(alone, single, strict=True):
                singles.append(client.send_one(body))
                singles_here.append(here_single(m))
    return Served(
        seconds=seconds,
        in_process_seconds=in_process,
        tokens=sum(tokens for _, tokens in results),
        identical=sum(text == want for (text, _), want in zip(results, expected, strict=True)),
        single=singles,
        single_here=singles_here,
    )
