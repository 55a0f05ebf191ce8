"""Answering with generations (one per choice: a text completion's list of prompts has
several): Server-Sent Events in OpenAI's order (opening chunks, text chunks, exactly one
chunk with a finish_reason per choice, the usage chunk if asked, `[DONE]`; an error
mid-stream as the endpoint words it, `data: {"error": …}` for completions, then `[DONE]`),
or one JSON body once all are done. Either way a client that goes away ends its
generations at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol, TypeVar

import anyio
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gen.backends.base import Delta
from gen.backends.collect import Collected, collect
from gen.server.errors import APIError, from_exception
from gen.server.openai.generation import Generation
from gen.server.openai.responses import ErrorResponse, dump, usage
from gen.server.openai.responses_api import StreamEvent
from gen.server.sse import EventStream, data, disconnected

Chunk = BaseModel | str  # a chunk, or one already written as JSON (a TextStamp's)


class Chunks(Protocol):
    """How one endpoint words its answer: streamed as chunks (opening, those of each delta,
    those of the finish, usage; those of an error mid-stream), or whole as one `body` with
    its one `choice`."""

    id: str
    created: int
    model: str

    @property
    def body(self) -> Callable[..., BaseModel]: ...  # ChatCompletion, Completion

    def opening(self) -> Sequence[Chunk]: ...

    def piece(self, delta: Delta) -> Sequence[Chunk]: ...

    def finish(self, delta: Delta) -> Sequence[Chunk]: ...

    def usage(self, delta: Delta) -> BaseModel: ...

    def choice(self, done: Collected) -> BaseModel: ...

    def failure(self, error: APIError) -> Sequence[Chunk]: ...


def error_chunks(error: APIError) -> list[BaseModel]:
    """An error mid-stream as chat and text completions send it: `data: {"error": …}`."""
    return [ErrorResponse.model_validate(error.body())]


def summed(counts: Sequence[Delta | Collected]) -> Delta:
    """The choices' token counts added up: a request's usage."""
    return Delta(
        "",
        prompt_tokens=sum(c.prompt_tokens for c in counts),
        cached_prompt_tokens=sum(c.cached_prompt_tokens for c in counts),
        completion_tokens=sum(c.completion_tokens for c in counts),
    )


def whole(chunks: Sequence[Chunks], done: Sequence[Collected]) -> BaseModel:
    """The answer to a request not streamed, once its generations are done."""
    first = chunks[0]
    return first.body(
        id=first.id,
        created=first.created,
        model=first.model,
        choices=[c.choice(d) for c, d in zip(chunks, done, strict=True)],
        usage=usage(summed(done)),
    )


T = TypeVar("T")


async def merged(streams: Sequence[AsyncIterator[T]]) -> AsyncIterator[tuple[int, T]]:
    """The items of several streams as they come, each with its stream's index; the first
    error of any ends it."""
    if len(streams) == 1:
        async for item in streams[0]:
            yield 0, item
        return
    queue: asyncio.Queue[tuple[int, bool, Any]] = asyncio.Queue()  # (i, ended, item)

    async def pump(i: int, stream: AsyncIterator[T]) -> None:
        try:
            async for item in stream:
                await queue.put((i, False, item))
        except Exception as exc:
            await queue.put((i, True, exc))
        else:
            await queue.put((i, True, None))

    tasks = [asyncio.ensure_future(pump(i, s)) for i, s in enumerate(streams)]
    try:
        live = len(tasks)
        while live:
            i, ended, item = await queue.get()
            if isinstance(item, Exception) and ended:
                raise item
            if ended:
                live -= 1
            else:
                yield i, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _event(chunk: Chunk) -> bytes:
    if isinstance(chunk, str):
        return data(chunk)
    if isinstance(chunk, StreamEvent):  # the Responses API names each event by its type
        return data(chunk.model_dump_json(), name=chunk.type)
    return data(chunk.model_dump_json())


async def _events(
    gens: Sequence[Generation], chunks: Sequence[Chunks], include_usage: bool
) -> AsyncIterator[bytes]:
    try:
        for c in chunks:
            for chunk in c.opening():
                yield _event(chunk)
        ends: list[Delta] = []
        async for i, d in merged([g.deltas() for g in gens]):
            if d.text or d.logprobs:
                for chunk in chunks[i].piece(d):
                    yield _event(chunk)
            if d.finish_reason is not None:
                for chunk in chunks[i].finish(d):
                    yield _event(chunk)
                ends.append(d)
        if include_usage:
            yield _event(chunks[0].usage(summed(ends)))
    except Exception as exc:  # mid-stream: the status line has gone out already
        for chunk in chunks[0].failure(from_exception(exc)):
            yield _event(chunk)
    finally:
        with anyio.CancelScope(shield=True):  # a client gone: abort now, even while cancelled
            await _close(gens)
    yield data("[DONE]")


async def _close(gens: Sequence[Generation]) -> None:
    for gen in gens:
        await gen.close()


async def _collect_all(gens: Sequence[Generation]) -> list[Collected]:
    return list(await asyncio.gather(*(collect(g) for g in gens)))


async def collect_unless_gone(
    request: Request, gens: Sequence[Generation]
) -> list[Collected] | None:
    """The whole generations, or None (and the generations aborted) if the client went
    away first."""
    done = asyncio.ensure_future(_collect_all(gens))
    gone = asyncio.ensure_future(disconnected(request.receive))
    try:
        await asyncio.wait([done, gone], return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not done.done():
            done.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gone
        with anyio.CancelScope(shield=True):
            await _close(gens)
    if not done.done() or done.cancelled():
        with contextlib.suppress(asyncio.CancelledError):
            await done
        return None
    return done.result()


async def respond(
    request: Request,
    gens: Sequence[Generation],
    chunks: Sequence[Chunks],
    *,
    stream: bool,
    include_usage: bool,
) -> Response:
    """The answer to a completion request (a choice per generation, `chunks[i]` wording
    `gens[i]`'s), streamed or whole (499 when the client left before it finished)."""
    if stream:  # the generations closed however the response ends (even before it began)
        return EventStream(_events(gens, chunks, include_usage), on_close=lambda: _close(gens))
    done = await collect_unless_gone(request, gens)
    if done is None:
        return Response(status_code=499)  # nobody is there to read it
    return JSONResponse(dump(whole(chunks, done)))
