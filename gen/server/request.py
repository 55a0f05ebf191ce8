"""Reading a request: the shared server state, a place in its queue for a generation
request, and a JSON body as a pydantic model or a 400 naming the parameter."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from gen.server.body import parse_json
from gen.server.errors import from_validation
from gen.server.openai.generation import Place
from gen.server.state import ServerState

Body = TypeVar("Body", bound=BaseModel)


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


async def parse_body(request: Request, model: type[Body]) -> Body:
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
