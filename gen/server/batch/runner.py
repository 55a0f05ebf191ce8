"""Running an OpenAI batch file: every request through `gen serve`'s own app, in process
(httpx's ASGITransport, no socket), so each answer is the status and body `gen serve` gives
for it; at most `concurrency` requests at once, all in the one continuously batched engine.
Answered requests (200) go to the output file, the rest to the errors file; a request the
output file already holds is not run again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import BaseModel, ValidationError

from gen.errors import ConfigError, GenError
from gen.server.app import create_app
from gen.server.batch.inputs import BatchRequest
from gen.server.batch.outputs import (
    Entry,
    ResultFile,
    error_entry,
    response_entry,
    succeeded,
)
from gen.server.config import ServerConfig
from gen.server.errors import APIError, from_validation
from gen.server.openai.generation import ServedModel
from gen.server.openai.requests import ChatCompletionRequest, CompletionRequest
from gen.values import described

JSON = {"Content-Type": "application/json"}
BODIES: dict[str, type[BaseModel]] = {
    "/v1/chat/completions": ChatCompletionRequest,
    "/v1/completions": CompletionRequest,
}
OnStart = Callable[[BatchRequest], None]
OnResult = Callable[[BatchRequest, Entry], None]


class _InProcess(httpx.ASGITransport):
    """The app called in process; closing it closes the backend (the app's lifespan, which
    would, does not run here)."""

    def __init__(self, backend: ServedModel) -> None:
        super().__init__(app=create_app(backend, ServerConfig()), raise_app_exceptions=False)
        self.backend = backend

    async def aclose(self) -> None:
        await self.backend.aclose()


def local_client(backend: ServedModel) -> httpx.AsyncClient:
    """A client of `gen serve`'s app over `backend`, called in process, no socket; closing
    the client closes the backend."""
    transport = _InProcess(backend)
    return httpx.AsyncClient(transport=transport, base_url="http://gen-batch/v1", timeout=None)


def remote_client(base_url: str, api_key: str) -> httpx.AsyncClient:
    """A client of a remote OpenAI-compatible server (`--model openai:NAME`)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(None, connect=30)
    return httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)


class OpenAIBatch:
    """The requests of one input file and the two files their answers go to."""

    def __init__(
        self, requests: list[BatchRequest], input_file: Path, output: Path, errors: Path
    ) -> None:
        self.requests = requests
        self.input_file = input_file
        self.output = ResultFile(output)
        self.errors = ResultFile(errors)
        self.kept = 0  # requests answered by an earlier run

    def remaining(self, repair: bool = True) -> list[BatchRequest]:
        """The requests left to run: those the output file does not hold (a torn last line
        cut off, with `repair`). Raises ConfigError where it holds a custom_id the input
        does not have."""
        named = {r.custom_id for r in self.requests if r.custom_id is not None}
        done = set()
        for number, entry in enumerate(self.output.read(repair), 1):
            if entry["custom_id"] not in named:
                raise ConfigError(
                    f"custom_id {entry['custom_id']!r} is no request of {self.input_file}: this "
                    f"output belongs to another batch. Choose another output file, or move "
                    f"this one away",
                    file=str(self.output.path),
                    line=number,
                )
            done.add(entry["custom_id"])
        todo = [r for r in self.requests if r.problem is None and r.custom_id not in done]
        self.kept = sum(r.problem is None for r in self.requests) - len(todo)
        return todo

    def start(self) -> list[Entry]:
        """A fresh errors file (its requests run again) holding the lines that are no
        request; returns those entries."""
        self.output.path.parent.mkdir(parents=True, exist_ok=True)
        self.output.path.touch()  # there even when no request is answered
        self.output.clear_stale()
        self.errors.clear_stale()
        self.errors.path.unlink(missing_ok=True)
        entries = []
        for r in self.requests:
            if r.problem is not None:
                p = r.problem
                entry = error_entry(r.custom_id, p.code, p.message, p.param, r.line)
                self.errors.append(entry)
                entries.append(entry)
        return entries

    async def run(
        self,
        client: httpx.AsyncClient,
        todo: list[BatchRequest],
        concurrency: int,
        on_result: OnResult,
        on_start: OnStart | None = None,
        model: str | None = None,
    ) -> None:
        """Run `todo`, at most `concurrency` at once, each entry appended as it ends.
        `model` fills in a body without one (a remote server needs it)."""
        free = asyncio.Semaphore(concurrency)

        async def one(request: BatchRequest) -> None:
            if on_start is not None:
                on_start(request)
            try:
                entry = await answer(client, request, model)
            finally:
                free.release()
            (self.output if succeeded(entry) else self.errors).append(entry)
            on_result(request, entry)

        try:
            async with asyncio.TaskGroup() as group:
                for request in todo:
                    await free.acquire()
                    group.create_task(one(request))
        except* OSError as failed:  # the disk is full, the folder went away
            raise GenError(f"cannot write the batch's answers: {failed.exceptions[0]}") from None

    def finish(self) -> None:
        """Both files in the input's order (lines of earlier runs included)."""
        order = {r.custom_id: r.line for r in self.requests if r.problem is None}

        def line(entry: Entry) -> int:
            error = entry.get("error") or {}
            return int(error.get("line") or order.get(entry["custom_id"], 0))

        self.output.sort(line)
        self.errors.sort(line)


def streamed(request: BatchRequest) -> APIError | None:
    """A body that asks to be streamed: a 400, since a batch answers each request whole."""
    body = request.body
    if isinstance(body, dict) and body.get("stream") not in (None, False):
        return APIError(
            400,
            "stream: a batch answers each request whole; leave stream out or set it to false",
            param="stream",
            code="invalid_value",
        )
    return None


def body_problem(request: BatchRequest) -> str | None:
    """What is wrong with a request's body as far as it shows without a model (for a dry
    run; the app checks it again, and more, when it runs)."""
    refused = streamed(request)
    if not isinstance(request.body, dict):
        got = described(request.body, json=True)
        refused = APIError(400, f"the body must be a JSON object, got {got}")
    elif refused is None:
        try:
            BODIES[request.url].model_validate(request.body)
        except ValidationError as exc:
            refused = from_validation(exc)
    return None if refused is None else f"{refused.status} {refused.message}"


async def answer(client: httpx.AsyncClient, request: BatchRequest, model: str | None) -> Entry:
    """One request's entry: the server's status and body, or why there is none."""
    custom_id = request.custom_id or ""
    refused = streamed(request)
    if refused is not None:
        return response_entry(custom_id, refused.status, refused.body())
    body = request.body
    if model is not None and isinstance(body, dict) and "model" not in body:
        body = {**body, "model": model}
    content = json.dumps(body).encode("utf-8")  # (ASCII: a lone surrogate stays escaped)
    path = request.url.removeprefix("/v1")
    while True:
        try:
            reply = await client.post(path, content=content, headers=JSON)
        except httpx.HTTPError as exc:
            return error_entry(custom_id, "request_failed", f"{type(exc).__name__}: {exc}")
        if reply.status_code != 429:  # busy: wait as it asks, then again
            break
        await asyncio.sleep(_seconds(reply.headers.get("retry-after")))
    try:
        data = reply.json()
    except ValueError:
        message = f"the server answered {reply.status_code} with no JSON body"
        return error_entry(custom_id, "request_failed", message)
    return response_entry(custom_id, reply.status_code, data, reply.headers.get("x-request-id"))


def _seconds(retry_after: str | None) -> float:
    try:
        return min(60.0, max(0.1, float(retry_after or 1)))
    except ValueError:
        return 1.0
