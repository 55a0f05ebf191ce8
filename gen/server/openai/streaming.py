"""Answering with a generation: Server-Sent Events in OpenAI's order (opening chunks, text
chunks, exactly one chunk with a finish_reason, the usage chunk if asked, `[DONE]`; an
error mid-stream as `data: {"error": …}` then `[DONE]`), or one JSON body once it is done.
Either way a client that goes away ends its generation at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import anyio
from pydantic import BaseModel
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from gen.backends.base import Delta
from gen.backends.collect import Collected, collect
from gen.server.errors import from_exception
from gen.server.openai.generation import Generation
from gen.server.openai.responses import dump, usage


class Chunks(Protocol):
    """How one endpoint words its answer: streamed as chunks (opening, a piece per delta,
    finish, usage), or whole as one `body` with its one `choice`."""

    id: str
    created: int
    model: str

    @property
    def body(self) -> Callable[..., BaseModel]: ...  # ChatCompletion, Completion

    def opening(self) -> list[BaseModel]: ...

    def piece(self, delta: Delta) -> BaseModel: ...

    def finish(self, delta: Delta) -> BaseModel: ...

    def usage(self, delta: Delta) -> BaseModel: ...

    def choice(self, done: Collected) -> BaseModel: ...


def whole(chunks: Chunks, done: Collected) -> BaseModel:
    """The answer to a request not streamed, once its generation is done."""
    return chunks.body(
        id=chunks.id,
        created=chunks.created,
        model=chunks.model,
        choices=[chunks.choice(done)],
        usage=usage(done),
    )


def _data(data: str) -> ServerSentEvent:
    return ServerSentEvent(data=data, sep="\n")  # "data: …\n\n", as OpenAI frames it


def _event(chunk: BaseModel) -> ServerSentEvent:
    return _data(chunk.model_dump_json())


async def _events(
    gen: Generation, chunks: Chunks, include_usage: bool
) -> AsyncIterator[ServerSentEvent]:
    try:
        for chunk in chunks.opening():
            yield _event(chunk)
        async for d in gen.deltas():
            if d.text or d.logprobs:
                yield _event(chunks.piece(d))
            if d.finish_reason is not None:
                yield _event(chunks.finish(d))
                if include_usage:
                    yield _event(chunks.usage(d))
    except Exception as exc:  # mid-stream: the status line has gone out already
        yield _data(json.dumps(from_exception(exc).body(), ensure_ascii=False))
    finally:
        with anyio.CancelScope(shield=True):  # a client gone: abort now, even while cancelled
            await gen.close()
    yield _data("[DONE]")


class _GenerationEvents(EventSourceResponse):
    """The events of one generation, closed however the response ends (even one whose
    events never started: a client gone before the headers)."""

    def __init__(self, gen: Generation, chunks: Chunks, include_usage: bool) -> None:
        super().__init__(_events(gen, chunks, include_usage), sep="\n", ping=15)
        self.gen = gen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.gen.close()


def event_stream(gen: Generation, chunks: Chunks, include_usage: bool) -> EventSourceResponse:
    return _GenerationEvents(gen, chunks, include_usage)


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def collect_unless_gone(request: Request, gen: Generation) -> Collected | None:
    """The whole generation, or None (and the generation aborted) if the client went away
    first."""
    done = asyncio.ensure_future(collect(gen))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait([done, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not done.done():
            done.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gone
        with anyio.CancelScope(shield=True):
            await gen.close()
    if not done.done() or done.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await done
        return None
    return done.result()


async def respond(
    request: Request,
    gen: Generation,
    chunks: Chunks,
    *,
    stream: bool,
    include_usage: bool,
) -> Response:
    """The answer to a completion request, streamed or whole (499 when the client left
    before it finished)."""
    if stream:
        return event_stream(gen, chunks, include_usage)
    done = await collect_unless_gone(request, gen)
    if done is None:
        return Response(status_code=499)  # nobody is there to read it
    return JSONResponse(dump(whole(chunks, done)))
