"""Reading a request: the shared server state, and a JSON body as a pydantic model or a 400
naming the parameter."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from gen.server.body import parse_json
from gen.server.errors import from_validation
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
