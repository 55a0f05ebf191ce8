"""Reading a request: the shared server state, a place in its queue for a generation
request, a JSON body (sent as JSON: else a 415) as a pydantic model or a 400 naming the
parameter, and its prompt encoded on or off the event loop by its size."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from gen.server.body import parse_json
from gen.server.errors import APIError, from_validation
from gen.server.openai.generation import Place
from gen.server.state import ServerState

Body = TypeVar("Body", bound=BaseModel)
P = ParamSpec("P")
R = TypeVar("R")

# the most characters of prompt text encoded on the event loop (a millisecond or two of
# chat template and tokenizer); a longer prompt goes to a worker thread, since encoding it
# can take seconds while other streams wait. (Handing a short one to a thread and back
# cost more than encoding it: about 1 ms of a single stream's first token on two cores.)
INLINE_CHARS = 8192


async def encoded(chars: int, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """fn(*args, **kwargs), which encodes a prompt of about `chars` characters: here if
    it is short, on a worker thread if not."""
    if chars <= INLINE_CHARS:
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


def text_size(*parts: Any) -> int:
    """About how many characters of text `parts` hold (strings, token ids as four, and
    those in lists, dicts and models of them): what encoding them costs goes with it."""
    size = 0
    stack = list(parts)
    while stack:
        part = stack.pop()
        if isinstance(part, str):
            size += len(part)
        elif isinstance(part, int):  # a token id: about four characters of text
            size += 4
        elif isinstance(part, dict):
            stack.extend(part.values())
        elif isinstance(part, (list, tuple)):
            stack.extend(part)
        elif isinstance(part, BaseModel):
            stack.extend(part.__dict__.values())
    return size


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


def require_json(request: Request) -> None:
    """A POST to /v1/* must say it is JSON: a form or text/plain POST is what another site
    can make a browser send without asking (CORS lets no such request through)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        raise APIError(
            415,
            f"send the request with Content-Type: application/json (got {kind or 'none'})",
            code="unsupported_media_type",
        )


async def parse_body(request: Request, model: type[Body]) -> Body:
    """The JSON body (415 if not sent as JSON) as `model`, or a 400 naming the parameter."""
    require_json(request)
    data = parse_json(await request.body())
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


def admitted(
    handler: Callable[[Request, Place], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint that generates: a place in the queue first (429 past --max-queue, before
    the body is read), held by its generation once there is one, else given back."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        place = server_state(request).admission.enter()
        try:
            return await handler(request, place)
        except BaseException:
            place.leave()  # (a generation that took it has given it back already)
            raise

    return endpoint
