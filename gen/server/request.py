"""Reading a request: the shared server state, a place in its queue for a generation
request, and a JSON body (sent as JSON: else a 415) as a pydantic model or a 400 naming
the parameter."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from gen.server.body import parse_json
from gen.server.errors import APIError, from_validation
from gen.server.openai.generation import Place
from gen.server.state import ServerState

Body = TypeVar("Body", bound=BaseModel)


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
